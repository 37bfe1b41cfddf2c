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
	"regexp"
	"slices"
	"time"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, time.Now, os.Stdout, os.Stderr) })
}

// config is everything the service reads from its environment.
type config struct {
	cluster, env    string
	recordNamespace string
	mode            releaserecord.Mode
	sink            string
	token           string
	namespaces      *regexp.Regexp
	observeFlux     bool
	fluxNamespace   string
	hmacKey         []byte
	gateURL         string
	gateNamespace   string
	interval        time.Duration
	addr            string
	readCache       time.Duration
	keepHealthy     int
	objectLink      string
}

// service is the release record as its --help tells it.
var service = cli.Service{
	Name: "release-record",
	Summary: "release-record keeps one record per release and sends the release events its facts make due as CDEvents:\n" +
		"it looks at the Flux units, their sources and Canaries, and takes Argo Rollouts' and Argo CD's notifications;\n" +
		"it serves the records (/v1), their DORA figures (/metrics) and a page of them (/).\n" +
		"\"release-record sweep\" raises stall alerts and deletes old records, once (see \"release-record sweep --help\").",
	Variables: slices.Concat(releaserecord.Variables, releasehistory.ReadVariables, releasehistory.ScrapeVariables),
}

func loadConfig(getenv func(string) string) (config, error) {
	s := settings.New(getenv)
	cfg := config{
		cluster: s.Required("CLUSTER_NAME"), env: s.Required("ENVIRONMENT"),
		recordNamespace: s.String("RECORD_NAMESPACE", "delivery-system"),
		mode:            releaserecord.Mode(s.String("FACTS_MODE", string(releaserecord.ModeEmit))),
		token:           getenv("FACTS_TOKEN"),
		fluxNamespace:   s.String("FLUX_NAMESPACE", "flux-system"),
		hmacKey:         []byte(getenv("FLUX_WEBHOOK_HMAC_KEY")),
		gateURL:         s.String("GATE_URL", releaserecord.DefaultGateURL),
		gateNamespace:   s.String("GATE_NAMESPACE", "delivery-system"),
		interval:        s.Duration("INTERVAL", 30*time.Second),
		addr:            s.Address("ADDR", ":8080"),
		readCache:       s.Duration("READ_CACHE", releasehistory.DefaultMaxAge),
		keepHealthy:     s.PositiveInt("KEEP_HEALTHY", 5),
		objectLink:      getenv("OBJECT_LINK"),
	}
	observe := s.String("FLUX_OBSERVE", "true")
	pattern := s.String("ALLOWED_NAMESPACES", ".*")
	if cfg.mode == releaserecord.ModeEmit {
		cfg.sink = s.Required("CDEVENTS_SINK")
	}
	if err := s.Err(); err != nil {
		return config{}, err
	}
	if _, err := releaserecord.NewReleaseID("app", "1", cfg.cluster, cfg.env); err != nil {
		return config{}, fmt.Errorf("CLUSTER_NAME and ENVIRONMENT: %q and %q are not both DNS labels", cfg.cluster, cfg.env)
	}
	switch observe {
	case "true", "false":
		cfg.observeFlux = observe == "true"
	default:
		return config{}, fmt.Errorf("FLUX_OBSERVE: %q is not true or false", observe)
	}
	if cfg.mode != releaserecord.ModeEmit && cfg.mode != releaserecord.ModeShadow {
		return config{}, fmt.Errorf("FACTS_MODE: %q is not emit or shadow", cfg.mode)
	}
	var err error
	if cfg.namespaces, err = regexp.Compile(`^(?:` + pattern + `)$`); err != nil {
		return config{}, fmt.Errorf("ALLOWED_NAMESPACES: %q is not a regular expression", pattern)
	}
	if err := releasehistory.CheckObjectLink(cfg.objectLink); err != nil {
		return config{}, fmt.Errorf("OBJECT_LINK: %q is %w", cfg.objectLink, err)
	}
	for name, raw := range map[string]string{"CDEVENTS_SINK": cfg.sink, "GATE_URL": cfg.gateURL} {
		if u, err := url.Parse(raw); raw != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil) {
			return config{}, fmt.Errorf("%s: %q is not an http(s) URL without credentials", name, raw)
		}
	}
	return cfg, nil
}

// run answers its command line, or starts the service and serves until ctx
// ends, or sweeps once ("sweep"); it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, logs io.Writer) int {
	env := cli.NewEnv(getenv, stdout, logs)
	env.Now = now
	return env.Execute(ctx, cli.Command{
		Service: service,
		Run:     serve,
		Subcommands: []cli.Command{{
			Service: cli.Service{Name: "sweep", Summary: sweepCommand.Summary, Variables: sweepCommand.Variables},
			Short:   "Raise stall alerts and delete old records, once",
			Run:     sweep,
		}},
	}, args)
}

// serve reads the settings, connects, and looks at the Flux units beside
// its server.
func serve(ctx context.Context, env cli.Env) error {
	logger, now := env.Log, env.Now
	cfg, err := loadConfig(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	rest, err := kubeclient.Config(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	svc, observer, err := build(cfg, rest, now, logger)
	if err != nil {
		return cli.Failed("cannot start", err)
	}
	history, err := readHistory(cfg, rest, now, logger)
	if err == nil {
		// /metrics answers the metrics stack alone, as the gate's does.
		history.Scrapers, err = releasehistory.ScrapersFrom(env.Getenv, logger)
	}
	if err != nil {
		return cli.Failed("cannot start", err)
	}
	loop := &periodic.Loop{Interval: cfg.interval, Pass: observer.Pass, Now: now, Logger: logger, Name: "look"}
	prompts := &releaserecord.Prompts{HMACKey: cfg.hmacKey, Prompt: loop.Prompt}
	if !cfg.observeFlux {
		prompts.Prompt = func() {}
	}
	facts := &releaserecord.Facts{Service: svc, Cluster: cfg.cluster, Env: cfg.env, Token: cfg.token, Namespaces: cfg.namespaces,
		Sources: []releaserecord.Pushed{releaserecord.Rollouts{}, releaserecord.ArgoCD{}}, Logger: logger}
	logger.Info("release-record started", slog.String("cluster", cfg.cluster), slog.String("env", cfg.env),
		slog.String("records", cfg.recordNamespace), slog.String("mode", string(cfg.mode)), slog.Bool("observeFlux", cfg.observeFlux))
	listen := func(ctx context.Context) error {
		return server.ListenAndServe(ctx, cfg.addr, server.Config{
			Logger: logger,
			Routes: func(mux *http.ServeMux) {
				if cfg.observeFlux {
					mux.HandleFunc("GET /fresh", loop.FreshHandler)
				}
				prompts.Routes(mux)
				facts.Routes(mux)
				history.Routes(mux)
			},
		})
	}
	if cfg.observeFlux {
		err = loop.RunBeside(ctx, listen)
	} else {
		err = listen(ctx)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return cli.Failed("server stopped", err)
	}
	return nil
}

// build connects to the cluster rest finds for the records and the units,
// and to the sink.
func build(cfg config, rest *rest.Config, now func() time.Time, logger *slog.Logger) (*releaserecord.Service, *releaserecord.Observer, error) {
	store, err := releaserecord.NewKubeStore(rest, cfg.recordNamespace)
	if err != nil {
		return nil, nil, err
	}
	var sink releaserecord.Sink = releaserecord.ShadowSink{Logger: logger}
	if cfg.mode == releaserecord.ModeEmit {
		if sink, err = releaserecord.NewCloudEventsSink(cfg.sink); err != nil {
			return nil, nil, err
		}
	}
	svc := &releaserecord.Service{Store: store, Sink: sink, Logger: logger, Now: now}
	kube, err := releasepath.NewKube(rest)
	if err != nil {
		return nil, nil, err
	}
	origins, err := releaserecord.NewKubeOrigins(rest)
	if err != nil {
		return nil, nil, err
	}
	holds, err := releaserecord.NewGateRecords(rest, cfg.gateNamespace)
	if err != nil {
		return nil, nil, err
	}
	flux := &releaserecord.Flux{Namespace: cfg.fluxNamespace, Cluster: cfg.cluster, Env: cfg.env, Kube: kube,
		Gate: releasepath.NewGateClient(cfg.gateURL), Origins: origins, Holds: holds, Logger: logger}
	return svc, &releaserecord.Observer{Source: flux, Service: svc, Logger: logger}, nil
}

// readHistory builds the read side: the read API, /metrics and the page,
// over the records listed as the sweep lists them, cached READ_CACHE.
func readHistory(cfg config, rest *rest.Config, now func() time.Time, logger *slog.Logger) (*releasehistory.API, error) {
	list, err := releasehistory.NewKubeSweep(rest, cfg.recordNamespace)
	if err != nil {
		return nil, err
	}
	cache := releasehistory.NewCache(releasehistory.KubeRecords{List: list.List}, cfg.readCache, now)
	out := releasehistory.Out{ObjectLink: cfg.objectLink, Sink: cfg.sink}
	return &releasehistory.API{Cache: cache, KeepHealthy: cfg.keepHealthy, Out: out, Logger: logger, Now: now}, nil
}
