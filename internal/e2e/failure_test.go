package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// TestACopyThatFailsItsTrafficIsNeverPromoted: auth-api's new copy answers
// 503. The gate's own traffic fails its checks, Flagger fails it at its
// threshold and keeps the old template on the primary; auth-ui, which
// passed, is rolled back rather than promoted; the gate's round holds the
// release as analysis-failed and, the Down rules holding, undoes the
// migration.
func TestACopyThatFailsItsTrafficIsNeverPromoted(t *testing.T) {
	e := newEstate(t)
	e.initialized()
	e.members["auth-api"].failing.Store(true)
	e.apply(second.core(e.ns))
	e.apply(second.canaries(e.ns))

	e.phase("auth-api", flaggerv1.CanaryPhaseFailed, 4*time.Minute)
	if !e.said("checks", "auth-api", second.revision, "not yet", "own traffic") {
		t.Errorf("auth-api failed without the gate's own traffic failing its checks: %v", e.answers("checks", "auth-api"))
	}
	e.phase("auth-ui", flaggerv1.CanaryPhaseFailed, 2*time.Minute)
	if !e.said("rollback", "auth-ui", second.revision, "yes", "auth-api failed its analysis") {
		t.Errorf("auth-ui failed but not on the gate's rollback: %v", e.answers("rollback", "auth-ui"))
	}
	for p, img := range first.images {
		if got := e.deployment(p + "-primary").Spec.Template.Spec.Containers[0].Image; got != img {
			t.Errorf("%s's primary runs %s after the failed release, want %s", p, got, img)
		}
	}

	down := "auth-migration-down-" + tag(second.revision)
	e.waitFor("the gate to undo the migration", 2*time.Minute, func() (bool, string) {
		j := e.job(down)
		return j.Status.CompletionTime != nil, fmt.Sprintf("suspend %v, succeeded %d", *j.Spec.Suspend, j.Status.Succeeded)
	})
	if r, _ := e.record(); r.Serving != first.revision || r.Pinned != second.revision {
		t.Errorf("the record after the failed release: %+v, want %s serving and %s held", r, tag(first.revision), tag(second.revision))
	}
	if !strings.Contains(e.gate.logs.String(), `"reason":"analysis-failed"`) {
		t.Errorf("the gate's round did not hold the release as analysis-failed:\n%s", e.gate.tail())
	}
}

// TestAGateStoppedMidAnalysisHoldsTheRelease: with the gate gone in the
// middle of an analysis, Flagger's webhooks get no answer and nothing is
// promoted; the gate back, the release completes.
func TestAGateStoppedMidAnalysisHoldsTheRelease(t *testing.T) {
	e := newEstate(t)
	e.initialized()
	e.apply(second.core(e.ns))
	e.apply(second.canaries(e.ns))
	e.phase("auth-api", flaggerv1.CanaryPhaseProgressing, 3*time.Minute)
	e.gate.stop()

	// Two analysis intervals with no gate: no promotion, primaries unchanged.
	gone := time.Now()
	e.waitFor("two Flagger ticks without the gate", time.Minute, func() (bool, string) {
		for _, p := range []string{"auth-api", "auth-ui"} {
			phase := e.canary(p).Status.Phase
			if slices.Contains([]flaggerv1.CanaryPhase{flaggerv1.CanaryPhasePromoting, flaggerv1.CanaryPhaseFinalising, flaggerv1.CanaryPhaseSucceeded}, phase) {
				t.Fatalf("%s went %s with no gate to answer", p, phase)
			}
		}
		return time.Since(gone) > 25*time.Second, "waiting"
	})
	for p, img := range first.images {
		if got := e.deployment(p + "-primary").Spec.Template.Spec.Containers[0].Image; got != img {
			t.Fatalf("%s's primary runs %s with no gate, want %s", p, got, img)
		}
	}

	e.gate = e.startGate()
	for _, p := range []string{"auth-api", "auth-ui"} {
		e.phase(p, flaggerv1.CanaryPhaseSucceeded, 4*time.Minute)
	}
	e.serving(second.revision, time.Minute)
}

// said reports whether the gate answered webhook for process at revision
// with outcome and a reason containing reason.
func (e *estate) said(webhook, process, revision, outcome, reason string) bool {
	for _, a := range e.answers(webhook, process) {
		if a.revision == revision && a.outcome == outcome && strings.Contains(a.reason, reason) {
			return true
		}
	}
	return false
}
