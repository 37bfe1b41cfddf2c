// Package demo is the mesh's delivery told step by step, on a bus of its
// own: an embedded JetStream server, three node agents in folders of their
// own, the assigner, the watchman and the view, and a small module (a real
// HTTP server the agents run). `mesh demo` tells it; its test holds every
// step to what it says.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/assign"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/watchman"
)

// The module the story delivers, and its nodes: n1 is the canary, the
// first by name.
const module = "hello"

var storyNodes = []string{"n1", "n2", "n3"}

// Story is one telling.
type Story struct {
	// Out hears the steps, in plain words.
	Out io.Writer
	// Logs hears the services' JSON lines.
	Logs io.Writer
	// Module is the argv of the module's HTTP server: it serves ADDR,
	// answers / with FINGERPRINT and /healthz with 200, or 503 when
	// UNHEALTHY is set. ModuleEnv is added to its environment.
	Module    []string
	ModuleEnv map[string]string
	// Dir holds the nodes' folders and the server's store.
	Dir string
	// StuckAfter is the view's STUCK_AFTER and the watchman's STALL_AFTER.
	StuckAfter time.Duration
	// URL is a NATS server to tell it on; "" starts one embedded.
	URL string
	// Nodes are the module's nodes, by name; nil is n1, n2 and n3.
	Nodes []string
	// Connect, when set, dials the bus at URL as each part (the operator
	// for ""), so every service runs on its own credential; nil, one
	// connection for all.
	Connect func(part grants.Part, node string) (*nats.Conn, error)
}

// world is what the story runs on.
type world struct {
	s     Story
	nodes []string
	bus   *bus.Bus
	nc    *nats.Conn
	// sources is source.main's bucket as CI writes it, on the operator's
	// connection: the view only reads it.
	sources jetstream.KeyValue
	signer  *composition.Signer
	view    *view.View
	addrs   map[string]string
}

// Run tells the story; it returns the first step that did not go as told.
func (s Story) Run(ctx context.Context) error {
	w, stop, err := s.setUp(ctx)
	if err != nil {
		return err
	}
	defer stop()
	return w.tell(ctx)
}

// setUp starts the bus and the services; stop ends them.
func (s Story) setUp(ctx context.Context) (_ *world, stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var stops []func()
	stop = func() {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if s.Nodes == nil {
		s.Nodes = storyNodes
	}
	logger := slog.New(slog.NewJSONHandler(s.Logs, nil))
	url := s.URL
	if url == "" {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
			StoreDir: filepath.Join(s.Dir, "bus"), NoLog: true, NoSigs: true})
		if err != nil {
			return nil, nil, fmt.Errorf("the bus: %w", err)
		}
		ns.Start()
		stops = append(stops, func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(30 * time.Second) {
			return nil, nil, errors.New("the bus did not start within 30 s")
		}
		url = ns.ClientURL()
	}
	s.say("A bus: NATS JetStream at %s.", url)
	connect := s.Connect
	if connect == nil {
		connect = func(grants.Part, string) (*nats.Conn, error) { return nats.Connect(url) }
	}
	nc, err := connect("", "")
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	b, err := bus.Open(ctx, js, bus.Options{})
	if err != nil {
		return nil, nil, err
	}
	// The operator makes every bucket; a part on its own credential only
	// binds them.
	for _, n := range s.Nodes {
		if _, err := b.Composed(ctx, n); err != nil {
			return nil, nil, err
		}
	}
	sources, err := view.Sources(ctx, js, 1)
	if err != nil {
		return nil, nil, err
	}
	partBus := func(p grants.Part, node string) (*bus.Bus, jetstream.JetStream, error) {
		if s.Connect == nil {
			return b, js, nil
		}
		pc, err := s.Connect(p, node)
		if err != nil {
			return nil, nil, fmt.Errorf("connect as %s %s: %w", p, node, err)
		}
		stops = append(stops, pc.Close)
		pjs, err := jetstream.New(pc)
		if err != nil {
			return nil, nil, err
		}
		pb, err := bus.Open(ctx, pjs, bus.Options{})
		return pb, pjs, err
	}
	keys, err := composition.NewKeyPair()
	if err != nil {
		return nil, nil, err
	}
	w := &world{s: s, nodes: s.Nodes, bus: b, nc: nc, sources: sources, signer: keys.Signer, addrs: map[string]string{}}

	// The services, each as its command would run it.
	run := func(name string, f func(context.Context) error) {
		go func() {
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error(name+" stopped", slog.String("error", err.Error()))
			}
		}()
	}
	for _, n := range w.nodes {
		addr, err := freeAddress(ctx)
		if err != nil {
			return nil, nil, err
		}
		w.addrs[n] = addr
		ab, _, err := partBus(grants.Agent, n)
		if err != nil {
			return nil, nil, err
		}
		a := &agent.Agent{Node: n, Bus: ab, Trust: keys.Trust, Layout: agent.Layout{Root: filepath.Join(s.Dir, n)}, Grace: 2 * time.Second,
			HealthWithin: healthWithin, Tick: 200 * time.Millisecond, Output: s.Logs, Logger: logger.With(slog.String("node", n))}
		run("agent "+n, a.Run)
		stops = append(stops, a.Stop)
	}
	s.say("%d nodes, %v, each with its agent in a folder of its own; %s, the first by name, is the canary.", len(w.nodes), w.nodes, w.nodes[0])
	if _, err := dedup.Open(ctx, js, 1, logger); err != nil {
		return nil, nil, err
	}
	sb, _, err := partBus(grants.Assigner, "")
	if err != nil {
		return nil, nil, err
	}
	assigner := &assign.Assigner{Bus: sb, Verifier: keys.Trust, Now: time.Now, Tick: 200 * time.Millisecond, Logger: logger}
	run("assigner", assigner.Run)
	gb, gjs, err := partBus(grants.Watchman, "")
	if err != nil {
		return nil, nil, err
	}
	teller, err := dedup.Open(ctx, gjs, 1, logger)
	if err != nil {
		return nil, nil, err
	}
	guard, err := watchman.New(gb, teller, prometheus.NewRegistry(), logger)
	if err != nil {
		return nil, nil, err
	}
	guard.StallAfter = s.StuckAfter
	run("watchman", func(ctx context.Context) error { return guard.Run(ctx, 200*time.Millisecond) })
	vb, vjs, err := partBus(grants.View, "")
	if err != nil {
		return nil, nil, err
	}
	if w.view, err = view.Open(ctx, vjs, vb, 1, logger); err != nil {
		return nil, nil, err
	}
	w.view.StuckAfter = s.StuckAfter
	run("view", func(ctx context.Context) error { return w.view.Run(ctx, 200*time.Millisecond) })
	s.say("The assigner, the watchman and the view watch the bus.")
	return w, stop, nil
}

// healthWithin is how long the story's agents give a version to pass its
// check before they go back to the one before.
const healthWithin = 3 * time.Second

func (s Story) say(format string, args ...any) { fmt.Fprintf(s.Out, format+"\n", args...) }

// freeAddress is a free port at a loopback address picked at random in
// 127.16.0.0-127.254.255.255, where a node's module serves. The agents
// restart the module on it at every version, and at 127.0.0.1 a server
// something else starts in that moment could take the port.
func freeAddress(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	var err error
	for range 20 {
		//nolint:gosec // an address that keeps servers apart, not a secret
		host := netip.AddrFrom4([4]byte{127, byte(16 + rand.IntN(239)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		var ln net.Listener
		if ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(host.String(), "0")); err == nil {
			defer ln.Close()
			return ln.Addr().String(), nil
		}
	}
	return "", fmt.Errorf("listen on a loopback address: %w", err)
}

// moduleEnv is the module's environment on node at fingerprint.
func (w *world) moduleEnv(node, fingerprint string, healthy bool) map[string]string {
	env := map[string]string{"ADDR": w.addrs[node], "FINGERPRINT": fingerprint}
	for k, v := range w.s.ModuleEnv {
		env[k] = v
	}
	if !healthy {
		env["UNHEALTHY"] = "1"
	}
	if home := os.Getenv("HOME"); home != "" {
		env["HOME"] = home
	}
	return env
}
