package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/reporter"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.ReadFile, time.Now, os.Stdout, os.Stderr)
	})
}

// DefaultGateURL is the Release Gate in the worked estate.
const DefaultGateURL = reporter.DefaultGateURL

// config is everything the Reporter reads from its environment.
type config struct {
	namespace string
	interval  time.Duration
	addr      string
	gateURL   string
	app       githubapp.Config
}

// service is the Reporter as its --help tells it.
var service = cli.Service{
	Name: "reporter",
	Summary: "reporter keeps every release's GitHub Deployment status current as Flux and Flagger move it: a pass\n" +
		"when it starts, on every event Flux's notification Provider posts to POST /flux, and once every INTERVAL.",
	Variables: reporter.Variables,
}

func loadConfig(getenv func(string) string, readFile func(string) ([]byte, error)) (config, error) {
	s := settings.New(getenv)
	cfg := config{
		namespace: s.String("FLUX_NAMESPACE", "flux-system"),
		interval:  s.Duration("INTERVAL", 30*time.Second),
		addr:      s.Address("ADDR", ":8080"),
		gateURL:   s.String("GATE_URL", DefaultGateURL),
	}
	if err := s.Err(); err != nil {
		return config{}, err
	}
	if u, err := url.Parse(cfg.gateURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return config{}, fmt.Errorf("GATE_URL: %q is not an http(s) URL", cfg.gateURL)
	}
	var err error
	if cfg.app, err = githubapp.FromEnv(getenv, readFile); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// run answers its command line, or starts the Reporter and serves until
// ctx ends; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, readFile func(string) ([]byte, error), now func() time.Time,
	stdout, logs io.Writer) int {
	env := cli.NewEnv(getenv, stdout, logs)
	env.Now = now
	return env.Execute(ctx, cli.Command{Service: service,
		Run: func(ctx context.Context, env cli.Env) error { return report(ctx, env, readFile) }}, args)
}

// report reads the settings, connects, and passes beside its server.
func report(ctx context.Context, env cli.Env, readFile func(string) ([]byte, error)) error {
	logger, now := env.Log, env.Now
	cfg, err := loadConfig(env.Getenv, readFile)
	if err != nil {
		return cli.BadSetting(err)
	}
	rest, err := kubeclient.Config(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	r, err := build(cfg, rest, logger)
	if err != nil {
		return cli.Failed("cannot start", err)
	}
	loop := &periodic.Loop{Interval: cfg.interval, Pass: r.Pass, Now: now, Logger: logger, Name: "pass"}
	logger.Info("reporter started", slog.String("namespace", cfg.namespace), slog.String("gate", cfg.gateURL),
		slog.Duration("interval", cfg.interval))
	err = loop.RunBeside(ctx, func(ctx context.Context) error {
		return server.ListenAndServe(ctx, cfg.addr, server.Config{
			Logger: logger,
			Routes: func(mux *http.ServeMux) {
				mux.HandleFunc("GET /fresh", loop.FreshHandler)
				mux.HandleFunc("POST /flux", fluxEvent(loop))
			},
		})
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return cli.Failed("server stopped", err)
	}
	return nil
}

// fluxEvent answers Flux's notification Provider. The route is unsigned, so
// an event is a prompt to look, never evidence: the body is read within the
// server's bound and discarded unread, and the next pass looks at every unit.
func fluxEvent(loop *periodic.Loop) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			if server.TooLarge(err) {
				server.Answer(w, http.StatusRequestEntityTooLarge, "the event is larger than the bound")
				return
			}
			server.Answer(w, http.StatusBadRequest, "the event could not be read")
			return
		}
		loop.Prompt()
		server.Answer(w, http.StatusAccepted, "a pass will look at every unit")
	}
}

// build connects to the cluster rest finds, to GitHub as the App
// installation, and to the gate.
func build(cfg config, rest *rest.Config, logger *slog.Logger) (*reporter.Reporter, error) {
	kube, err := releasepath.NewKube(rest)
	if err != nil {
		return nil, err
	}
	gh, err := githubapp.New(cfg.app)
	if err != nil {
		return nil, err
	}
	return &reporter.Reporter{
		Namespace:   cfg.namespace,
		Cluster:     kube,
		Deployments: reporter.NewGitHub(gh),
		Gate:        releasepath.NewGateClient(cfg.gateURL),
		Logger:      logger,
	}, nil
}
