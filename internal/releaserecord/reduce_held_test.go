package releaserecord_test

import (
	"strings"
	"testing"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func heldBy(reason string) func(*rr.Fact) { return func(f *rr.Fact) { f.Held = reason } }

func holding(reason string) func(*rr.Record) { return func(r *rr.Record) { r.Held = reason } }

// TestReduceHeld holds the reducer's step for the gate's word on a release:
// a release that does not serve yet takes why the gate holds it, a release
// that serves is held by no gate, and nothing of it is an event.
func TestReduceHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     rr.Record
		fact    rr.Fact
		state   rr.State
		held    string
		changed bool
		why     string
	}{
		{name: "a progressing release held takes the reason", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHeld, heldBy("analysis-failed")),
			state: rr.StateProgressing, held: "analysis-failed", changed: true, why: "held: analysis-failed"},
		{name: "an aborted release held takes the reason", rec: at(t, rr.StateAborted), fact: fact(rr.PhaseHeld, heldBy("analysis-failed")),
			state: rr.StateAborted, held: "analysis-failed", changed: true},
		{name: "a merged release held takes the reason", rec: at(t, rr.StateMerged), fact: fact(rr.PhaseHeld, heldBy("stale-proof")),
			state: rr.StateMerged, held: "stale-proof", changed: true},
		{name: "a sync-failed release held takes the reason", rec: at(t, rr.StateSyncFailed), fact: fact(rr.PhaseHeld, heldBy("migration-failed")),
			state: rr.StateSyncFailed, held: "migration-failed", changed: true},
		{name: "the same reason again is a repeat", rec: at(t, rr.StateProgressing, holding("analysis-failed")),
			fact: fact(rr.PhaseHeld, heldBy("analysis-failed")), state: rr.StateProgressing, held: "analysis-failed", why: "still held"},
		{name: "another reason replaces it", rec: at(t, rr.StateProgressing, holding("stale-proof")),
			fact: fact(rr.PhaseHeld, heldBy("migration-failed")), state: rr.StateProgressing, held: "migration-failed", changed: true},
		{name: "held no longer clears it", rec: at(t, rr.StateProgressing, holding("analysis-failed")),
			fact: fact(rr.PhaseHeld), state: rr.StateProgressing, held: "", changed: true, why: "held no longer"},
		{name: "not held, and never was, changes nothing", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHeld),
			state: rr.StateProgressing, why: "not held"},
		{name: "a release that serves is held by no gate", rec: at(t, rr.StateHealthy), fact: fact(rr.PhaseHeld, heldBy("analysis-failed")),
			state: rr.StateHealthy, why: "serves: ignored"},
		{name: "nor one degraded after it served", rec: at(t, rr.StateDegraded, func(r *rr.Record) { r.HealthyAt = t0 }),
			fact: fact(rr.PhaseHeld, heldBy("analysis-failed")), state: rr.StateDegraded, why: "serves: ignored"},
		{name: "a reason not in the gate's shape is ignored", rec: at(t, rr.StateProgressing), fact: fact(rr.PhaseHeld, heldBy("<b>held</b>")),
			state: rr.StateProgressing, why: "no reason"},
		{name: "turning healthy ends the hold", rec: at(t, rr.StateProgressing, holding("analysis-failed")),
			fact: fact(rr.PhaseHealthy), state: rr.StateHealthy, held: "", changed: true},
		{name: "a superseded release keeps what it was held for", rec: at(t, rr.StateSuperseded, holding("analysis-failed")),
			fact: fact(rr.PhaseHeld), state: rr.StateSuperseded, held: "analysis-failed", why: "superseded"},
		{name: "the gate's word first starts the record, held", rec: rr.Record{}, fact: fact(rr.PhaseHeld, named(idA), heldBy("analysis-failed")),
			state: rr.StateMerged, held: "analysis-failed", changed: true, why: "merged by its first fact, held: analysis-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := rr.Reduce(tc.rec, tc.fact, now)
			if res.Record.State != tc.state || res.Record.Held != tc.held || res.Changed != tc.changed {
				t.Errorf("state %s held %q changed %v (%s); want %s, %q, %v", res.Record.State, res.Record.Held, res.Changed, res.Why,
					tc.state, tc.held, tc.changed)
			}
			if tc.why != "" && !strings.Contains(res.Why, tc.why) {
				t.Errorf("why %q, want it to say %q", res.Why, tc.why)
			}
			if tc.fact.Phase == rr.PhaseHeld && len(res.Events) != 0 {
				t.Errorf("the gate's word made events %v", keys(res.Events))
			}
			if res.Changed {
				if res.Record.LastFactPhase != string(tc.fact.Phase) || !res.Record.LastFactAt.Equal(now) {
					t.Errorf("last fact %s at %s", res.Record.LastFactPhase, res.Record.LastFactAt)
				}
				// Every record the step makes is one the schema reads back.
				back, err := rr.DecodeRecord(res.Record.Name(), res.Record.Data())
				if err != nil || back.Held != tc.held {
					t.Errorf("read back: %+v, %v", back.Held, err)
				}
			}
		})
	}
}
