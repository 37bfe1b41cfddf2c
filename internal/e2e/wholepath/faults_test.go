package wholepath_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/estate"
)

// TestFaultsAlongTheWholePath meets the path's faults one after another,
// each while a release is under way, and checks that nothing is promoted
// that should not be and nothing is lost:
//   - a render Flux cannot apply: its dry run fails, nothing of it is
//     written, no migration starts and the first release still serves;
//   - the registry answering 500 when the pin moves: Flux says so and keeps
//     the release it applied; once the registry answers, the release goes on;
//   - the gate's leading pod killed (SIGKILL, no grace) the moment its round
//     started the migration: the release completes under the next leader,
//     both estate.Members promoted together, the migration run once;
//   - source-controller stopped for a minute when the pin moves: nothing
//     moves until it is back, then the release completes;
//   - a pod of a new copy restarting three times: the gate's rollback says
//     yes, Flagger fails it, its sibling is rolled back with it and both
//     primaries keep the release before.
func TestFaultsAlongTheWholePath(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	ctx := context.Background()
	art := a.initialized(first)

	// A render the API server refuses.
	broken := second
	broken.Broken = true
	bad := a.release(broken)
	a.waitFor("Flux to refuse the broken render", 2*time.Minute, func() (bool, string) {
		k := a.unit()
		ready := apimeta.FindStatusCondition(k.Status.Conditions, meta.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionFalse && k.Status.LastAttemptedRevision == bad.Digest,
			fmt.Sprintf("%+v", ready)
	})
	if k := a.unit(); k.Status.LastAppliedRevision != art.Digest {
		t.Errorf("Flux applied %s of a render it refused", k.Status.LastAppliedRevision)
	}
	// The Reporter and the release record say the apply failed.
	a.expectStatus(second.Version, "failure", "Flux could not apply")
	a.expectRecord(second.Version, rr.StateSyncFailed, "")
	if _, err := a.e.Node.Kube.BatchV1().Jobs(a.ns).Get(ctx, "auth-migration-"+second.Tag(), metav1.GetOptions{}); err == nil {
		t.Errorf("the migration of a render Flux refused was written")
	}
	for _, m := range estate.Members {
		if got := a.canaryRevision(m.Process); got != first.Revision {
			t.Errorf("%s's Canary names %s after a refused render", m.Process, got)
		}
	}
	a.serving(first.Revision, time.Minute)

	// The registry answers 500 to this Project's pulls when the pin moves
	// to the second release.
	good := a.push(second)
	a.e.Flux.FailRepository(good.Repository)
	a.pin(good)
	a.waitFor("source-controller to say the pull failed", 2*time.Minute, func() (bool, string) {
		var repo sourcev1.OCIRepository
		if err := a.e.Node.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + a.ns}, &repo); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, "500"), fmt.Sprintf("%+v", ready)
	})
	if k := a.unit(); k.Status.LastAppliedRevision != art.Digest {
		t.Errorf("Flux applied %s while the registry failed", k.Status.LastAppliedRevision)
	}
	a.expectStatus(second.Version, "failure", "Flux could not apply")
	a.serving(first.Revision, time.Minute)
	a.e.Flux.Heal()
	a.waitFor("Flux to apply the second release once the registry answers", 4*time.Minute, func() (bool, string) {
		k := a.unit()
		return k.Status.LastAppliedRevision == good.Digest, k.Status.LastAppliedRevision
	})

	// The gate's leading replica is killed the moment its round started
	// the migration.
	up := "auth-migration-" + second.Tag()
	a.waitFor("the leader's round to start the migration", 3*time.Minute, func() (bool, string) {
		j, err := a.e.Node.Kube.BatchV1().Jobs(a.ns).Get(ctx, up, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Spec.Suspend != nil && !*j.Spec.Suspend, "still suspended"
	})
	leader := a.gateLeader()
	now := int64(0)
	if err := a.e.Node.Kube.CoreV1().Pods(gateNS).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: &now}); err != nil {
		t.Fatalf("kill the gate's leading pod %s: %v", leader, err)
	}
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
		if got := a.primaryRelease(m.Process); got != second.Version {
			t.Errorf("%s's primary runs %s, want %s", m.Process, got, second.Version)
		}
	}
	a.serving(second.Revision, 2*time.Minute)
	a.expectStatus(second.Version, "success", "promoted and warmed up")
	if n := a.jobPods(up); n != 1 {
		t.Errorf("the migration ran %d times across the leader's death, want once", n)
	}

	// source-controller stops for a minute while the pin moves.
	next := estate.Release{Version: "4.0.0", Revision: "sha256:" + strings.Repeat("4c", 32), TestedAgainst: second.Revision}
	pushed := a.push(next)
	a.scale(testenv.FluxNamespace, "source-controller", 0)
	a.pin(pushed)
	stopped := time.Now()
	for time.Since(stopped) < time.Minute {
		if k := a.unit(); k.Status.LastAppliedRevision != good.Digest {
			t.Fatalf("Flux applied %s with source-controller stopped", k.Status.LastAppliedRevision)
		}
		if got := a.canaryRevision("auth-api"); got != second.Revision {
			t.Fatalf("auth-api's Canary names %s with source-controller stopped", got)
		}
		time.Sleep(2 * time.Second) // the minute the fault lasts, checked as it passes
	}
	a.scale(testenv.FluxNamespace, "source-controller", 1)
	for _, m := range estate.Members {
		a.waitFor("the fourth release to be analysed", 5*time.Minute, func() (bool, string) {
			return a.canaryRevision(m.Process) == next.Revision, a.canaryRevision(m.Process)
		})
		a.phase(m.Process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
	}
	a.serving(next.Revision, 2*time.Minute)

	// auth-api's new copy crashes on its first three starts.
	crash := estate.Release{Version: "5.0.0", Revision: "sha256:" + strings.Repeat("5d", 32), TestedAgainst: next.Revision,
		Crashing: map[string]int{"auth-api": 3}}
	a.release(crash)
	a.phase("auth-api", flaggerv1.CanaryPhaseFailed, 6*time.Minute)
	if !a.saidAt("rollback", "auth-api", "yes", crash.Tag()) {
		t.Errorf("auth-api failed, but not on the gate's rollback: %v", a.answers("rollback", "auth-api"))
	}
	a.phase("auth-ui", flaggerv1.CanaryPhaseFailed, 3*time.Minute)
	a.primariesRun(next.Version, "after a crashing release")
}

// TestAGateGoneMidAnalysisHoldsTheRelease scales the gate to nothing while
// a release is analysed: Flagger's questions get no answer for two of its
// ticks and nothing is promoted; the gate back, the release completes. It
// runs alone, before the tests that run side by side, as every
// Application on the node loses its gate meanwhile.
func TestAGateGoneMidAnalysisHoldsTheRelease(t *testing.T) {
	a := newApp(t)
	a.initialized(first)
	// Each tick without an answer is a failed check: the threshold lets the
	// gate be gone for three.
	unanswered := second
	unanswered.Threshold = 6
	a.release(unanswered)
	a.phase("auth-api", flaggerv1.CanaryPhaseProgressing, 5*time.Minute)
	a.scale(gateNS, "release-gate", 0)
	gone := time.Now()
	a.waitFor("two Flagger ticks without the gate", time.Minute, func() (bool, string) {
		for _, m := range estate.Members {
			if p := a.canary(m.Process).Status.Phase; slices.Contains([]flaggerv1.CanaryPhase{flaggerv1.CanaryPhasePromoting, flaggerv1.CanaryPhaseFinalising, flaggerv1.CanaryPhaseSucceeded}, p) {
				t.Fatalf("%s went %s with no gate to answer", m.Process, p)
			}
		}
		return time.Since(gone) > 25*time.Second, "waiting"
	})
	for _, m := range estate.Members {
		if got := a.primaryRelease(m.Process); got != first.Version {
			t.Fatalf("%s's primary runs %s with no gate, want %s", m.Process, got, first.Version)
		}
	}
	a.scale(gateNS, "release-gate", 2)
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
	}
	a.serving(second.Revision, 2*time.Minute)
}

// unit reads the Application's Flux Kustomization.
func (a *app) unit() kustomizev1.Kustomization {
	a.t.Helper()
	var k kustomizev1.Kustomization
	if err := a.e.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + a.ns}, &k); err != nil {
		a.t.Fatalf("read the Kustomization: %v", err)
	}
	return k
}

// canaryRevision is the revision a member's Canary's webhooks carry.
func (a *app) canaryRevision(process string) string {
	c := a.canary(process)
	if c.Spec.Analysis == nil || len(c.Spec.Analysis.Webhooks) == 0 || c.Spec.Analysis.Webhooks[0].Metadata == nil {
		return ""
	}
	return (*c.Spec.Analysis.Webhooks[0].Metadata)["revision"]
}
