package main

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/probe"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr, listenTCP))
}

// service is the gate as its --help tells it.
var service = cli.Service{
	Name: "release-gate",
	Summary: "release-gate answers Flagger's webhooks for every gated Application from the live cluster, failing\n" +
		"closed, and between questions tends every gated Application every 15 seconds.",
	Variables: releasegate.Variables,
}

// listener opens the address the gate serves on; a test hands its own to
// learn the port.
type listener func(ctx context.Context, addr string) (net.Listener, error)

func listenTCP(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// run answers --help and --version, or reads the environment, connects to
// the cluster and serves until ctx ends or SIGTERM or SIGINT arrives, then
// drains.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, logOut io.Writer, listen listener) int {
	if code, answered := service.Answer(args, stdout, logOut); answered {
		return code
	}
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
	leader := releasegate.LeaderSettings{
		Namespace:     gateNamespace,
		Identity:      env.String("POD_NAME", replicaName()),
		LeaseDuration: env.Duration("LEADER_LEASE_DURATION", releasegate.DefaultLeader.LeaseDuration),
		RenewDeadline: env.Duration("LEADER_RENEW_DEADLINE", releasegate.DefaultLeader.RenewDeadline),
		RetryPeriod:   env.Duration("LEADER_RETRY_PERIOD", releasegate.DefaultLeader.RetryPeriod),
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
	if err == nil {
		err = leader.Check()
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
	elector, err := releasegate.NewLeader(kube.Core, leader, logger)
	if err != nil {
		logger.Error("bad setting", slog.String("error", err.Error()))
		return 2
	}
	tender := releasegate.NewTender(kube, gateNamespace, probe.NewWarmer(probe.WarmupConfig{}), logger, time.Now)
	tender.LeadWith(elector.Leading)
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
		mux.HandleFunc("GET /fresh", func(w http.ResponseWriter, r *http.Request) {
			if !elector.Leading() {
				// Another replica runs the rounds; this one's staleness is
				// no reason to restart it.
				_, _ = io.WriteString(w, "following: another replica runs the rounds\n")
				return
			}
			rounds.FreshHandler(w, r)
		})
	}
	// Every replica answers; only the Lease's holder runs the rounds. On
	// SIGTERM ctx ends at once, so the leader stops acting and releases the
	// Lease while the server still finishes answering what it was asked.
	leadCtx, stopLeading := context.WithCancel(ctx)
	led := make(chan error, 1)
	go func() {
		led <- elector.Run(leadCtx, func(term context.Context) {
			rounds.Run(term)
			tender.Forget()
		})
	}()
	err = server.Serve(ctx, ln, server.Config{Routes: routes, Ready: gate.Ready, Logger: logger})
	stopLeading()
	if leadErr := <-led; leadErr != nil && err == nil {
		err = leadErr
	}
	if err != nil {
		logger.Error("serve", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

// replicaName names this replica on the Lease where no POD_NAME does: the
// host name alone could be two replicas' on one machine, and two holders of
// one name would both lead.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "release-gate"
	}
	return host + "_" + rand.Text()[:10]
}
