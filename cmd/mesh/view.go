package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/watchman"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// The view's variables.
var (
	stuckAfter = settings.Variable{Name: "STUCK_AFTER", Default: "10m", Meaning: "a module on a node not settled with no progress for this long is stuck"}
	viewTick   = settings.Variable{Name: "VIEW_TICK", Default: "15s", Meaning: "time between looks when nothing on the bus changed (a place turns stuck with time alone)"}
	stallAfter = settings.Variable{Name: "STALL_AFTER", Default: "10m", Meaning: "a want its node has not answered with a have of its fingerprint for this long is a stall"}
	watchAddr  = settings.Variable{Name: "ADDR", Default: ":9090", Meaning: "where the watchman serves /metrics, /healthz and /readyz"}
)

func watchmanCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "watchman",
		Short: "Say each want its node does not answer as a stall, and count them on /metrics",
		Long: "mesh watchman mirrors every want as a pulse owed by its node's agent until the node's have names the\n" +
			"want's fingerprint running healthy; one owed for STALL_AFTER is a stall, said once per want as a log line and on\n" +
			"mesh.events.stall, and counted by node on /metrics (mesh_pulses_owed, mesh_stalls). It logs text lines\n" +
			"on a terminal, JSON lines elsewhere; a bad variable exits 2, a lost bus 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			after := env.Duration(stallAfter.Name, watchman.DefaultStallAfter)
			every := env.Duration(viewTick.Name, 15*time.Second)
			count := env.PositiveInt(replicas.Name, 1)
			addr := env.Address(watchAddr.Name, watchAddr.Default)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			b, closeBus, err := connect(ctx, in, "mesh watchman", grants.Watchman)
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			defer closeBus()
			teller, err := dedup.Open(ctx, b.JS, count, in.Log)
			if err != nil {
				return fail(in, 1, "no bus", err)
			}
			reg := prometheus.NewRegistry()
			w, err := watchman.New(b, teller, reg, in.Log)
			if err != nil {
				return fail(in, 1, "no gauges", err)
			}
			w.StallAfter, w.Now = after, in.Now
			in.Log.Info("mesh watchman started", slog.Duration("stallAfter", after), slog.String("addr", addr))
			serve := func(ctx context.Context) error {
				return server.ListenAndServe(ctx, addr, server.Config{Logger: in.Log, Routes: func(mux *http.ServeMux) {
					mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				}})
			}
			errs := make(chan error, 2)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { errs <- serve(ctx) }()
			go func() { errs <- w.Run(ctx, every) }()
			// The first to end ends the other; both are waited for.
			first := <-errs
			cancel()
			for _, err := range []error{first, <-errs} {
				if err != nil && !errors.Is(err, context.Canceled) {
					return fail(in, 1, "the watchman stopped", err)
				}
			}
			return nil
		},
	}
}

func viewCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "view",
		Short: "Say when a revision is delivered, and each module on each node moving, settled or stuck",
		Long: "mesh view watches source.main, the registrations, the wants and the haves, and says each event once,\n" +
			"as a log line and on mesh.events.<kind> (delivered, moving, settled, stuck), until it is stopped. It logs\n" +
			"text lines on a terminal, JSON lines elsewhere.\n" +
			"What it said is kept on the bus (mesh_said), so a restarted view does not say it again. A bad variable\n" +
			"exits 2, a lost bus 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			after := env.Duration(stuckAfter.Name, view.DefaultStuckAfter)
			window := env.Duration(onlineWindow.Name, view.DefaultOnlineWindow)
			every := env.Duration(viewTick.Name, 15*time.Second)
			count := env.PositiveInt(replicas.Name, 1)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			b, closeBus, err := connect(ctx, in, "mesh view", grants.View)
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			defer closeBus()
			v, err := view.Open(ctx, b.JS, b, count, in.Log)
			if err != nil {
				return fail(in, 1, "no bus", err)
			}
			v.StuckAfter, v.OnlineWindow, v.Now = after, window, in.Now
			in.Log.Info("mesh view started", slog.Duration("stuckAfter", after), slog.Duration("onlineWindow", window))
			if err := v.Run(ctx, every); err != nil && !errors.Is(err, ctx.Err()) {
				return fail(in, 1, "the view stopped", err)
			}
			return nil
		},
	}
}

func statusCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print each module on each node: its want beside its have, and where it stands",
		Long: "mesh status prints the source revision and whether it is delivered, then a row per module and node:\n" +
			"the want's fingerprint (and its owner when not the rules), the have's fingerprint, phase and health,\n" +
			"and moving, settled or stuck, coloured on a terminal. Delivered is every registered node of every module\n" +
			"the revision names running it healthy, or offline (no have within ONLINE_WINDOW). It exits 0 delivered,\n" +
			"3 not delivered, 1 when the bus cannot be read.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			after := env.Duration(stuckAfter.Name, view.DefaultStuckAfter)
			window := env.Duration(onlineWindow.Name, view.DefaultOnlineWindow)
			count := env.PositiveInt(replicas.Name, 1)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			b, closeBus, err := connect(ctx, in, "mesh status", grants.View)
			if err != nil {
				return fail(in, 1, "no bus", err)
			}
			defer closeBus()
			v, err := view.Open(ctx, b.JS, b, count, in.Log)
			if err != nil {
				return fail(in, 1, "no bus", err)
			}
			v.StuckAfter, v.OnlineWindow, v.Now = after, window, in.Now
			p, err := v.Look(ctx)
			if err != nil {
				return fail(in, 1, "cannot read the bus", err)
			}
			if err := view.Render(in.Stdout, p, in.Now(), cli.IsTerminal(in.Stdout)); err != nil {
				return err
			}
			if !p.Delivered {
				return cli.Exit(3)
			}
			return nil
		},
	}
}

func sourceCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "source <revision> <module>=<fingerprint>...",
		Short: "Write source.main: the revision CI built and each module's fingerprint",
		Long: "mesh source writes source.main, the revision the view holds the wants and haves to: CI runs it once\n" +
			"every module's build of the revision is done. It exits 2 on a bad argument, 1 when the bus refuses.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := view.Source{Revision: args[0], Modules: map[string]string{}, At: in.Now().UTC()}
			for _, a := range args[1:] {
				module, fp, ok := strings.Cut(a, "=")
				if !ok || module == "" || fp == "" {
					return fail(in, 2, "bad argument", fmt.Errorf("%q is not <module>=<fingerprint>", a))
				}
				if _, twice := src.Modules[module]; twice {
					return fail(in, 2, "bad argument", fmt.Errorf("module %q given twice", module))
				}
				src.Modules[module] = fp
			}
			env := settings.New(in.Getenv)
			count := env.PositiveInt(replicas.Name, 1)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			b, closeBus, err := connect(ctx, in, "mesh source", grants.Source)
			if err != nil {
				return fail(in, 1, "no bus", err)
			}
			defer closeBus()
			kv, err := view.Sources(ctx, b.JS, count)
			if err == nil {
				err = view.WriteSource(ctx, kv, src)
			}
			if err != nil {
				return fail(in, 1, "source not written", err)
			}
			in.Log.Info("source written", slog.String("revision", src.Revision), slog.Int("modules", len(src.Modules)))
			return nil
		},
	}
}
