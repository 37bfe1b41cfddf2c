package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/backupworker"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// The node's variables.
var (
	nodeName   = settings.Variable{Name: "NODE_NAME", Default: settings.Required, Meaning: "the node this agent or backup worker is: its wants, its bucket composed-<node>, its haves"}
	meshRoot   = settings.Variable{Name: "MESH_ROOT", Default: "/var/lib/mesh", Meaning: "where the agent lays its modules down: a folder per module, its versions and the link current"}
	stopGrace  = settings.Variable{Name: "STOP_GRACE", Default: "10s", Meaning: "how long a module has between SIGTERM and SIGKILL when it is stopped"}
	healthFor  = settings.Variable{Name: "HEALTH_WITHIN", Default: "1m", Meaning: "how long a started version has to pass its health check before the agent goes back to the version that last ran healthy"}
	keepCount  = settings.Variable{Name: "KEEP_RELEASES", Default: "3", Meaning: "how many versions of a module stay laid down under releases/, the newest, besides what runs and what last ran healthy"}
	backupDir  = settings.Variable{Name: "BACKUP_DIR", Default: "/var/backups/mesh", Meaning: "the node's backup folder: a claim per module below it"}
	backupWait = settings.Variable{Name: "BACKUP_WITHIN", Default: "10m", Meaning: "how long the agent waits for the backup worker's backup before it does not apply"}
)

func agentCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run this node's modules as its wants name them, applying only what it is signed to",
		Long: "mesh agent watches its node's wants and its bucket composed-<node> and, one module at a time, applies a\n" +
			"want only when the composition it names is there and verifies against MESH_TRUSTED_KEYS, backing a\n" +
			"module that holds data up through the node's backup worker first; anything else is refused with a have saying\n" +
			"why. It checks each module's health every interval of its check and starts a module whose process\n" +
			"ended in failure again after 1 s, doubled to 30 s; a version that does not pass its check within\n" +
			"HEALTH_WITHIN goes back to the version that last ran healthy (rolled-back).\n" +
			"On start it runs what its disk says runs and writes its haves again. While the bus does not answer\n" +
			"its modules run on and it tries again after 1 s, doubled to 30 s, and at once when the bus is back.\n" +
			"A bad variable exits 2.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			node := env.Required(nodeName.Name)
			root := env.String(meshRoot.Name, meshRoot.Default)
			grace := env.Duration(stopGrace.Name, 10*time.Second)
			within := env.Duration(healthFor.Name, time.Minute)
			wait := env.Duration(backupWait.Name, 10*time.Minute)
			keep := env.PositiveInt(keepCount.Name, 3)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			trust, err := loadTrust(in.Getenv)
			if err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			url, cred, opts, err := busSettings(in.Getenv)
			if err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			// The agent does not wait for the bus to start what its disk
			// says runs: it dials on in the background.
			if cred.Inbox, err = grants.InboxPrefix(grants.Agent, node); err != nil {
				return fail(in, 2, "bad configuration", fmt.Errorf("%s: %w", nodeName.Name, err))
			}
			nc, back, err := bus.Dial(url, "mesh agent "+node, cred)
			if err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			reportRefusals(in, nc)
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			a := &agent.Agent{Node: node, Trust: trust, Layout: agent.Layout{Root: root},
				Open: func(ctx context.Context) (*bus.Bus, error) { return bus.Open(ctx, js, opts) }, Back: back,
				Backup: backupworker.Client{Node: node, Conn: nc, Within: wait},
				Grace:  grace, HealthWithin: within, Keep: keep, Output: in.Stderr, Logger: in.Log, Now: in.Now}
			ctx := cmd.Context()
			in.Log.Info("mesh agent started", slog.String("node", node), slog.String("root", root), slog.Any("trustedKeys", trust.KeyIDs()))
			err = a.Run(ctx)
			// The modules go on running: an agent stopped for its own
			// upgrade must not take its node's modules down.
			if err != nil && !errors.Is(err, ctx.Err()) {
				return fail(in, 1, "the agent stopped", err)
			}
			return nil
		},
	}
}

func backupSeatCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "backup-seat",
		Short: "Back this node's module data up when its agent asks, before an apply",
		Long: "mesh backup-seat answers its node's agent on mesh.backup.<node>: it runs the files backup method (SQLite\n" +
			"databases copied consistently) of the module's data directory into BACKUP_DIR/<module> and says when it\n" +
			"ended, keeping three generations a module. A bad variable exits 2, a lost bus 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			node := env.Required(nodeName.Name)
			dir := env.String(backupDir.Name, backupDir.Default)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			// The backup worker only answers its node's asks: it opens no bucket, which
			// its own credential would not allow.
			url, cred, _, err := busSettings(in.Getenv)
			if err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			if cred.Inbox, err = grants.InboxPrefix(grants.BackupWorker, node); err != nil {
				return fail(in, 2, "bad configuration", fmt.Errorf("%s: %w", nodeName.Name, err))
			}
			nc, err := bus.Connect(url, "mesh backup-seat "+node, cred)
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			reportRefusals(in, nc)
			defer nc.Close()
			s := &backupworker.Worker{Node: node, Dir: dir, Conn: nc, Now: in.Now, Logger: in.Log}
			in.Log.Info("mesh backup seat started", slog.String("node", node), slog.String("dir", dir))
			if err := s.Run(ctx); err != nil && !errors.Is(err, ctx.Err()) {
				return fail(in, 1, "the seat stopped", err)
			}
			return nil
		},
	}
}
