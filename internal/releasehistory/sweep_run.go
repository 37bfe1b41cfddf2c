package releasehistory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// SweepVariables are the variables release-record sweep reads, for its --help and for the manifests' tests, which
// hold what the CronJob sets to them.
var SweepVariables = slices.Concat([]settings.Variable{
	{Name: "RECORD_NAMESPACE", Default: "delivery-system", Meaning: "where the records (ConfigMaps release-<hash>) are kept"},
	{Name: "RELEASE_STALL_MINUTES", Default: "45", Meaning: "minutes a merged or progressing release may go with no fact before a ReleaseStalled Event says it"},
	{Name: "RECORD_TTL_DAYS", Default: "14", Meaning: "days a finished record (by stateAt) or a legacy one (by creation) is kept"},
	{Name: "KEEP_HEALTHY", Default: "5", Meaning: "the newest records per app, env and cluster that reached healthy, kept whatever their age (the rollback window; at least 1)"},
}, kubeclient.Variables)

// Sweeper runs one sweep's plan against the cluster.
type Sweeper struct {
	Cluster SweepCluster
	// Out takes one JSON line per Event raised and per record deleted.
	Out io.Writer
	// Logger says what was not done: a record unreadable, one that moved.
	Logger *slog.Logger
}

// Swept counts what one sweep found and did.
type Swept struct {
	Records, Unreadable, Raised, Deleted, Moved int
}

// stalled and deleted are the lines of the sweep's output, each the
// plan's own fields after what was done.
type stalled struct {
	Action string `json:"action"`
	Event  string `json:"event"`
	Stall
}

type deleted struct {
	Action string `json:"action"`
	Deletion
}

// Sweep lists the records, plans and does what the plan says: every stall
// and deletion it can, a failed call not stopping the rest. It returns the
// failures joined; a cancelled ctx stops it between calls. A list that
// fails part-way still raises the stalls of what it read but deletes
// nothing: the rollback window is only known from every record.
func (s *Sweeper) Sweep(ctx context.Context, p SweepPolicy, now time.Time) (Swept, error) {
	entries, listErr := s.Cluster.List(ctx)
	sw := Swept{Records: len(entries)}
	for _, e := range entries {
		if e.Unreadable != "" {
			sw.Unreadable++
			s.Logger.LogAttrs(ctx, slog.LevelWarn, "record unreadable", slog.String("record", e.Name), slog.String("error", e.Unreadable))
		}
	}
	plan := PlanSweep(entries, p, now)
	errs := []error{listErr}
	for _, st := range plan.Stalls {
		if ctx.Err() != nil {
			break
		}
		raised, err := s.Cluster.Alert(ctx, st)
		if raised != "" {
			sw.Raised++
			if werr := s.write(stalled{Action: "stalled", Event: raised, Stall: st}); werr != nil {
				errs = append(errs, werr)
			}
		}
		errs = append(errs, s.moved(ctx, &sw, "stall", st.Name, err))
	}
	for _, d := range plan.Deletions {
		if listErr != nil || ctx.Err() != nil {
			break
		}
		err := s.Cluster.Delete(ctx, d)
		if err == nil {
			sw.Deleted++
			if werr := s.write(deleted{Action: "deleted", Deletion: d}); werr != nil {
				errs = append(errs, werr)
			}
		}
		errs = append(errs, s.moved(ctx, &sw, "delete", d.Name, err))
	}
	return sw, joinFew(append(errs, ctx.Err()))
}

// shownFailures is how many failures a sweep's error spells out: an API
// server that refuses every call would otherwise make one log line of
// thousands.
const shownFailures = 10

// joinFew joins the errors, the first shownFailures of them, counting the
// rest.
func joinFew(errs []error) error {
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(errs) > shownFailures {
		errs = append(errs[:shownFailures], fmt.Errorf("and %d more failures", len(errs)-shownFailures))
	}
	return errors.Join(errs...)
}

// moved says a record that moved since the list, which is no failure, and
// passes any other error on.
func (s *Sweeper) moved(ctx context.Context, sw *Swept, what, record string, err error) error {
	if !errors.Is(err, ErrMoved) {
		return err
	}
	sw.Moved++
	s.Logger.LogAttrs(ctx, slog.LevelInfo, "record moved since listed; left to the next sweep",
		slog.String("record", record), slog.String("skipped", what))
	return nil
}

func (s *Sweeper) write(a any) error {
	line, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if _, err := s.Out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write the sweep's output: %w", err)
	}
	return nil
}
