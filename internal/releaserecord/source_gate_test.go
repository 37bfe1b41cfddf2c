package releaserecord_test

import (
	"context"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gaterelease "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

var (
	revA = "sha256:" + strings.Repeat("a", 64)
	revB = "sha256:" + strings.Repeat("b", 64)
)

// carrying is a member of the Application docs whose Canary carries rev,
// in phase since changed.
func carrying(name, rev string, phase flaggerv1.CanaryPhase, changed time.Time) releasepath.Member {
	m := member(name, phase, false)
	m.State.Canary.Webhooks = []map[string]string{{"application": "docs", "revision": rev}, {"other": "hook"}}
	m.ChangedAt = changed
	return m
}

func pinned(rev string, since time.Time) *gaterelease.Record {
	return &gaterelease.Record{Namespace: "docs", Application: "docs", Serving: revB, Pinned: rev, Since: &since}
}

// TestHeldOf holds the gate's word as the record and the Canaries say it,
// and to the gate's own rule for a failure of the release it pinned.
func TestHeldOf(t *testing.T) {
	since := t0.Add(500 * time.Millisecond)
	for _, tc := range []struct {
		name    string
		rec     *gaterelease.Record
		members []releasepath.Member
		want    string
	}{
		{name: "no record: nothing pinned, not held", members: []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseFailed, t0)}},
		{name: "a record pinning nothing: what is applied serves", rec: &gaterelease.Record{Serving: revA},
			members: []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseFailed, t0)}},
		{name: "pinned and analysing: not held", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseProgressing, t0.Add(time.Minute))}},
		{name: "pinned and a member failed after: analysis-failed", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseSucceeded, t0), carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))},
			want:    "analysis-failed"},
		{name: "a failure within the second the gate first saw it is this release's", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0)}, want: "analysis-failed"},
		{name: "a failure from before it was seen is the release before's", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(-time.Second))}},
		{name: "a failed Canary carrying another revision is not this release's", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("ui", revB, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rr.HeldOf(tc.rec, tc.members); got != tc.want {
				t.Errorf("HeldOf = %q, want %q", got, tc.want)
			}
			// The gate's own rule, over what it reads, says the same.
			if tc.rec != nil && tc.rec.Pinned != "" {
				views := make([]releasegate.MemberView, len(tc.members))
				for i, m := range tc.members {
					views[i] = releasegate.MemberView{MemberState: m.State, Transitioned: m.ChangedAt}
				}
				if failed, _ := releasegate.FailedSince(views, tc.rec.Pinned, *tc.rec.Since); failed != (tc.want == releasegate.HeldAnalysisFailed) {
					t.Errorf("the gate's FailedSince says %v", failed)
				}
			}
		})
	}
	if rr.HeldAnalysisFailed != releasegate.HeldAnalysisFailed {
		t.Errorf("the reason %q is not the gate's %q", rr.HeldAnalysisFailed, releasegate.HeldAnalysisFailed)
	}
}

// TestHeldOfRecorded: a gate that records its hold is taken at its word,
// every one of its reasons, for the release it pinned alone.
func TestHeldOfRecorded(t *testing.T) {
	since := t0.Add(500 * time.Millisecond)
	holding := func(rev, reason string) *gaterelease.Record {
		r := pinned(rev, since)
		r.Held = &gaterelease.HeldRecord{Reason: reason, Cause: "what holds it", Since: since}
		return r
	}
	analysing := []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseProgressing, t0), carrying("ui", revA, flaggerv1.CanaryPhaseSucceeded, t0)}
	for _, tc := range []struct {
		name    string
		rec     *gaterelease.Record
		members []releasepath.Member
		want    string
	}{
		{name: "stale-proof, which no Canary shows", rec: holding(revA, releasegate.HeldStaleProof), members: analysing, want: "stale-proof"},
		{name: "migration-failed, which no Canary shows", rec: holding(revA, releasegate.HeldMigrationFailed), members: analysing, want: "migration-failed"},
		{name: "analysis-failed", rec: holding(revA, releasegate.HeldAnalysisFailed),
			members: []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))}, want: "analysis-failed"},
		{name: "the recorded word over the inference: a failed member, held for its migration", rec: holding(revA, releasegate.HeldMigrationFailed),
			members: []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))}, want: "migration-failed"},
		{name: "Canaries carrying another revision: the release before's hold", rec: holding(revA, releasegate.HeldStaleProof),
			members: []releasepath.Member{carrying("api", revB, flaggerv1.CanaryPhaseProgressing, t0)}},
		{name: "Canaries disagreeing: a render being applied, no word", rec: holding(revA, releasegate.HeldStaleProof),
			members: []releasepath.Member{carrying("api", revA, flaggerv1.CanaryPhaseProgressing, t0), carrying("ui", revB, flaggerv1.CanaryPhaseProgressing, t0)}},
		{name: "no member", rec: holding(revA, releasegate.HeldStaleProof)},
		{name: "an older gate's record, no hold: inferred as before", rec: pinned(revA, since),
			members: []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))}, want: "analysis-failed"},
		{name: "an older gate's record, no hold, nothing failed: not held", rec: pinned(revA, since), members: analysing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rr.HeldOf(tc.rec, tc.members); got != tc.want {
				t.Errorf("HeldOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestApplicationOf(t *testing.T) {
	noCanary := carrying("ui", revA, flaggerv1.CanaryPhaseProgressing, t0)
	noCanary.State.HasCanary = false
	otherNS := carrying("ui", revA, flaggerv1.CanaryPhaseProgressing, t0)
	otherNS.Namespace = "elsewhere"
	ungated := member("ui", flaggerv1.CanaryPhaseProgressing, false)
	for _, tc := range []struct {
		name    string
		members []releasepath.Member
		ok      bool
	}{
		{name: "every Canary carries docs in docs", members: []releasepath.Member{carrying("api", revA, "", t0), carrying("ui", revB, "", t0)}, ok: true},
		{name: "no member"},
		{name: "a member without its Canary", members: []releasepath.Member{carrying("api", revA, "", t0), noCanary}},
		{name: "Canaries in two namespaces", members: []releasepath.Member{carrying("api", revA, "", t0), otherNS}},
		{name: "a Canary the gate does not ask for", members: []releasepath.Member{ungated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, ok := rr.ApplicationOf(tc.members)
			if ok != tc.ok || (ok && app != rr.Application{Namespace: "docs", Name: "docs"}) {
				t.Errorf("ApplicationOf = %+v, %v; want ok %v", app, ok, tc.ok)
			}
		})
	}
}

// TestFluxFactsSayTheGatesWord: the gate's word comes after the phase it
// speaks beside, only once the release has one, and the release names the
// unit and its Canaries as what it moved.
func TestFluxFactsSayTheGatesWord(t *testing.T) {
	reason := "analysis-failed"
	u := view(member("api", flaggerv1.CanaryPhaseProgressing, false))
	u.Namespace = "flux-system"
	u.Unit.Canaries = []types.NamespacedName{{Namespace: "docs", Name: "ui"}, {Namespace: "docs", Name: "api"}}
	u.Held = &reason
	facts, err := rr.FluxFacts(u, "prod-eu", "prod")
	if err != nil {
		t.Fatal(err)
	}
	var phases []rr.Phase
	for _, f := range facts {
		phases = append(phases, f.Phase)
	}
	if len(facts) != 3 || facts[1].Phase != rr.PhaseProgressing || facts[2].Phase != rr.PhaseHeld || facts[2].Held != reason {
		t.Fatalf("facts %v", phases)
	}
	if want := "Canary/docs/api,Canary/docs/ui,Kustomization/flux-system/project-docs"; facts[0].Release.Objects != want {
		t.Errorf("objects %q, want %q", facts[0].Release.Objects, want)
	}
	unpinned := u
	unpinned.Source.Pin = pin0
	if facts, _ := rr.FluxFacts(unpinned, "prod-eu", "prod"); len(facts) != 1 {
		t.Errorf("a release its source does not pin yet has the gate's word: %+v", facts)
	}
}

// TestGateRecordsUnderTheGrant reads the gate's records with the release
// record's own grant, in the namespace both keep their records in.
func TestGateRecordsUnderTheGrant(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, rbacFile, serviceAccount)
	ctx := context.Background()
	gate, err := rr.NewGateRecords(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	failedAfter := []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseFailed, t0.Add(time.Minute))}
	if reason, known, err := gate.Held(ctx, failedAfter); err != nil || !known || reason != "" {
		t.Fatalf("no record: %q %v %v", reason, known, err)
	}
	write := func(data map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gaterelease.RecordConfigMap("docs", "docs")}, Data: data}
		if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(gaterelease.EncodeRecord(*pinned(revA, t0)))
	if reason, known, err := gate.Held(ctx, failedAfter); err != nil || !known || reason != "analysis-failed" {
		t.Fatalf("pinned, failed after: %q %v %v", reason, known, err)
	}
	// A gate that records its hold is read at its word, a reason no Canary
	// shows included.
	recorded := *pinned(revA, t0)
	recorded.Held = &gaterelease.HeldRecord{Reason: "stale-proof", Cause: "the migration of an earlier release was left applied", Since: t0}
	write(gaterelease.EncodeRecord(recorded))
	analysing := []releasepath.Member{carrying("ui", revA, flaggerv1.CanaryPhaseProgressing, t0.Add(time.Minute))}
	if reason, known, err := gate.Held(ctx, analysing); err != nil || !known || reason != "stale-proof" {
		t.Fatalf("a recorded hold: %q %v %v", reason, known, err)
	}
	write(map[string]string{gaterelease.RecordKey: `{"namespace":"docs","application":"other"}`})
	if reason, known, err := gate.Held(ctx, failedAfter); err != nil || known {
		t.Fatalf("a record the gate cannot answer from: %q %v %v", reason, known, err)
	}
	if _, known, err := gate.Held(ctx, []releasepath.Member{member("ui", flaggerv1.CanaryPhaseFailed, false)}); err != nil || known {
		t.Fatalf("Canaries naming no Application: %v %v", known, err)
	}
}
