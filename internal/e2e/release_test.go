package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// The two releases every scenario starts from: the first, which Flagger
// initializes, and a second with new images and a migration proven against
// the first.
var (
	first  = release{revision: revisions[0], images: map[string]string{"auth-api": "auth-api:1", "auth-ui": "auth-ui:1"}}
	second = release{revision: revisions[1], testedAgainst: revisions[0], images: map[string]string{"auth-api": "auth-api:2", "auth-ui": "auth-ui:2"}}
	third  = release{revision: revisions[2], testedAgainst: revisions[1], images: map[string]string{"auth-api": "auth-api:3", "auth-ui": "auth-ui:3"}}
)

// initialized applies the first release and waits until Flagger has
// initialized both Canaries and the gate's round recorded it as serving.
func (e *estate) initialized() {
	e.t.Helper()
	e.apply(first.core(e.ns))
	e.apply(first.canaries(e.ns))
	for _, p := range []string{"auth-api", "auth-ui"} {
		e.phase(p, flaggerv1.CanaryPhaseInitialized, 2*time.Minute)
	}
	e.serving(first.revision, time.Minute)
}

// TestAReleaseThroughTheRealFlagger walks the second release of the auth
// Application as Flux applies it and the real Flagger drives it:
//   - Flux's order: the Deployments land a Flagger tick before the Canaries,
//     and Flagger asks may-start at the revision that serves; the gate holds;
//   - may-start holds both Canaries at Waiting until the migration Job, which
//     the gate's round starts under proof, completes;
//   - the barrier: auth-api passes first and waits, unpromoted, until
//     auth-ui's new copy stops failing and passes too;
//   - both promoted, their primaries run the new images, and the record says
//     the new revision serves. No pod of the new templates started before the
//     migration completed.
//
// The release record looks at the same releases through the Project's Flux
// unit, which the test writes as Flux would: each release goes merged,
// progressing and healthy (the one before superseded), or aborted when
// Flagger fails it, and every event it sends is a valid CDEvent.
func TestAReleaseThroughTheRealFlagger(t *testing.T) {
	e := newEstate(t)
	rec := e.startRecord()
	// Flux applied the first render before Flagger initialized its Canaries.
	rec.unit("1.0.0", first.revision, first.revision)
	e.initialized()
	if r := rec.expect("1.0.0", rr.StateHealthy, evDeploying, evDeployed); r.GitRevision != "commit-of-1.0.0" || r.Image != first.revision {
		t.Errorf("the first release's record names %q at %q", r.Image, r.GitRevision)
	}

	// Every pod created from here on is seen, canary copies included.
	started := e.watchPods()
	// Flux applies the Deployments and the suspended Jobs first.
	e.members["auth-ui"].failing.Store(true)
	// The pin moved; the unit has not applied it yet.
	rec.unit("2.0.0", second.revision, first.revision)
	rec.expect("2.0.0", rr.StateMerged, evDeploying, evDeployed)
	rec.expect("1.0.0", rr.StateSuperseded, evDeploying, evDeployed)
	e.apply(second.core(e.ns))
	e.waitFor("Flagger to ask may-start at the serving revision and be held", time.Minute, func() (bool, string) {
		for _, a := range e.answers("may-start", "auth-api") {
			if a.revision == first.revision && a.outcome == "not yet" && strings.Contains(a.reason, "waiting for the render") {
				return true, a.reason
			}
		}
		return false, fmt.Sprintf("%v", e.answers("may-start", "auth-api"))
	})
	if pods := e.podsRunning("auth-api:2"); len(pods) > 0 {
		t.Fatalf("a pod of the new template started while its Canary carried the serving revision: %s", pods[0].Name)
	}
	e.apply(second.canaries(e.ns))
	rec.unit("2.0.0", second.revision, second.revision)
	// Flagger analyses and the gate holds: the release progresses, and
	// stays so until both members are promoted and warmed up.
	rec.expect("2.0.0", rr.StateProgressing, evDeploying, evDeployed, evDeploying)

	// may-start waits for the migration the round starts under proof.
	up := "auth-migration-" + tag(second.revision)
	sawWaiting := false
	e.waitFor("the migration Job to complete", 2*time.Minute, func() (bool, string) {
		// The Canaries first: read after the Job, they could already show
		// a start that rightly followed its completion.
		phases := map[string]flaggerv1.CanaryPhase{}
		for _, p := range []string{"auth-api", "auth-ui"} {
			phases[p] = e.canary(p).Status.Phase
		}
		j := e.job(up)
		if j.Status.CompletionTime != nil {
			return true, ""
		}
		for _, p := range []string{"auth-api", "auth-ui"} {
			phase := phases[p]
			sawWaiting = sawWaiting || phase == flaggerv1.CanaryPhaseWaiting
			if slices.Contains([]flaggerv1.CanaryPhase{flaggerv1.CanaryPhaseProgressing, flaggerv1.CanaryPhaseWaitingPromotion, flaggerv1.CanaryPhasePromoting}, phase) {
				t.Fatalf("%s is %s before the migration completed", p, phase)
			}
		}
		return false, fmt.Sprintf("suspend %v, active %d, succeeded %d", *j.Spec.Suspend, j.Status.Active, j.Status.Succeeded)
	})
	if !sawWaiting {
		t.Log("the migration completed before a Canary was seen Waiting")
	}

	// The barrier: auth-api passes and waits while auth-ui still fails.
	e.phase("auth-api", flaggerv1.CanaryPhaseWaitingPromotion, 2*time.Minute)
	refused := len(e.answers("may-promote", "auth-api"))
	e.waitFor("a Flagger tick with auth-api held at the barrier", time.Minute, func() (bool, string) {
		as := e.answers("may-promote", "auth-api")
		for _, a := range as[refused:] {
			if a.revision == second.revision && a.outcome == "not yet" {
				return true, a.reason
			}
		}
		return false, "no refused may-promote since auth-api waited"
	})
	if c := e.canary("auth-api"); c.Status.Phase != flaggerv1.CanaryPhaseWaitingPromotion {
		t.Fatalf("auth-api went %s while auth-ui had not passed", c.Status.Phase)
	}
	if img := e.deployment("auth-api-primary").Spec.Template.Spec.Containers[0].Image; img != "auth-api:1" {
		t.Fatalf("auth-api's primary runs %s before the barrier opened", img)
	}
	e.members["auth-ui"].failing.Store(false)
	for _, p := range []string{"auth-api", "auth-ui"} {
		e.phase(p, flaggerv1.CanaryPhaseSucceeded, 3*time.Minute)
	}
	for p, img := range second.images {
		if got := e.deployment(p + "-primary").Spec.Template.Spec.Containers[0].Image; got != img {
			t.Errorf("%s's primary runs %s, want %s", p, got, img)
		}
	}
	e.serving(second.revision, time.Minute)
	if r := rec.expect("2.0.0", rr.StateHealthy, evDeploying, evDeployed, evDeploying, evUpgraded); r.PodHash == "" || r.HealthyAt.IsZero() {
		t.Errorf("the healthy record names pods %q, healthy at %q", r.PodHash, r.HealthyAt)
	}

	// No pod of the new templates started before the migration completed.
	done := e.job(up).Status.CompletionTime.Time
	for _, img := range []string{"auth-api:2", "auth-ui:2"} {
		first, ok := started.first(img)
		if !ok {
			t.Errorf("no pod of %s was seen created", img)
		} else if first.Before(done) {
			t.Errorf("a pod of %s was created at %s, before the migration completed at %s", img, first, done)
		}
	}

	// The third release: a pod of auth-api's new copy restarts three times.
	// /rollback says yes and Flagger fails the Canary on that tick.
	e.apply(third.core(e.ns))
	e.apply(third.canaries(e.ns))
	rec.unit("3.0.0", third.revision, third.revision)
	e.phase("auth-api", flaggerv1.CanaryPhaseProgressing, 3*time.Minute)
	e.restart("auth-api:3", 3)
	e.phase("auth-api", flaggerv1.CanaryPhaseFailed, time.Minute)
	if !e.said("rollback", "auth-api", third.revision, "yes", "restarted 3 times") {
		t.Errorf("auth-api failed but not on the gate's rollback: %v", e.answers("rollback", "auth-api"))
	}
	if got := e.deployment("auth-api-primary").Spec.Template.Spec.Containers[0].Image; got != "auth-api:2" {
		t.Errorf("auth-api's primary runs %s after the failed release, want auth-api:2", got)
	}
	all := []string{evDeploying, evDeployed, evDeploying, evUpgraded, evDeploying, evFailed}
	if r := rec.expect("3.0.0", rr.StateAborted, all...); r.LastError == "" {
		t.Errorf("the aborted record keeps no error")
	}
	rec.expect("2.0.0", rr.StateSuperseded, all...)

	// A render whose Canaries name another Application: Flagger asks about
	// that Application, whose inputs are not there, so the gate cannot
	// answer (503) and nothing of the render starts.
	fourth := release{revision: revisions[0], images: map[string]string{"auth-api": "auth-api:2", "auth-ui": "auth-ui:4"}}
	e.apply(fourth.core(e.ns))
	e.apply(strings.ReplaceAll(fourth.canaries(e.ns), "application: auth,", "application: billing,"))
	e.waitFor("the gate to refuse a Canary of another Application", time.Minute, func() (bool, string) {
		return e.said("may-start", "auth-ui", fourth.revision, "cannot answer", "billing-release-gate: not found"),
			fmt.Sprintf("%v", e.answers("may-start", "auth-ui"))
	})
	if got := e.deployment("auth-ui-primary").Spec.Template.Spec.Containers[0].Image; got != "auth-ui:2" {
		t.Errorf("auth-ui's primary runs %s for a Canary of another Application, want auth-ui:2", got)
	}
	if pods := e.podsRunning("auth-ui:4"); len(pods) > 0 {
		t.Errorf("a pod of a Canary of another Application started: %s", pods[0].Name)
	}
}
