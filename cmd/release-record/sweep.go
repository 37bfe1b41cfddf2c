package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// sweepCommand is what release-record sweep's --help tells of it.
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

// sweep reads the sweep's settings first, so a bad one exits 2 as every
// binary's does, then sweeps once; a failed call exits 1, after the sweep
// did what it could. It logs through env.Log, at LOG_LEVEL.
func sweep(ctx context.Context, env cli.Env) error {
	cfg, err := loadSweepConfig(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	rest, err := kubeclient.Config(env.Getenv)
	if err != nil {
		return cli.BadSetting(err)
	}
	cluster, err := releasehistory.NewKubeSweep(rest, cfg.namespace)
	if err != nil {
		return cli.Failed("cannot start", err)
	}
	sweeper := &releasehistory.Sweeper{Cluster: cluster, Out: env.Stdout, Logger: env.Log}
	swept, err := sweeper.Sweep(ctx, cfg.policy, env.Now())
	if err != nil {
		return cli.Failed("sweep failed", err, slog.String("records", cfg.namespace), slog.Int("raised", swept.Raised),
			slog.Int("deleted", swept.Deleted))
	}
	env.Log.Info("swept", slog.String("records", cfg.namespace), slog.Int("listed", swept.Records), slog.Int("unreadable", swept.Unreadable),
		slog.Int("raised", swept.Raised), slog.Int("deleted", swept.Deleted), slog.Int("moved", swept.Moved))
	return nil
}
