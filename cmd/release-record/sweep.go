package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// sweepCommand is release-record sweep as its --help tells it.
var sweepCommand = cli.Service{
	Name: "release-record sweep",
	Summary: "release-record sweep goes over the release records once: it raises a ReleaseStalled Event on a release\n" +
		"merged or progressing with no fact for RELEASE_STALL_MINUTES, once per state, and deletes the records past\n" +
		"RECORD_TTL_DAYS, never one in flight nor one of the newest KEEP_HEALTHY healthy ones per app, env and cluster.\n" +
		"It prints one JSON line per Event raised and record deleted; run it as a CronJob.",
	Variables: releasehistory.SweepVariables,
}

// sweepConfig is everything the sweep reads from its environment.
type sweepConfig struct {
	namespace string
	policy    releasehistory.SweepPolicy
}

func loadSweepConfig(getenv func(string) string) (sweepConfig, error) {
	s := settings.New(getenv)
	cfg := sweepConfig{
		namespace: s.String("RECORD_NAMESPACE", "delivery-system"),
		policy: releasehistory.SweepPolicy{
			StallAfter: time.Duration(s.PositiveInt("RELEASE_STALL_MINUTES", 45)) * time.Minute,
			TTL:        time.Duration(s.PositiveInt("RECORD_TTL_DAYS", 14)) * 24 * time.Hour,
			// At least one: a sweep that kept no healthy record would leave
			// nothing to roll back to.
			KeepHealthy: s.PositiveInt("KEEP_HEALTHY", 5),
		},
	}
	return cfg, s.Err()
}

// runSweep answers the sweep's --help and --version, or sweeps once; it
// returns the exit code: 1 for a bad setting or any failed call, after
// doing what it could.
func runSweep(ctx context.Context, args []string, getenv func(string) string, now func() time.Time, stdout, logs io.Writer) int {
	if code, answered := sweepCommand.Answer(args, stdout, logs); answered {
		return code
	}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	cfg, err := loadSweepConfig(getenv)
	if err != nil {
		logger.Error("bad configuration", slog.String("error", err.Error()))
		return 1
	}
	rest, err := kubeclient.Config(getenv)
	if err != nil {
		logger.Error("cannot start", slog.String("error", err.Error()))
		return 1
	}
	cluster, err := releasehistory.NewKubeSweep(rest, cfg.namespace)
	if err != nil {
		logger.Error("cannot start", slog.String("error", err.Error()))
		return 1
	}
	sweeper := &releasehistory.Sweeper{Cluster: cluster, Out: stdout, Logger: logger}
	swept, err := sweeper.Sweep(ctx, cfg.policy, now())
	if err != nil {
		logger.Error("sweep failed", slog.String("records", cfg.namespace), slog.Int("raised", swept.Raised),
			slog.Int("deleted", swept.Deleted), slog.String("error", err.Error()))
		return 1
	}
	logger.Info("swept", slog.String("records", cfg.namespace), slog.Int("listed", swept.Records), slog.Int("unreadable", swept.Unreadable),
		slog.Int("raised", swept.Raised), slog.Int("deleted", swept.Deleted), slog.Int("moved", swept.Moved))
	return 0
}
