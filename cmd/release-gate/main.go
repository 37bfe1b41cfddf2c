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
	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	kubeclient.LogAsJSON(os.Stderr)
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, listenTCP)
	})
}

// service is the gate as its --help tells it.
var service = cli.Service{
	Name: "release-gate",
	Summary: "release-gate answers Flagger's webhooks for every gated Application from the live cluster, failing\n" +
		"closed, and between questions reconciles every gated Application every 15 seconds.",
	Variables: releasegate.Variables,
}

// listener opens the address the gate serves on; a test hands its own to
// learn the port.
type listener func(ctx context.Context, addr string) (net.Listener, error)

func listenTCP(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// run answers its command line, or reads the environment, connects to the
// cluster and serves until ctx ends (SIGTERM or SIGINT, through cli.Main),
// then drains; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, logOut io.Writer, listen listener) int {
	return cli.NewEnv(getenv, stdout, logOut).Execute(ctx, cli.Command{Service: service,
		Run: func(ctx context.Context, env cli.Env) error { return serve(ctx, env, listen) }}, args)
}

// serve reads the settings, assembles the gate and serves it; every
// replica answers, and only the Lease's holder runs the rounds.
func serve(ctx context.Context, env cli.Env, listen listener) error {
	logger := env.Log
	s, err := readSettings(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	p, err := assemble(s, env.Getenv, logger)
	if err != nil {
		return err
	}
	ln, err := listen(ctx, s.addr)
	if err != nil {
		return cli.Failed("listen", err, slog.String("addr", s.addr))
	}
	// The watch of Flagger's pods starts once nothing can stop the gate
	// from serving: it logs on its own as it meets the API server.
	watchCtx, stopWatch := context.WithCancel(ctx)
	callers := p.kube.WatchPods(watchCtx, s.flagger.Namespace, s.flaggerSelector, logger)
	defer func() { stopWatch(); <-callers.Stopped() }()
	gate, err := releasegate.New(p.kube, callers, releasegate.Config{Flagger: s.flagger, GateNamespace: s.gateNamespace, OwnTraffic: s.ownTraffic}, logger)
	if err != nil {
		_ = ln.Close()
		return cli.BadSetting(err)
	}
	rounds := &periodic.Loop{Interval: releasegate.RoundInterval, Pass: p.reconciler.Round, Logger: logger, Name: "round"}
	p.reconciler.OnWarmupDone(rounds.Prompt)
	// On SIGTERM ctx ends at once, so the leader stops acting and releases
	// the Lease while the server still finishes answering what it was asked.
	leadCtx, stopLeading := context.WithCancel(ctx)
	led := make(chan error, 1)
	go func() {
		led <- p.elector.Run(leadCtx, func(term context.Context) {
			rounds.Run(term)
			p.reconciler.Forget()
		})
	}()
	err = server.Serve(ctx, ln, server.Config{Routes: p.routes(gate, rounds), Ready: gate.Ready, Logger: logger})
	stopLeading()
	if leadErr := <-led; leadErr != nil && err == nil {
		err = leadErr
	}
	if err != nil {
		return cli.Failed("serve", err)
	}
	return nil
}

// gateSettings are everything the gate reads from its environment.
type gateSettings struct {
	addr            string
	flagger         releasegate.FlaggerIdentity
	flaggerSelector labels.Selector
	gateNamespace   string
	ownTraffic      owntraffic.Thresholds
	leader          releasegate.LeaderSettings
	scraper         releasegate.ScraperIdentity
}

// readSettings reads and checks every variable but KUBECONFIG; an error
// names the variable.
func readSettings(getenv func(string) string) (gateSettings, error) {
	env := settings.New(getenv)
	s := gateSettings{
		addr: env.Address("ADDR", ":8080"),
		flagger: releasegate.FlaggerIdentity{
			Namespace:      env.String("FLAGGER_NAMESPACE", "delivery-system"),
			Selector:       env.String("FLAGGER_SELECTOR", "app.kubernetes.io/instance=flagger"),
			ServiceAccount: env.String("FLAGGER_SERVICE_ACCOUNT", "flagger"),
		},
		gateNamespace: env.String("GATE_NAMESPACE", releasegate.DefaultGateNamespace),
		ownTraffic: owntraffic.Thresholds{
			ErrorRate: env.Share("OWN_TRAFFIC_ERROR_RATE", releasegate.DefaultOwnTraffic.ErrorRate),
			Latency:   env.Duration("OWN_TRAFFIC_LATENCY", releasegate.DefaultOwnTraffic.Latency),
		},
		scraper: podcallers.ScraperIdentityFrom(getenv),
	}
	s.leader = releasegate.LeaderSettings{
		Namespace:     s.gateNamespace,
		Identity:      env.String("POD_NAME", replicaName()),
		LeaseDuration: env.Duration("LEADER_LEASE_DURATION", releasegate.DefaultLeader.LeaseDuration),
		RenewDeadline: env.Duration("LEADER_RENEW_DEADLINE", releasegate.DefaultLeader.RenewDeadline),
		RetryPeriod:   env.Duration("LEADER_RETRY_PERIOD", releasegate.DefaultLeader.RetryPeriod),
	}
	err := env.Err()
	if err == nil {
		s.flaggerSelector, err = s.flagger.Validate()
	}
	if err == nil {
		_, err = s.scraper.Validate()
	}
	if err == nil {
		err = releasegate.CheckGateNamespace(s.gateNamespace)
	}
	if err == nil {
		err = s.leader.Check()
	}
	return s, err
}

// parts are the gate's adapters, built before it listens.
type parts struct {
	kube       *releasegate.Kube
	elector    *releasegate.Leader
	reconciler *releasegate.Reconciler
	metrics    http.Handler
}

// assemble connects to the cluster KUBECONFIG finds and builds the Lease's
// elector and the rounds' reconciler; its error says how the run ends.
func assemble(s gateSettings, getenv func(string) string, logger *slog.Logger) (parts, error) {
	cfg, err := kubeclient.Config(getenv)
	if err != nil {
		return parts{}, cli.BadSetting(err)
	}
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		return parts{}, cli.Failed("cannot start", err)
	}
	elector, err := releasegate.NewLeader(kube.Core, s.leader, logger)
	if err != nil {
		return parts{}, cli.BadSetting(err)
	}
	reconciler := releasegate.NewReconciler(kube, s.gateNamespace, owntraffic.NewWarmer(owntraffic.WarmupConfig{}), logger, time.Now)
	reconciler.LeadWith(elector.Leading)
	metrics, err := reconciler.MetricsHandler(s.scraper)
	if err != nil {
		return parts{}, cli.BadSetting(err)
	}
	return parts{kube: kube, elector: elector, reconciler: reconciler, metrics: metrics}, nil
}

// routes are the gate's webhooks and what it says of its releases and
// rounds.
func (p parts) routes(gate *releasegate.Gate, rounds *periodic.Loop) func(mux *http.ServeMux) {
	return func(mux *http.ServeMux) {
		gate.Routes(mux)
		mux.Handle("GET /metrics", p.metrics)
		mux.Handle("GET /releases", p.reconciler.ReleasesHandler())
		mux.HandleFunc("GET /fresh", func(w http.ResponseWriter, r *http.Request) {
			if !p.elector.Leading() {
				// Another replica runs the rounds; this one's staleness is
				// no reason to restart it.
				_, _ = io.WriteString(w, "following: another replica runs the rounds\n")
				return
			}
			rounds.FreshHandler(w, r)
		})
	}
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
