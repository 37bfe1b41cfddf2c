package releasehistory_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// in is rec in another place.
func in(t *testing.T, r rr.Record, app, cluster, env string) rr.Record {
	t.Helper()
	id, err := rr.ParseReleaseID(r.ReleaseID)
	if err != nil {
		t.Fatal(err)
	}
	moved, err := rr.NewReleaseID(app, id.Version(), cluster, env)
	if err != nil {
		t.Fatal(err)
	}
	r.ReleaseID, r.App, r.Cluster, r.Env = moved.String(), app, cluster, env
	return r
}

// cellLine writes a cell as "serving|in flight (why)" for a table's want.
func cellLine(c rh.Cell) string {
	out := "-"
	if c.Serving != nil {
		out = c.Serving.Version + " " + string(c.Serving.State)
	}
	if c.InFlight != nil {
		out += " → " + c.InFlight.Version + " " + string(c.InFlight.State)
		if c.InFlight.Held != "" {
			out += " held: " + c.InFlight.Held
		}
		if c.InFlight.Why != "" {
			out += " (" + c.InFlight.Why + ")"
		}
	}
	return out
}

func TestMatrixOf(t *testing.T) {
	failed := rec(t, "5", rr.StateSyncFailed, ago(20*time.Minute), ago(15*time.Minute))
	failed.LastError = "kustomize build failed"
	heldBack := rec(t, "5", rr.StateAborted, ago(20*time.Minute), ago(15*time.Minute))
	heldBack.Held, heldBack.LastError = "analysis-failed", "ui rolled back: canary analysis failed"
	servesHeldBefore := healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))
	servesHeldBefore.Held = "stale-proof"
	// The gate's other reasons, which it records for the release record to
	// read, show as its first does.
	staleProof := rec(t, "5", rr.StateProgressing, ago(20*time.Minute), ago(15*time.Minute))
	staleProof.Held = "stale-proof"
	migrationFailed := rec(t, "5", rr.StateProgressing, ago(20*time.Minute), ago(15*time.Minute))
	migrationFailed.Held = "migration-failed"
	for _, tc := range []struct {
		name string
		recs []rr.Record // newest first
		want string
	}{
		{"nothing recorded", nil, ""},
		{"the healthy one serves", []rr.Record{healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour)),
			healthy(rec(t, "2", rr.StateSuperseded, ago(3*time.Hour), ago(2*time.Hour)), ago(150*time.Minute))}, "docs: 3 healthy"},
		{"a newer one progressing beside it", []rr.Record{rec(t, "4", rr.StateProgressing, ago(10*time.Minute), ago(5*time.Minute)),
			healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))}, "docs: 3 healthy → 4 progressing"},
		{"a newer one failed, with its reason", []rr.Record{failed,
			healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))}, "docs: 3 healthy → 5 sync-failed (kustomize build failed)"},
		{"a newer one the gate holds, with the gate's reason and its failure", []rr.Record{heldBack,
			healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))},
			"docs: 3 healthy → 5 aborted held: analysis-failed (ui rolled back: canary analysis failed)"},
		{"a release that serves is held by no gate", []rr.Record{servesHeldBefore}, "docs: 3 healthy"},
		{"held for a stale proof", []rr.Record{staleProof, healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))},
			"docs: 3 healthy → 5 progressing held: stale-proof"},
		{"held for a failed migration", []rr.Record{migrationFailed, healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))},
			"docs: 3 healthy → 5 progressing held: migration-failed"},
		{"an older pending one is overtaken by a newer superseded one", []rr.Record{
			rec(t, "6", rr.StateClosed, ago(5*time.Minute), ago(time.Minute)), rec(t, "5", rr.StateMerged, ago(10*time.Minute), ago(10*time.Minute)),
			healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour))}, "docs: 3 healthy"},
		{"degraded after healthy still serves (drift)", []rr.Record{healthy(rec(t, "3", rr.StateDegraded, ago(2*time.Hour), ago(time.Minute)), ago(time.Hour))},
			"docs: 3 degraded"},
		{"degraded before healthy never served", []rr.Record{rec(t, "3", rr.StateDegraded, ago(2*time.Hour), ago(time.Minute))}, "docs: - → 3 degraded"},
		{"a first release on its way, nothing serves", []rr.Record{rec(t, "1", rr.StateMerged, ago(time.Minute), ago(time.Minute))}, "docs: - → 1 merged"},
		{"places are columns, apps rows, each sorted", []rr.Record{
			in(t, healthy(rec(t, "7", rr.StateHealthy, ago(time.Hour), ago(time.Hour)), ago(time.Hour)), "shop", "prod-us", "prod"),
			healthy(rec(t, "3", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)), ago(time.Hour)),
			in(t, rec(t, "2", rr.StateAborted, ago(3*time.Hour), ago(time.Hour)), "docs", "prod-eu", "staging")},
			"docs: 3 healthy; - → 2 aborted; -|shop: -; -; 7 healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := rh.MatrixOf(tc.recs)
			var rows []string
			for _, a := range m.Apps {
				var cells []string
				for _, c := range a.Cells {
					cells = append(cells, cellLine(c))
				}
				rows = append(rows, a.App+": "+strings.Join(cells, "; "))
			}
			if got := strings.Join(rows, "|"); got != tc.want {
				t.Fatalf("got %q, want %q (places %v)", got, tc.want, m.Places)
			}
		})
	}
}

func TestRollbackTargets(t *testing.T) {
	var recs []rr.Record
	for v := 6; v >= 1; v-- {
		r := healthy(rec(t, fmt.Sprint(v), rr.StateSuperseded, ago(time.Duration(10-v)*time.Hour), ago(time.Duration(9-v)*time.Hour)), ago(time.Duration(10-v)*time.Hour))
		recs = append(recs, r)
	}
	recs = append(recs, rec(t, "0", rr.StateAborted, ago(20*time.Hour), ago(19*time.Hour)))
	targets := rh.RollbackTargets(recs, 5)[rh.KeyOf(recs[0])]
	for _, tc := range []struct {
		image, via string
	}{
		{"ghcr.io/acme/docs:6", "docs@6:prod-eu/prod"},
		{"ghcr.io/acme/docs:2", "docs@2:prod-eu/prod"},
		{"ghcr.io/acme/docs:1", ""}, // outside the newest five
		{"ghcr.io/acme/docs:0", ""}, // never healthy
	} {
		if got := targets[tc.image]; got != tc.via {
			t.Errorf("%s: %q, want %q", tc.image, got, tc.via)
		}
		// The page says what the read API answers.
		e := rh.RollbackEligible(recs, rh.KeyOf(recs[0]), tc.image, 5)
		if e.Eligible != (tc.via != "") || e.ReleaseID != tc.via {
			t.Errorf("%s: the read API answers %+v", tc.image, e)
		}
	}
	if len(rh.RollbackTargets(recs, 0)[rh.KeyOf(recs[0])]) != 0 {
		t.Fatal("a window of none keeps a target")
	}
}
