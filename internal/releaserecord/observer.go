package releaserecord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Observer takes what an observed source shows, once a pass: a pass runs at
// start, every interval and on every prompt (internal/periodic). A fact
// whose events the sink did not take is taken again on the next pass.
type Observer struct {
	Source  Observed
	Service *Service
	Logger  *slog.Logger
}

// Pass looks once and takes every fact; one that fails does not stop the
// others, and fails the pass.
func (o *Observer) Pass(ctx context.Context) error {
	facts, err := o.Source.Observe(ctx)
	var failed int
	for _, f := range facts {
		out, ferr := o.Service.Take(ctx, f)
		if ferr != nil {
			failed++
			o.Logger.LogAttrs(ctx, slog.LevelError, "fact not taken", slog.String("source", o.Source.Name()),
				slog.String("releaseId", f.Release.ID.String()), slog.String("phase", string(f.Phase)), slog.String("error", ferr.Error()))
			continue
		}
		if out.Effect == EffectApplied {
			o.Logger.LogAttrs(ctx, slog.LevelInfo, "fact", slog.String("source", o.Source.Name()), slog.String("releaseId", out.ReleaseID),
				slog.String("phase", string(f.Phase)), slog.String("state", string(out.State)), slog.Any("events", out.Events), slog.String("why", out.Why))
		}
	}
	if failed > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d facts not taken", failed, len(facts)))
	}
	return err
}
