package releaserecord_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

var (
	t0  = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

func mustID(t testing.TB, s string) rr.ReleaseID {
	t.Helper()
	id, err := rr.ParseReleaseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// at is a record of docs@2.1.0 in state s, its deploying event sent when
// the state is past merged.
func at(t testing.TB, s rr.State, change ...func(*rr.Record)) rr.Record {
	t.Helper()
	r := rr.NewRecord(rr.Release{ID: mustID(t, "docs@2.1.0:prod-eu/prod"), Image: "registry.example/estate/docs@sha256:" + strings.Repeat("1", 64)}, t0)
	r.State, r.StateAt = s, t0
	if s != rr.StateMerged {
		r.EmittedLive = []string{"deploying"}
		r.PodHash = "hash-a"
	}
	for _, c := range change {
		c(&r)
	}
	return r
}

func sent(keys ...string) func(*rr.Record) { return func(r *rr.Record) { r.EmittedLive = keys } }

func fact(p rr.Phase, change ...func(*rr.Fact)) rr.Fact {
	f := rr.Fact{Phase: p}
	for _, c := range change {
		c(&f)
	}
	return f
}

func abort(f *rr.Fact)         { f.Abort = true }
func healthyBefore(f *rr.Fact) { f.HealthyBefore = true }
func hash(h string) func(*rr.Fact) {
	return func(f *rr.Fact) { f.PodHash = h }
}
func revision(r string) func(*rr.Fact) { return func(f *rr.Fact) { f.Release.GitRevision = r } }
func named(id string) func(*rr.Fact) {
	return func(f *rr.Fact) { f.Release.ID, _ = rr.ParseReleaseID(id) }
}
func generation(g string) func(*rr.Fact)      { return func(f *rr.Fact) { f.Order.ObjectGeneration = g } }
func syncStarted(at time.Time) func(*rr.Fact) { return func(f *rr.Fact) { f.Order.SyncStartedAt = at } }
func message(m string) func(*rr.Fact)         { return func(f *rr.Fact) { f.Message = m } }

func keys(events []rr.Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.Key())
	}
	return out
}

// TestReduce holds the reducer to every row of its rules: one case a row.
func TestReduce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     rr.Record
		fact    rr.Fact
		state   rr.State
		events  []string
		changed bool
		drift   string // a fragment of the drift said; "" for none
		why     string // a fragment of the answer's words
		check   func(t *testing.T, r rr.Record)
	}{
		// States and the first facts.
		{name: "merged starts the record", rec: rr.Record{},
			fact:  rr.Fact{Phase: rr.PhaseMerged, Release: rr.Release{ID: mustID(t, "docs@2.1.0:prod-eu/prod")}},
			state: rr.StateMerged, events: []string{}, changed: true, why: "merged",
			check: func(t *testing.T, r rr.Record) {
				if r.Kind != rr.KindPromote || !r.MergedAt.Equal(now) || r.App != "docs" || r.Env != "prod" || r.Cluster != "prod-eu" {
					t.Errorf("new record %+v", r)
				}
			}},
		{name: "merged again is a repeat", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseMerged),
			state: rr.StateMerged, events: []string{}, why: "already recorded"},
		{name: "merged again naming the git revision first fills it", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseMerged, revision("0123abc")),
			state: rr.StateProgressing, events: []string{}, changed: true, why: "learnt its git revision 0123abc",
			check: func(t *testing.T, r rr.Record) {
				if r.GitRevision != "0123abc" || !r.StateAt.Equal(t0) {
					t.Errorf("%+v", r)
				}
			}},
		{name: "a git revision once known is never moved", rec: at(t, rr.StateHealthy, func(r *rr.Record) { r.GitRevision = "0123abc" }),
			fact: fact(rr.PhaseMerged, revision("4567def")), state: rr.StateHealthy, events: []string{}, why: "already recorded"},
		// Any fact starts its release's record: facts arrive in no set order.
		{name: "a Rollout's Progressing before the sync starts the record: progressing and deploying", rec: rr.Record{},
			fact:  fact(rr.PhaseProgressing, named(idA), generation("Rollout/docs/docs=8"), hash("hash-a")),
			state: rr.StateProgressing, events: []string{"deploying"}, changed: true, why: "merged by its first fact, progressing",
			check: func(t *testing.T, r rr.Record) {
				if r.ReleaseID != idA || !r.MergedAt.Equal(now) || !r.StateAt.Equal(now) || r.ObjectGeneration != "Rollout/docs/docs=8" ||
					r.PodHash != "hash-a" || r.LastFactPhase != "Progressing" || r.Kind != rr.KindPromote || r.Image != "" {
					t.Errorf("record %+v", r)
				}
			}},
		{name: "a Healthy with no record: merged, then healthy", rec: rr.Record{}, fact: fact(rr.PhaseHealthy, named(idA)),
			state: rr.StateHealthy, events: []string{"deploying", "deployed"}, changed: true},
		{name: "a sync failure with no record: merged, then sync-failed", rec: rr.Record{}, fact: fact(rr.PhaseSyncFailed, named(idA), message("apply failed")),
			state: rr.StateSyncFailed, events: []string{"deploying", "failed.sync-failed"}, changed: true,
			check: func(t *testing.T, r rr.Record) {
				if r.LastError != "apply failed" {
					t.Errorf("lastError %q", r.LastError)
				}
			}},
		{name: "a heartbeat with no record: merged", rec: rr.Record{}, fact: fact(rr.PhaseHeartbeat, named(idA)),
			state: rr.StateMerged, events: []string{}, changed: true, why: "merged by its first fact"},
		{name: "the sync after the Rollout fills the release and its start", rec: at(t, rr.StateProgressing, func(r *rr.Record) { r.Image = "" }),
			fact: fact(rr.PhaseMerged, revision("0123abc"), func(f *rr.Fact) {
				f.Release.Image, f.Release.GitURL = "ghcr.io/acme/docs:2.1.0", "https://github.com/acme/docs"
				f.Order.SyncStartedAt = t0.Add(-time.Minute)
			}),
			state: rr.StateProgressing, events: []string{}, changed: true, why: "learnt its git revision 0123abc, git URL https://github.com/acme/docs, image ghcr.io/acme/docs:2.1.0, sync start",
			check: func(t *testing.T, r rr.Record) {
				if r.Image != "ghcr.io/acme/docs:2.1.0" || !r.MergedAt.Equal(t0) || !r.SyncStartedAt.Equal(t0.Add(-time.Minute)) ||
					!r.StateAt.Equal(t0) || !r.LastFactAt.IsZero() {
					t.Errorf("%+v", r)
				}
			}},
		{name: "a sync start after first seen", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseMerged, syncStarted(t0.Add(time.Minute))),
			state: rr.StateProgressing, events: []string{}, changed: true, why: "sync start",
			check: func(t *testing.T, r rr.Record) {
				if !r.MergedAt.Equal(t0) || !r.SyncStartedAt.Equal(t0.Add(time.Minute)) {
					t.Errorf("%+v", r)
				}
			}},
		{name: "the earliest sync start is kept", rec: at(t, rr.StateProgressing, func(r *rr.Record) { r.SyncStartedAt = t0 }),
			fact: fact(rr.PhaseMerged, syncStarted(t0.Add(time.Minute))), state: rr.StateProgressing, events: []string{}, why: "already recorded"},
		{name: "a sync naming a rollback makes the release one, before it is healthy", rec: at(t, rr.StateProgressing),
			fact: fact(rr.PhaseMerged, rollbackOf(idB)), state: rr.StateProgressing, events: []string{}, changed: true, why: "rollback of " + idB,
			check: func(t *testing.T, r rr.Record) {
				if r.Kind != rr.KindRollback || r.RollbackOf != idB {
					t.Errorf("%+v", r)
				}
			}},
		{name: "a rollback named after the release turned healthy is not taken", rec: at(t, rr.StateHealthy, sent("deploying", "deployed"), func(r *rr.Record) { r.HealthyAt = t0 }),
			fact: fact(rr.PhaseMerged, rollbackOf(idB)), state: rr.StateHealthy, events: []string{}, why: "already recorded"},
		{name: "a record with no generation learns it from a repeat", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseProgressing, generation("Rollout/docs/docs=8")),
			state: rr.StateProgressing, events: []string{}, changed: true, why: "still progressing",
			check: func(t *testing.T, r rr.Record) {
				if r.ObjectGeneration != "Rollout/docs/docs=8" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "the first generation named is kept", rec: at(t, rr.StateProgressing, func(r *rr.Record) { r.ObjectGeneration = "Rollout/docs/docs=8" }),
			fact: fact(rr.PhaseProgressing, generation("Rollout/docs/docs=9")), state: rr.StateProgressing, events: []string{}, why: "still progressing"},
		{name: "a first fact after a newer release: superseded at once, nothing sent", rec: rr.Record{},
			fact:  fact(rr.PhaseProgressing, named(idA), generation("Rollout/docs/docs=7"), func(f *rr.Fact) { f.Newer = idB }),
			state: rr.StateSuperseded, events: []string{}, changed: true, why: "first seen after the newer " + idB,
			check: func(t *testing.T, r rr.Record) {
				if r.SupersededBy != idB || r.ObjectGeneration != "Rollout/docs/docs=7" || len(r.EmittedLive) != 0 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "first Progressing: progressing and deploying", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseProgressing, hash("hash-a")),
			state: rr.StateProgressing, events: []string{"deploying"}, changed: true,
			check: func(t *testing.T, r rr.Record) {
				if r.PodHash != "hash-a" || !r.StateAt.Equal(now) || !r.LastFactAt.Equal(now) || r.LastFactPhase != "Progressing" {
					t.Errorf("progressing record %+v", r)
				}
			}},
		{name: "first Paused: progressing and deploying", rec: at(t, rr.StateMerged), fact: fact(rr.PhasePaused),
			state: rr.StateProgressing, events: []string{"deploying"}, changed: true},
		{name: "Progressing repeated: nothing", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseProgressing, hash("hash-a")),
			state: rr.StateProgressing, events: []string{}, why: "still progressing"},
		{name: "Paused while progressing: nothing", rec: at(t, rr.StateProgressing), fact: fact(rr.PhasePaused),
			state: rr.StateProgressing, events: []string{}},
		{name: "a heartbeat: nothing", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHeartbeat, hash("hash-a")),
			state: rr.StateProgressing, events: []string{}},
		{name: "Healthy: healthy and one success event", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHealthy),
			state: rr.StateHealthy, events: []string{"deployed"}, changed: true,
			check: func(t *testing.T, r rr.Record) {
				if !r.HealthyAt.Equal(now) {
					t.Errorf("healthyAt %v", r.HealthyAt)
				}
			}},
		{name: "Healthy with a release healthy before: upgraded", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHealthy, healthyBefore),
			state: rr.StateHealthy, events: []string{"upgraded"}, changed: true},
		{name: "Healthy repeated: nothing", rec: at(t, rr.StateHealthy, sent("deploying", "deployed")), fact: fact(rr.PhaseHealthy),
			state: rr.StateHealthy, events: []string{}, why: "still healthy"},
		{name: "Degraded with the abort flag: aborted and one failure", rec: at(t, rr.StateProgressing),
			fact:  fact(rr.PhaseDegraded, abort, message("analysis\nfailed")),
			state: rr.StateAborted, events: []string{"failed.aborted"}, changed: true,
			check: func(t *testing.T, r rr.Record) {
				if r.LastError != "analysis failed" {
					t.Errorf("lastError %q", r.LastError)
				}
			}},
		{name: "Degraded without the abort flag: degraded and one failure", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseDegraded),
			state: rr.StateDegraded, events: []string{"failed.degraded"}, changed: true},
		{name: "a failure from before the release: ignored", rec: at(t, rr.StateProgressing),
			fact:  fact(rr.PhaseDegraded, abort, func(f *rr.Fact) { f.At = t0.Add(-time.Second) }),
			state: rr.StateProgressing, events: []string{}, why: "the release before's"},
		{name: "a failure since the release: aborted", rec: at(t, rr.StateProgressing),
			fact:  fact(rr.PhaseDegraded, abort, func(f *rr.Fact) { f.At = t0 }),
			state: rr.StateAborted, events: []string{"failed.aborted"}, changed: true},
		{name: "Degraded repeated: nothing", rec: at(t, rr.StateAborted, sent("deploying", "failed.aborted")), fact: fact(rr.PhaseDegraded, abort),
			state: rr.StateAborted, events: []string{}},
		{name: "a first fact already Healthy sends the lost deploying first", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseHealthy),
			state: rr.StateHealthy, events: []string{"deploying", "deployed"}, changed: true},
		{name: "a first fact already Degraded sends the lost deploying first", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseDegraded, abort),
			state: rr.StateAborted, events: []string{"deploying", "failed.aborted"}, changed: true},
		{name: "Progressing after healthy: ignored and said", rec: at(t, rr.StateHealthy, sent("deploying", "deployed")), fact: fact(rr.PhaseProgressing),
			state: rr.StateHealthy, events: []string{}, why: "Progressing after the release was healthy: ignored"},
		{name: "Progressing after degraded: ignored and said", rec: at(t, rr.StateDegraded, sent("deploying", "failed.degraded")), fact: fact(rr.PhaseProgressing),
			state: rr.StateDegraded, events: []string{}, why: "after the release was degraded: ignored"},
		{name: "Progressing with the abort flag still set: nothing", rec: at(t, rr.StateAborted, sent("deploying", "failed.aborted")), fact: fact(rr.PhaseProgressing, abort),
			state: rr.StateAborted, events: []string{}, why: "still aborted"},
		{name: "a retry after aborted: progressing, no second deploying", rec: at(t, rr.StateAborted, sent("deploying", "failed.aborted")), fact: fact(rr.PhaseProgressing),
			state: rr.StateProgressing, events: []string{}, changed: true, why: "retried"},
		{name: "recovery: aborted to healthy", rec: at(t, rr.StateAborted, sent("deploying", "failed.aborted")), fact: fact(rr.PhaseHealthy),
			state: rr.StateHealthy, events: []string{"deployed"}, changed: true},
		{name: "recovery: degraded to healthy", rec: at(t, rr.StateDegraded, sent("deploying", "failed.degraded")), fact: fact(rr.PhaseHealthy, healthyBefore),
			state: rr.StateHealthy, events: []string{"upgraded"}, changed: true},
		// Drift.
		{name: "another pod hash: drift once, state unchanged, no event", rec: at(t, rr.StateHealthy, sent("deploying", "deployed")),
			fact:  fact(rr.PhaseHealthy, hash("hash-b")),
			state: rr.StateHealthy, events: []string{}, changed: true, drift: "from hash-a to hash-b",
			check: func(t *testing.T, r rr.Record) {
				if r.PodHash != "hash-b" {
					t.Errorf("podHash %q", r.PodHash)
				}
			}},
		{name: "the moved pod hash again: nothing", rec: at(t, rr.StateHealthy, sent("deploying", "deployed"), func(r *rr.Record) { r.PodHash, r.Drift = "hash-b", "the pod hash moved from hash-a to hash-b" }),
			fact:  fact(rr.PhaseHealthy, hash("hash-b")),
			state: rr.StateHealthy, events: []string{}},
		{name: "another pod hash while progressing: drift, the phase not taken", rec: at(t, rr.StateProgressing),
			fact:  fact(rr.PhaseHealthy, hash("hash-c")),
			state: rr.StateProgressing, events: []string{}, changed: true, drift: "to hash-c"},
		{name: "Degraded after Healthy: drift, not a failed deploy", rec: at(t, rr.StateHealthy, sent("deploying", "deployed")),
			fact:  fact(rr.PhaseDegraded, abort, message("pods crash")),
			state: rr.StateHealthy, events: []string{}, changed: true, drift: "degraded after it was healthy: pods crash"},
		{name: "Degraded after Healthy again: said once", rec: at(t, rr.StateHealthy, sent("deploying", "deployed"), func(r *rr.Record) { r.Drift = "degraded after it was healthy: pods crash" }),
			fact:  fact(rr.PhaseDegraded, message("pods crash")),
			state: rr.StateHealthy, events: []string{}},
		{name: "Healthy after that drift clears it", rec: at(t, rr.StateHealthy, sent("deploying", "deployed"), func(r *rr.Record) { r.Drift = "degraded after it was healthy" }),
			fact:  fact(rr.PhaseHealthy),
			state: rr.StateHealthy, events: []string{}, changed: true, why: "healthy again",
			check: func(t *testing.T, r rr.Record) {
				if r.Drift != "" {
					t.Errorf("drift %q", r.Drift)
				}
			}},
		// Sync failures.
		{name: "a sync failure on a merged release: deploying and one failure", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseSyncFailed, message("kustomize build failed")),
			state: rr.StateSyncFailed, events: []string{"deploying", "failed.sync-failed"}, changed: true,
			check: func(t *testing.T, r rr.Record) {
				if r.LastError != "kustomize build failed" {
					t.Errorf("lastError %q", r.LastError)
				}
			}},
		{name: "a sync failure on a progressing release: one failure", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseSyncFailed, message("apply failed")),
			state: rr.StateSyncFailed, events: []string{"failed.sync-failed"}, changed: true},
		{name: "a sync failure retried: nothing, lastError kept", rec: at(t, rr.StateSyncFailed, sent("deploying", "failed.sync-failed"), func(r *rr.Record) { r.LastError = "first" }),
			fact:  fact(rr.PhaseSyncFailed, message("second")),
			state: rr.StateSyncFailed, events: []string{}, why: "still failing",
			check: func(t *testing.T, r rr.Record) {
				if r.LastError != "first" {
					t.Errorf("lastError %q", r.LastError)
				}
			}},
		{name: "sync-failed to progressing, no second deploying", rec: at(t, rr.StateSyncFailed, sent("deploying", "failed.sync-failed")), fact: fact(rr.PhaseProgressing),
			state: rr.StateProgressing, events: []string{}, changed: true},
		{name: "failing again after progressing: no second failure", rec: at(t, rr.StateProgressing, sent("deploying", "failed.sync-failed")), fact: fact(rr.PhaseSyncFailed),
			state: rr.StateSyncFailed, events: []string{}, changed: true},
		{name: "a sync failure with no release in flight: ignored", rec: at(t, rr.StateHealthy, sent("deploying", "deployed")), fact: fact(rr.PhaseSyncFailed),
			state: rr.StateHealthy, events: []string{}, why: "no release in flight"},
		{name: "a rollback turning healthy: rolledback", rec: at(t, rr.StateProgressing, func(r *rr.Record) { r.Kind, r.RollbackOf = rr.KindRollback, "docs@2.2.0:prod-eu/prod" }),
			fact: fact(rr.PhaseHealthy, healthyBefore), state: rr.StateHealthy, events: []string{"rolledback"}, changed: true},
		// Superseded, rolled back and closed releases take nothing.
		{name: "a superseded release's facts send nothing", rec: at(t, rr.StateSuperseded, func(r *rr.Record) { r.SupersededBy = "docs@2.2.0:prod-eu/prod" }),
			fact: fact(rr.PhaseHealthy), state: rr.StateSuperseded, events: []string{}, why: "superseded by docs@2.2.0"},
		{name: "a rolled-back release's facts send nothing", rec: at(t, rr.StateRolledBack), fact: fact(rr.PhaseDegraded),
			state: rr.StateRolledBack, events: []string{}, why: "rolled back"},
		{name: "a closed release's facts send nothing", rec: at(t, rr.StateClosed), fact: fact(rr.PhaseProgressing),
			state: rr.StateClosed, events: []string{}, why: "closed"},
		// Shadow: the other mode's set counts as sent for what is due.
		{name: "an event shadow sent is not due again", rec: at(t, rr.StateProgressing, func(r *rr.Record) { r.EmittedLive, r.EmittedShadow = nil, []string{"deploying"} }),
			fact: fact(rr.PhaseHealthy), state: rr.StateHealthy, events: []string{"deployed"}, changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rr.Reduce(tc.rec, tc.fact, now)
			if got.Record.State != tc.state {
				t.Errorf("state %q, want %q (%s)", got.Record.State, tc.state, got.Why)
			}
			if k := keys(got.Events); !slices.Equal(k, tc.events) {
				t.Errorf("events %v, want %v", k, tc.events)
			}
			if got.Changed != tc.changed {
				t.Errorf("changed %v, want %v (%s)", got.Changed, tc.changed, got.Why)
			}
			if !got.Changed && !reflectEqual(got.Record, tc.rec) {
				t.Errorf("unchanged, but the record moved: %+v", got.Record)
			}
			switch {
			case tc.drift == "" && got.Drift != nil:
				t.Errorf("drift %q, want none", got.Drift.Message)
			case tc.drift != "" && (got.Drift == nil || !strings.Contains(got.Drift.Message, tc.drift)):
				t.Errorf("drift %+v, want %q", got.Drift, tc.drift)
			case tc.drift != "" && got.Record.Drift != got.Drift.Message:
				t.Errorf("the record's drift %q is not the drift said %q", got.Record.Drift, got.Drift.Message)
			}
			if !strings.Contains(got.Why, tc.why) {
				t.Errorf("why %q, want %q in it", got.Why, tc.why)
			}
			if tc.check != nil {
				tc.check(t, got.Record)
			}
		})
	}
}

func reflectEqual(a, b rr.Record) bool {
	return slices.Equal(keysOfData(a), keysOfData(b))
}

func keysOfData(r rr.Record) []string {
	var out []string
	for _, k := range rr.Keys {
		out = append(out, k+"="+r.Data()[k])
	}
	return out
}
