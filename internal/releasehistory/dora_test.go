package releasehistory_test

import (
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) rr.Record
		want rh.Outcome
	}{
		{"healthy", func(t *testing.T) rr.Record {
			return healthy(rec(t, "1", rr.StateHealthy, ago(time.Hour), ago(time.Minute)), ago(time.Minute))
		}, rh.OutcomeSucceeded},
		{"superseded after healthy", func(t *testing.T) rr.Record {
			return healthy(rec(t, "1", rr.StateSuperseded, ago(time.Hour), ago(time.Minute)), ago(30*time.Minute))
		}, rh.OutcomeSucceeded},
		{"drift after healthy is not a change failure", func(t *testing.T) rr.Record {
			r := healthy(rec(t, "1", rr.StateHealthy, ago(time.Hour), ago(time.Minute)), ago(time.Minute))
			r.Drift, r.EmittedLive = "degraded after healthy", []string{"deploying", "deployed"}
			return r
		}, rh.OutcomeSucceeded},
		{"aborted", func(t *testing.T) rr.Record { return rec(t, "1", rr.StateAborted, ago(time.Hour), ago(time.Minute)) }, rh.OutcomeFailed},
		{"degraded", func(t *testing.T) rr.Record { return rec(t, "1", rr.StateDegraded, ago(time.Hour), ago(time.Minute)) }, rh.OutcomeFailed},
		{"aborted, then recovered: still a change failure", func(t *testing.T) rr.Record {
			r := healthy(rec(t, "1", rr.StateHealthy, ago(time.Hour), ago(time.Minute)), ago(time.Minute))
			r.EmittedLive = []string{"deploying", "failed.aborted", "upgraded"}
			return r
		}, rh.OutcomeFailed},
		{"a failure sent in shadow mode counts", func(t *testing.T) rr.Record {
			r := rec(t, "1", rr.StateSuperseded, ago(time.Hour), ago(time.Minute))
			r.EmittedShadow = []string{"deploying", "failed.degraded"}
			return r
		}, rh.OutcomeFailed},
		{"a sync failure is not a change failure", func(t *testing.T) rr.Record {
			r := rec(t, "1", rr.StateSuperseded, ago(time.Hour), ago(time.Minute))
			r.EmittedLive = []string{"deploying", "failed.sync-failed"}
			return r
		}, rh.OutcomeAbandoned},
		{"superseded before healthy", func(t *testing.T) rr.Record {
			return rec(t, "1", rr.StateSuperseded, ago(time.Hour), ago(time.Minute))
		}, rh.OutcomeAbandoned},
		{"merged", func(t *testing.T) rr.Record { return rec(t, "1", rr.StateMerged, ago(time.Hour), ago(time.Hour)) }, rh.OutcomeInFlight},
		{"progressing", func(t *testing.T) rr.Record {
			return rec(t, "1", rr.StateProgressing, ago(time.Hour), ago(time.Minute))
		}, rh.OutcomeInFlight},
		{"sync-failed", func(t *testing.T) rr.Record {
			return rec(t, "1", rr.StateSyncFailed, ago(time.Hour), ago(time.Minute))
		}, rh.OutcomeInFlight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rh.OutcomeOf(tc.rec(t)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLeadTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) rr.Record
		want time.Duration
		ok   bool
	}{
		{"merged to healthy", func(t *testing.T) rr.Record {
			return healthy(rec(t, "1", rr.StateHealthy, ago(time.Hour), ago(20*time.Minute)), ago(20*time.Minute))
		}, 40 * time.Minute, true},
		{"kept through superseded", func(t *testing.T) rr.Record {
			return healthy(rec(t, "1", rr.StateSuperseded, ago(time.Hour), ago(time.Minute)), ago(50*time.Minute))
		}, 10 * time.Minute, true},
		{"never healthy", func(t *testing.T) rr.Record { return rec(t, "1", rr.StateAborted, ago(time.Hour), ago(time.Minute)) }, 0, false},
		{"healthy before merged is no lead time", func(t *testing.T) rr.Record {
			return healthy(rec(t, "1", rr.StateHealthy, ago(time.Hour), ago(time.Minute)), ago(2*time.Hour))
		}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := rh.LeadTime(tc.rec(t))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFigures: one service's history, counted by outcome, with lead times,
// change failures and the time each took to restore.
func TestFigures(t *testing.T) {
	recs := []rr.Record{
		// v1 healthy 30m after merge.
		healthy(rec(t, "1", rr.StateSuperseded, ago(10*time.Hour), ago(8*time.Hour)), ago(570*time.Minute)),
		// v2 aborted at -8h, superseded by v3: its failure time is its mergedAt.
		func() rr.Record {
			r := rec(t, "2", rr.StateSuperseded, ago(9*time.Hour), ago(7*time.Hour))
			r.EmittedLive = []string{"deploying", "failed.aborted"}
			return r
		}(),
		// v3 healthy at -6h: restores v2 (9h-6h = 3h).
		healthy(rec(t, "3", rr.StateSuperseded, ago(7*time.Hour), ago(5*time.Hour)), ago(6*time.Hour)),
		// v4 degraded at -4h, never restored yet.
		rec(t, "4", rr.StateDegraded, ago(5*time.Hour), ago(4*time.Hour)),
		// v5 in flight: no outcome.
		rec(t, "5", rr.StateProgressing, ago(time.Hour), ago(time.Minute)),
		// v0 finished before the window.
		healthy(rec(t, "0", rr.StateSuperseded, ago(40*day), ago(39*day)), ago(40*day)),
	}
	got := rh.Figures(recs, ago(30*day))
	docs := got[rh.ServiceKey{App: "docs", Env: "prod", Cluster: "prod-eu"}]
	if len(got) != 1 || docs.Deployments[rh.OutcomeSucceeded] != 2 || docs.Deployments[rh.OutcomeFailed] != 2 ||
		docs.Deployments[rh.OutcomeAbandoned] != 0 || docs.ChangeFailures != 2 {
		t.Fatalf("figures %+v", got)
	}
	if len(docs.LeadTimes) != 2 || docs.LeadTimes[0] != 30*time.Minute || docs.LeadTimes[1] != time.Hour {
		t.Fatalf("lead times %v", docs.LeadTimes)
	}
	if len(docs.Restores) != 1 || docs.Restores[0] != 3*time.Hour {
		t.Fatalf("restores %v", docs.Restores)
	}
	if all := rh.Figures(recs, time.Time{}); all[rh.ServiceKey{App: "docs", Env: "prod", Cluster: "prod-eu"}].Deployments[rh.OutcomeSucceeded] != 3 {
		t.Fatalf("with no window every record counts: %+v", all)
	}
}

func TestRestoreTime(t *testing.T) {
	failed := rec(t, "2", rr.StateAborted, ago(3*time.Hour), ago(2*time.Hour))
	for _, tc := range []struct {
		name  string
		group []rr.Record
		want  time.Duration
		ok    bool
	}{
		{"none healthy since", []rr.Record{healthy(rec(t, "1", rr.StateSuperseded, ago(5*time.Hour), ago(4*time.Hour)), ago(4*time.Hour))}, 0, false},
		{"the first healthy after the failure", []rr.Record{
			healthy(rec(t, "4", rr.StateHealthy, ago(time.Hour), ago(10*time.Minute)), ago(10*time.Minute)),
			healthy(rec(t, "3", rr.StateSuperseded, ago(2*time.Hour), ago(30*time.Minute)), ago(90*time.Minute)),
		}, 30 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := rh.RestoreTime(failed, tc.group)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
