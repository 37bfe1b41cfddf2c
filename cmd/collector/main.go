package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/collector"
	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.ReadFile, time.Now, os.Stdout, os.Stderr)
	})
}

// config is everything the Collector reads from its environment.
type config struct {
	cluster  string
	repo     githubapp.Repository
	path     string
	branch   string
	interval time.Duration
	addr     string
	app      githubapp.Config
}

// service is the Collector as its --help tells it.
var service = cli.Service{
	Name: "collector",
	Summary: "collector captures the cluster's volume bindings and pod placements when it starts and once every\n" +
		"INTERVAL, and commits them to the Estate repository through a GitHub App whenever a fact changed.",
	Variables: collector.Variables,
}

func loadConfig(getenv func(string) string, readFile func(string) ([]byte, error)) (config, error) {
	s := settings.New(getenv)
	cfg := config{
		cluster:  s.Required("CLUSTER_NAME"),
		path:     s.String("ESTATE_PATH", "cluster-state.yml"),
		branch:   s.String("ESTATE_BRANCH", ""),
		interval: s.Duration("INTERVAL", 10*time.Minute),
		addr:     s.Address("ADDR", ":8080"),
	}
	repo := s.Required("ESTATE_REPOSITORY")
	if err := s.Err(); err != nil {
		return config{}, err
	}
	var err error
	if cfg.repo, err = githubapp.ParseRepository(repo); err != nil {
		return config{}, fmt.Errorf("ESTATE_REPOSITORY: %w", err)
	}
	if cfg.app, err = githubapp.FromEnv(getenv, readFile); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// run answers its command line, or starts the Collector and serves until
// ctx ends; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, readFile func(string) ([]byte, error), now func() time.Time,
	stdout, logs io.Writer) int {
	env := cli.NewEnv(getenv, stdout, logs)
	env.Now = now
	return env.Execute(ctx, cli.Command{Service: service,
		Run: func(ctx context.Context, env cli.Env) error { return collect(ctx, env, readFile) }}, args)
}

// collect reads the settings, connects, and captures beside its server.
func collect(ctx context.Context, env cli.Env, readFile func(string) ([]byte, error)) error {
	logger, now := env.Log, env.Now
	cfg, err := loadConfig(env.Getenv, readFile)
	if err != nil {
		return cli.BadSetting(err)
	}
	rest, err := kubeclient.Config(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	c, err := build(cfg, rest, now, logger)
	if err != nil {
		return cli.Failed("cannot start", err)
	}
	loop := &periodic.Loop{Interval: cfg.interval, Pass: c.Pass, Now: now, Logger: logger, Name: "capture"}
	logger.Info("collector started", slog.String("cluster", cfg.cluster), slog.String("repository", cfg.repo.String()),
		slog.String("path", cfg.path), slog.Duration("interval", cfg.interval))
	err = loop.RunBeside(ctx, func(ctx context.Context) error {
		return server.ListenAndServe(ctx, cfg.addr, server.Config{
			Logger: logger,
			Routes: func(mux *http.ServeMux) { mux.HandleFunc("GET /fresh", loop.FreshHandler) },
		})
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return cli.Failed("server stopped", err)
	}
	return nil
}

// build connects to the cluster rest finds and to GitHub as the App
// installation.
func build(cfg config, rest *rest.Config, now func() time.Time, logger *slog.Logger) (*collector.Collector, error) {
	kube, err := collector.NewKube(rest)
	if err != nil {
		return nil, err
	}
	gh, err := githubapp.New(cfg.app)
	if err != nil {
		return nil, err
	}
	return &collector.Collector{
		Cluster:   cfg.cluster,
		Inventory: kube,
		File:      gh.File(cfg.repo, cfg.path, cfg.branch),
		Now:       now,
		Logger:    logger,
	}, nil
}
