// Command release-gate answers Flagger's webhooks for every gated Application
// from the live cluster, failing closed, and between questions tends every
// gated Application every 15 seconds.
package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/probe"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	os.Exit(run(context.Background(), os.Getenv, os.Stderr, listenTCP))
}

// listener opens the address the gate serves on; a test hands its own to
// learn the port.
type listener func(ctx context.Context, addr string) (net.Listener, error)

func listenTCP(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// run reads the environment, connects to the cluster and serves until ctx
// ends or SIGTERM or SIGINT arrives, then drains.
func run(ctx context.Context, getenv func(string) string, logOut io.Writer, listen listener) int {
	ctx, stop := server.SignalContext(ctx)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(logOut, nil))
	env := settings.New(getenv)
	addr := env.Address("ADDR", ":8080")
	flagger := releasegate.FlaggerIdentity{
		Namespace:      env.String("FLAGGER_NAMESPACE", "delivery-system"),
		Selector:       env.String("FLAGGER_SELECTOR", "app.kubernetes.io/instance=flagger"),
		ServiceAccount: env.String("FLAGGER_SERVICE_ACCOUNT", "flagger"),
	}
	gateNamespace := env.String("GATE_NAMESPACE", releasegate.DefaultGateNamespace)
	ownTraffic := probe.Thresholds{
		ErrorRate: env.Share("OWN_TRAFFIC_ERROR_RATE", releasegate.DefaultOwnTraffic.ErrorRate),
		Latency:   env.Duration("OWN_TRAFFIC_LATENCY", releasegate.DefaultOwnTraffic.Latency),
	}
	scraper := releasegate.ScraperIdentity{
		Namespace:      getenv("METRICS_SCRAPER_NAMESPACE"),
		Selector:       getenv("METRICS_SCRAPER_SELECTOR"),
		ServiceAccount: getenv("METRICS_SCRAPER_SERVICE_ACCOUNT"),
	}
	err := env.Err()
	var flaggerSelector labels.Selector
	if err == nil {
		flaggerSelector, err = flagger.Validate()
	}
	if err == nil {
		_, err = scraper.Validate()
	}
	if err == nil {
		err = releasegate.CheckGateNamespace(gateNamespace)
	}
	if err != nil {
		logger.Error("bad setting", slog.String("error", err.Error()))
		return 2
	}
	cfg, err := kubeclient.Config(getenv)
	if err != nil {
		logger.Error("no cluster to read", slog.String("error", err.Error()))
		return 2
	}
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		logger.Error("connect to the cluster", slog.String("error", err.Error()))
		return 2
	}
	tender := releasegate.NewTender(kube, gateNamespace, probe.NewWarmer(probe.WarmupConfig{}), logger, time.Now)
	metrics, err := tender.MetricsHandler(scraper)
	if err != nil {
		logger.Error("bad setting", slog.String("error", err.Error()))
		return 2
	}
	ln, err := listen(ctx, addr)
	if err != nil {
		logger.Error("listen", slog.String("addr", addr), slog.String("error", err.Error()))
		return 1
	}
	// The watch of Flagger's pods starts once nothing can stop the gate
	// from serving: it logs on its own as it meets the API server.
	watchCtx, stopWatch := context.WithCancel(ctx)
	callers := kube.WatchPods(watchCtx, flagger.Namespace, flaggerSelector, logger)
	defer func() { stopWatch(); <-callers.Stopped() }()
	gate, err := releasegate.New(kube, callers, releasegate.Config{Flagger: flagger, GateNamespace: gateNamespace, OwnTraffic: ownTraffic}, logger)
	if err != nil {
		_ = ln.Close()
		logger.Error("bad setting", slog.String("error", err.Error()))
		return 2
	}
	rounds := &periodic.Loop{Interval: releasegate.RoundInterval, Pass: tender.Round, Logger: logger, Name: "round"}
	tender.OnWarmupDone(rounds.Prompt)
	routes := func(mux *http.ServeMux) {
		gate.Routes(mux)
		mux.Handle("GET /metrics", metrics)
		mux.Handle("GET /releases", tender.ReleasesHandler())
		mux.HandleFunc("GET /fresh", rounds.FreshHandler)
	}
	err = rounds.RunBeside(ctx, func(ctx context.Context) error {
		return server.Serve(ctx, ln, server.Config{Routes: routes, Ready: gate.Ready, Logger: logger})
	})
	if err != nil {
		logger.Error("serve", slog.String("error", err.Error()))
		return 1
	}
	return 0
}
