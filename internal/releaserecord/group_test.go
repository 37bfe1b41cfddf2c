package releaserecord_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// release is a record of id in state s.
func release(t testing.TB, id string, s rr.State, change ...func(*rr.Record)) rr.Record {
	t.Helper()
	r := rr.NewRecord(rr.Release{ID: mustID(t, id)}, t0)
	r.State = s
	for _, c := range change {
		c(&r)
	}
	return r
}

func TestSupersede(t *testing.T) {
	const newer = "docs@2.2.0:prod-eu/prod"
	for _, tc := range []struct {
		state rr.State
		want  rr.State
	}{
		{rr.StateMerged, rr.StateSuperseded},
		{rr.StateProgressing, rr.StateSuperseded},
		{rr.StateSyncFailed, rr.StateSuperseded},
		{rr.StateHealthy, rr.StateSuperseded},
		{rr.StateAborted, rr.StateSuperseded},
		{rr.StateDegraded, rr.StateSuperseded},
		{rr.StateSuperseded, rr.StateSuperseded},
		{rr.StateRolledBack, rr.StateRolledBack},
		{rr.StateClosed, rr.StateClosed},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			older := release(t, "docs@2.1.0:prod-eu/prod", tc.state, func(r *rr.Record) { r.HealthyAt = t0 })
			got := rr.Supersede(older, newer, now)
			if got.Record.State != tc.want || len(got.Events) != 0 {
				t.Fatalf("%s: %+v", tc.state, got)
			}
			live := tc.state != rr.StateSuperseded && tc.state != rr.StateRolledBack && tc.state != rr.StateClosed
			if got.Changed != live {
				t.Fatalf("changed %v for %s", got.Changed, tc.state)
			}
			if live && (got.Record.SupersededBy != newer || !got.Record.HealthyAt.Equal(t0) || !got.Record.StateAt.Equal(now)) {
				t.Fatalf("superseded record %+v", got.Record)
			}
		})
	}
	// A release never supersedes itself.
	self := release(t, newer, rr.StateHealthy)
	if got := rr.Supersede(self, newer, now); got.Changed {
		t.Fatalf("superseded itself: %+v", got)
	}
}

func TestMarkRolledBack(t *testing.T) {
	const target = "docs@2.2.0:prod-eu/prod"
	rollback := release(t, "docs@2.1.0-rb.1:prod-eu/prod", rr.StateHealthy, func(r *rr.Record) {
		r.Kind, r.RollbackOf, r.RollbackReason = rr.KindRollback, target, "error rate"
	})
	for _, tc := range []struct {
		name   string
		target rr.Record
		by     rr.Record
		marked bool
		why    string
	}{
		{"a healthy release", release(t, target, rr.StateHealthy, func(r *rr.Record) { r.HealthyAt = t0 }), rollback, true, "rolled back by"},
		{"a superseded release", release(t, target, rr.StateSuperseded), rollback, true, ""},
		{"an aborted release", release(t, target, rr.StateAborted), rollback, true, ""},
		{"a progressing release", release(t, target, rr.StateProgressing), rollback, true, ""},
		{"a release that never ran", release(t, target, rr.StateMerged), rollback, false, "never ran"},
		{"a release rolled back already: once", release(t, target, rr.StateRolledBack), rollback, false, "rolled back already"},
		{"another cluster's release", release(t, "docs@2.2.0:prod-us/prod", rr.StateHealthy), func() rr.Record {
			r := rollback
			r.RollbackOf = "docs@2.2.0:prod-us/prod"
			return r
		}(), false, "own app, env and cluster"},
		{"another env's release", release(t, "docs@2.2.0:prod-eu/stage", rr.StateHealthy), func() rr.Record {
			r := rollback
			r.RollbackOf = "docs@2.2.0:prod-eu/stage"
			return r
		}(), false, "own app, env and cluster"},
		{"another app's release", release(t, "api@2.2.0:prod-eu/prod", rr.StateHealthy), func() rr.Record {
			r := rollback
			r.RollbackOf = "api@2.2.0:prod-eu/prod"
			return r
		}(), false, "own app"},
		{"a release the rollback does not name", release(t, "docs@2.0.0:prod-eu/prod", rr.StateHealthy), rollback, false, "not the release"},
		{"a promote names nothing", release(t, target, rr.StateHealthy), func() rr.Record { r := rollback; r.Kind = rr.KindPromote; return r }(), false, "not the release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rr.MarkRolledBack(tc.target, tc.by, now)
			if got.Changed != tc.marked || len(got.Events) != 0 || !strings.Contains(got.Why, tc.why) {
				t.Fatalf("%+v", got)
			}
			if tc.marked && (got.Record.State != rr.StateRolledBack || got.Record.RolledBackBy != tc.by.ReleaseID || !got.Record.HealthyAt.Equal(tc.target.HealthyAt)) {
				t.Fatalf("marked record %+v", got.Record)
			}
		})
	}
}

func TestInFlight(t *testing.T) {
	older := release(t, "docs@2.1.0:prod-eu/prod", rr.StateProgressing, func(r *rr.Record) { r.GitRevision = "aaa" })
	newer := release(t, "docs@2.2.0:prod-eu/prod", rr.StateMerged, func(r *rr.Record) { r.MergedAt = t0.Add(time.Minute); r.GitRevision = "bbb" })
	done := release(t, "docs@2.0.0:prod-eu/prod", rr.StateHealthy, func(r *rr.Record) { r.MergedAt = t0.Add(time.Hour) })
	all := []rr.Record{older, done, newer}
	if got, ok := rr.InFlight(all, ""); !ok || got.ReleaseID != newer.ReleaseID {
		t.Fatalf("newest in flight: %v %v", got.ReleaseID, ok)
	}
	if got, ok := rr.InFlight(all, "aaa"); !ok || got.ReleaseID != older.ReleaseID {
		t.Fatalf("at the revision: %v %v", got.ReleaseID, ok)
	}
	if got, ok := rr.InFlight(all, "zzz"); !ok || got.ReleaseID != newer.ReleaseID {
		t.Fatalf("an unknown revision: %v %v", got.ReleaseID, ok)
	}
	if _, ok := rr.InFlight([]rr.Record{done}, ""); ok {
		t.Fatal("a healthy release is in flight")
	}
}

// TestOwedAndTheModes: the two modes keep their own sent sets, so a record
// shadow mode saw whole owes emit mode its history, once, in order.
func TestOwedAndTheModes(t *testing.T) {
	rec := at(t, rr.StateMerged)
	due := rr.Reduce(rec, fact(rr.PhaseHealthy), now)
	shadowOwed := rr.Owed(due.Record, rr.ModeShadow, due.Events)
	if k := keys(shadowOwed); !slices.Equal(k, []string{"deploying", "deployed"}) {
		t.Fatalf("shadow owes %v", k)
	}
	shadowed := rr.MarkSent(due.Record, rr.ModeShadow, shadowOwed)
	if !slices.Equal(shadowed.EmittedShadow, []string{"deployed", "deploying"}) || len(shadowed.EmittedLive) != 0 {
		t.Fatalf("sets %v %v", shadowed.EmittedLive, shadowed.EmittedShadow)
	}
	// A repeat in shadow: nothing due, nothing owed.
	again := rr.Reduce(shadowed, fact(rr.PhaseHealthy), now)
	if again.Changed || len(rr.Owed(again.Record, rr.ModeShadow, again.Events)) != 0 {
		t.Fatalf("a shadow repeat owes %+v", again)
	}
	// Flipped to emit: the history, once, in the order it was lived.
	owed := rr.Owed(again.Record, rr.ModeEmit, again.Events)
	if k := keys(owed); !slices.Equal(k, []string{"deploying", "deployed"}) {
		t.Fatalf("emit owes %v", k)
	}
	live := rr.MarkSent(again.Record, rr.ModeEmit, owed)
	if len(rr.Owed(live, rr.ModeEmit, nil)) != 0 || len(rr.Owed(live, rr.ModeShadow, nil)) != 0 {
		t.Fatal("owed after both sent")
	}
	if got := rr.MarkSent(live, rr.ModeEmit, nil); !slices.Equal(got.EmittedLive, live.EmittedLive) {
		t.Fatal("marking nothing changed the set")
	}
	// A key of no event in a set is never owed.
	odd := live
	odd.EmittedShadow = append(odd.EmittedShadow, "failed.sideways")
	if k := keys(rr.Owed(odd, rr.ModeEmit, nil)); len(k) != 0 {
		t.Fatalf("owes %v", k)
	}
}

// TestNewer: releases are ordered by what their facts say, and by when they
// were first seen only when the facts name no common order.
func TestNewer(t *testing.T) {
	seenFirst := func(r *rr.Record) { r.MergedAt = t0 }
	seenLater := func(r *rr.Record) { r.MergedAt = t0.Add(time.Hour) }
	gen := func(g string) func(*rr.Record) { return func(r *rr.Record) { r.ObjectGeneration = g } }
	synced := func(d time.Duration) func(*rr.Record) { return func(r *rr.Record) { r.SyncStartedAt = t0.Add(d) } }
	for _, tc := range []struct {
		name string
		a, b rr.Record
		want bool
	}{
		{"a later generation of one Rollout, first seen earlier", release(t, idB, rr.StateProgressing, seenFirst, gen("Rollout/docs/docs=8")),
			release(t, idA, rr.StateMerged, seenLater, gen("Rollout/docs/docs=7")), true},
		{"an earlier generation of one Rollout, first seen later", release(t, idA, rr.StateMerged, seenLater, gen("Rollout/docs/docs=7")),
			release(t, idB, rr.StateProgressing, seenFirst, gen("Rollout/docs/docs=8")), false},
		{"generations past 2^63 compare as numbers", release(t, idB, rr.StateMerged, seenFirst, gen("Rollout/docs/docs=9999999999999999999")),
			release(t, idA, rr.StateMerged, seenLater, gen("Rollout/docs/docs=10")), true},
		{"a Rollout made again (another uid) says nothing: the sync's start", release(t, idB, rr.StateMerged, seenFirst, synced(time.Minute),
			gen("Rollout/docs/docs/0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a=1")),
			release(t, idA, rr.StateMerged, seenLater, synced(0), gen("Rollout/docs/docs/7d1e9f3a-2b4c-4d5e-8f6a-9b0c1d2e3f4a=9")), true},
		{"a later generation of a Flux unit's source", release(t, idB, rr.StateMerged, seenFirst, gen("OCIRepository/flux-system/project-docs/0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a=4")),
			release(t, idA, rr.StateMerged, seenLater, gen("OCIRepository/flux-system/project-docs/0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a=3")), true},
		{"a Rollout's generation and a source's say nothing: first seen", release(t, idB, rr.StateMerged, seenLater, gen("Rollout/docs/docs=2")),
			release(t, idA, rr.StateMerged, seenFirst, gen("OCIRepository/docs/docs=9")), true},
		{"generations of two Rollouts say nothing: the sync's start", release(t, idB, rr.StateMerged, seenFirst, gen("Rollout/docs/api=2"), synced(time.Minute)),
			release(t, idA, rr.StateMerged, seenLater, gen("Rollout/docs/docs=9"), synced(0)), true},
		{"a later sync start, first seen earlier", release(t, idB, rr.StateMerged, seenFirst, synced(time.Minute)),
			release(t, idA, rr.StateMerged, seenLater, synced(0)), true},
		{"an earlier sync start, first seen later", release(t, idA, rr.StateMerged, seenLater, synced(0)),
			release(t, idB, rr.StateMerged, seenFirst, synced(time.Minute)), false},
		{"a rollback is newer than the release it undoes, whatever its sync", release(t, idC, rr.StateMerged, seenFirst, synced(0), func(r *rr.Record) {
			r.Kind, r.RollbackOf = rr.KindRollback, idB
		}), release(t, idB, rr.StateHealthy, seenLater, synced(time.Minute)), true},
		{"the release a rollback undoes is older", release(t, idB, rr.StateHealthy, seenLater, synced(time.Minute)),
			release(t, idC, rr.StateMerged, seenFirst, func(r *rr.Record) { r.Kind, r.RollbackOf = rr.KindRollback, idB }), false},
		{"no common order: first seen later", release(t, idA, rr.StateMerged, seenLater, gen("Rollout/docs/docs=7")),
			release(t, idB, rr.StateMerged, seenFirst, synced(0)), true},
		{"no order at all, seen at once: neither", release(t, idA, rr.StateMerged, seenFirst), release(t, idB, rr.StateMerged, seenFirst), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rr.Newer(tc.a, tc.b); got != tc.want {
				t.Fatalf("Newer %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewerThan(t *testing.T) {
	gen := func(g string) func(*rr.Record) { return func(r *rr.Record) { r.ObjectGeneration = g } }
	late := release(t, idA, rr.StateMerged, func(r *rr.Record) { r.MergedAt = t0.Add(time.Hour) }, gen("Rollout/docs/docs=7"))
	b := release(t, idB, rr.StateProgressing, gen("Rollout/docs/docs=8"))
	c := release(t, idC, rr.StateSuperseded, gen("Rollout/docs/docs=9"))
	older := release(t, "docs@2.0.0:prod-eu/prod", rr.StateHealthy, gen("Rollout/docs/docs=6"))
	otherCluster := release(t, "docs@3.0.0:prod-us/prod", rr.StateHealthy, gen("Rollout/docs/docs=99"))
	if got := rr.NewerThan(late, []rr.Record{late, older, b, c, otherCluster}); got != idC {
		t.Fatalf("the newest newer: %q", got)
	}
	if got := rr.NewerThan(late, []rr.Record{late, older, otherCluster}); got != "" {
		t.Fatalf("none newer: %q", got)
	}
}

func TestObjectGenerationOf(t *testing.T) {
	const uid = "0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a"
	for _, tc := range []struct {
		kind, namespace, name, uid, generation string
		want                                   string
	}{
		{"Rollout", "docs", "docs", "", "7", "Rollout/docs/docs=7"},
		{"OCIRepository", "flux-system", "project-docs", uid, "3", "OCIRepository/flux-system/project-docs/" + uid + "=3"},
		{"Rollout", "Docs", "docs", "", "7", ""},
		{"Rollout", "docs", "docs=8", "", "7", ""},
		{"Rollout", "docs", "docs", "not-a-uid", "7", ""},
		{"Rollout", "docs", "docs", "", "", ""},
		{"Rollout", "docs", "docs", "", "-1", ""},
		{"Roll out", "docs", "docs", "", "7", ""},
	} {
		if got := rr.ObjectGenerationOf(tc.kind, tc.namespace, tc.name, tc.uid, tc.generation); got != tc.want {
			t.Errorf("%+v: %q", tc, got)
		}
	}
}
