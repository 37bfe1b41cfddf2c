package releasehistory_test

import (
	"slices"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

var policy = rh.SweepPolicy{StallAfter: 45 * time.Minute, TTL: 14 * day, KeepHealthy: 2}

func entry(r rr.Record) rh.Entry { return rh.Entry{Name: r.Name(), Record: r, Created: r.MergedAt} }

func TestPlanSweepStalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry func(t *testing.T) rh.Entry
		stall bool
	}{
		{"merged with no fact for the stall time", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateMerged, ago(time.Hour), ago(time.Hour)))
		}, true},
		{"progressing with no fact for the stall time", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateProgressing, ago(2*time.Hour), ago(46*time.Minute)))
		}, true},
		{"exactly the stall time is a stall", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateProgressing, ago(2*time.Hour), ago(45*time.Minute)))
		}, true},
		{"a fact within the stall time", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateProgressing, ago(2*time.Hour), ago(44*time.Minute)))
		}, false},
		{"the last fact counts, not the state's start", func(t *testing.T) rh.Entry {
			r := rec(t, "1", rr.StateProgressing, ago(3*time.Hour), ago(2*time.Hour))
			r.LastFactAt = ago(10 * time.Minute)
			return entry(r)
		}, false},
		{"already said for this state", func(t *testing.T) rh.Entry {
			e := entry(rec(t, "1", rr.StateProgressing, ago(2*time.Hour), ago(time.Hour)))
			e.StallAlerted = "progressing"
			return e
		}, false},
		{"said for merged, now progressing: said again", func(t *testing.T) rh.Entry {
			e := entry(rec(t, "1", rr.StateProgressing, ago(2*time.Hour), ago(time.Hour)))
			e.StallAlerted = "merged"
			return e
		}, true},
		{"sync-failed does not stall", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateSyncFailed, ago(3*time.Hour), ago(2*time.Hour)))
		}, false},
		{"healthy does not stall", func(t *testing.T) rh.Entry {
			return entry(rec(t, "1", rr.StateHealthy, ago(3*time.Hour), ago(2*time.Hour)))
		}, false},
		{"a legacy record does not stall", func(t *testing.T) rh.Entry {
			return rh.Entry{Name: "release-x", Legacy: true, Created: ago(day)}
		}, false},
		{"no times on the record: its creation", func(t *testing.T) rh.Entry {
			r := rec(t, "1", rr.StateMerged, time.Time{}, time.Time{})
			return rh.Entry{Name: r.Name(), Record: r, Created: ago(time.Hour)}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.entry(t)
			plan := rh.PlanSweep([]rh.Entry{e}, policy, now)
			if got := len(plan.Stalls) == 1; got != tc.stall {
				t.Fatalf("stall %v, want %v: %+v", got, tc.stall, plan)
			}
			if tc.stall && (plan.Stalls[0].State != e.Record.State || plan.Stalls[0].Name != e.Name || plan.Stalls[0].ReleaseID != e.Record.ReleaseID) {
				t.Fatalf("the stall: %+v", plan.Stalls[0])
			}
		})
	}
}

func TestPlanSweepDeletions(t *testing.T) {
	old := ago(20 * day)
	for _, tc := range []struct {
		name    string
		entries func(t *testing.T) []rh.Entry
		deleted []string // versions, or "legacy"
	}{
		{"a terminal record past the TTL", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateAborted, old, ago(15*day)))}
		}, []string{"1"}},
		{"a terminal record within the TTL", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateAborted, old, ago(13*day)))}
		}, nil},
		{"by stateAt, not by mergedAt", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateSuperseded, ago(30*day), ago(day)))}
		}, nil},
		{"never merged", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateMerged, old, old))}
		}, nil},
		{"never progressing", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateProgressing, old, old))}
		}, nil},
		{"never sync-failed: still in flight", func(t *testing.T) []rh.Entry {
			return []rh.Entry{entry(rec(t, "1", rr.StateSyncFailed, old, old))}
		}, nil},
		{"a legacy record past the TTL, by creation", func(t *testing.T) []rh.Entry {
			return []rh.Entry{{Name: "release-legacy", Legacy: true, Created: ago(15 * day)}}
		}, []string{"legacy"}},
		{"a legacy record within the TTL", func(t *testing.T) []rh.Entry {
			return []rh.Entry{{Name: "release-legacy", Legacy: true, Created: ago(13 * day)}}
		}, nil},
		{"the newest KEEP_HEALTHY that reached healthy are kept, the older deleted", func(t *testing.T) []rh.Entry {
			return []rh.Entry{
				entry(healthy(rec(t, "1", rr.StateSuperseded, ago(40*day), ago(38*day)), ago(39*day))),
				entry(healthy(rec(t, "2", rr.StateSuperseded, ago(37*day), ago(35*day)), ago(36*day))),
				entry(healthy(rec(t, "3", rr.StateRolledBack, ago(34*day), ago(32*day)), ago(33*day))),
				entry(healthy(rec(t, "4", rr.StateHealthy, ago(31*day), ago(30*day)), ago(30*day))),
			}
		}, []string{"1", "2"}},
		{"a failure never healthy is not in the window", func(t *testing.T) []rh.Entry {
			return []rh.Entry{
				entry(healthy(rec(t, "1", rr.StateSuperseded, ago(40*day), ago(38*day)), ago(39*day))),
				entry(rec(t, "2", rr.StateAborted, ago(37*day), ago(36*day))),
			}
		}, []string{"2"}},
		{"the window is per service", func(t *testing.T) []rh.Entry {
			a := healthy(rec(t, "1", rr.StateSuperseded, ago(40*day), ago(38*day)), ago(39*day))
			b := healthy(rec(t, "2", rr.StateSuperseded, ago(37*day), ago(35*day)), ago(36*day))
			c := healthy(rec(t, "3", rr.StateHealthy, ago(34*day), ago(33*day)), ago(33*day))
			other, _ := rr.NewReleaseID("docs", "9", "prod-eu", "stage")
			d := healthy(rr.NewRecord(rr.Release{ID: other}, ago(20*day)), ago(20*day))
			d.State, d.StateAt = rr.StateHealthy, ago(20*day)
			return []rh.Entry{entry(a), entry(b), entry(c), entry(d)}
		}, []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := tc.entries(t)
			var got []string
			for _, d := range rh.PlanSweep(entries, policy, now).Deletions {
				if d.ReleaseID == "" {
					got = append(got, "legacy")
					continue
				}
				id, _ := rr.ParseReleaseID(d.ReleaseID)
				got = append(got, id.Version())
			}
			if !slices.Equal(got, tc.deleted) {
				t.Fatalf("deleted %v, want %v", got, tc.deleted)
			}
		})
	}
}

// TestPlanSweepKeepsNoWindowAtZero: KEEP_HEALTHY=0 keeps no record past the
// TTL, healthy or not.
func TestPlanSweepKeepsNoWindowAtZero(t *testing.T) {
	r := healthy(rec(t, "1", rr.StateHealthy, ago(20*day), ago(20*day)), ago(20*day))
	p := policy
	p.KeepHealthy = 0
	if got := rh.PlanSweep([]rh.Entry{entry(r)}, p, now).Deletions; len(got) != 1 {
		t.Fatalf("deletions %+v", got)
	}
}
