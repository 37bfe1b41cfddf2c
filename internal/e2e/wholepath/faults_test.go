package wholepath_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestFaultsAlongTheWholePath meets the path's faults one after another,
// each while a release is under way, and checks that nothing is promoted
// that should not be and nothing is lost:
//   - a render Flux cannot apply: its dry run fails, nothing of it is
//     written, no migration starts and the first release still serves;
//   - the registry answering 500 when the pin moves: Flux says so and keeps
//     the release it applied; once the registry answers, the release goes on;
//   - the gate's leading pod deleted mid-analysis: the release completes
//     under the next replica, both members promoted together;
//   - source-controller stopped for a minute when the pin moves: nothing
//     moves until it is back, then the release completes.
func TestFaultsAlongTheWholePath(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	art := a.initialized(first)

	// A render the API server refuses.
	broken := second
	broken.broken = true
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
	if _, err := a.e.n.Kube.BatchV1().Jobs(a.ns).Get(ctx, "auth-migration-"+second.tag(), metav1.GetOptions{}); err == nil {
		t.Errorf("the migration of a render Flux refused was written")
	}
	for _, m := range members {
		if got := a.canaryRevision(m.process); got != first.revision {
			t.Errorf("%s's Canary names %s after a refused render", m.process, got)
		}
	}
	a.serving(first.revision, time.Minute)

	// The registry answers 500 when the pin moves to the second release.
	good := a.push(second)
	a.e.flux.RegistryFails.Store(true)
	a.pin(good)
	a.waitFor("source-controller to say the pull failed", 2*time.Minute, func() (bool, string) {
		var repo sourcev1.OCIRepository
		if err := a.e.n.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + a.ns}, &repo); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, "500"), fmt.Sprintf("%+v", ready)
	})
	if k := a.unit(); k.Status.LastAppliedRevision != art.Digest {
		t.Errorf("Flux applied %s while the registry failed", k.Status.LastAppliedRevision)
	}
	a.serving(first.revision, time.Minute)
	a.e.flux.RegistryFails.Store(false)
	a.waitFor("Flux to apply the second release once the registry answers", 4*time.Minute, func() (bool, string) {
		k := a.unit()
		return k.Status.LastAppliedRevision == good.Digest, k.Status.LastAppliedRevision
	})

	// The gate's leading replica is deleted while the release is analysed.
	a.phase("auth-api", flaggerv1.CanaryPhaseProgressing, 4*time.Minute)
	leader := a.gateLeader()
	if err := a.e.n.Kube.CoreV1().Pods("delivery-system").Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the gate's leading pod %s: %v", leader, err)
	}
	for _, m := range members {
		a.phase(m.process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
		if got := a.primaryRelease(m.process); got != second.version {
			t.Errorf("%s's primary runs %s, want %s", m.process, got, second.version)
		}
	}
	a.serving(second.revision, 2*time.Minute)

	// source-controller stops for a minute while the pin moves.
	next := release{version: "4.0.0", revision: "sha256:" + strings.Repeat("4c", 32), testedAgainst: second.revision}
	pushed := a.push(next)
	a.scale(testenv.FluxNamespace, "source-controller", 0)
	a.waitFor("source-controller's pod to be gone", time.Minute, func() (bool, string) {
		pods, err := a.e.n.Kube.CoreV1().Pods(testenv.FluxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=source-controller"})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
	})
	a.pin(pushed)
	stopped := time.Now()
	for time.Since(stopped) < time.Minute {
		if k := a.unit(); k.Status.LastAppliedRevision != good.Digest {
			t.Fatalf("Flux applied %s with source-controller stopped", k.Status.LastAppliedRevision)
		}
		if got := a.canaryRevision("auth-api"); got != second.revision {
			t.Fatalf("auth-api's Canary names %s with source-controller stopped", got)
		}
		time.Sleep(2 * time.Second) // the minute the fault lasts, checked as it passes
	}
	a.scale(testenv.FluxNamespace, "source-controller", 1)
	for _, m := range members {
		a.waitFor("the fourth release to be analysed", 5*time.Minute, func() (bool, string) {
			return a.canaryRevision(m.process) == next.revision, a.canaryRevision(m.process)
		})
		a.phase(m.process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
	}
	a.serving(next.revision, 2*time.Minute)
}

// unit reads the Application's Flux Kustomization.
func (a *app) unit() kustomizev1.Kustomization {
	a.t.Helper()
	var k kustomizev1.Kustomization
	if err := a.e.n.Client.Get(context.Background(), client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + a.ns}, &k); err != nil {
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

// gateLeader is the pod holding the gate's Lease.
func (a *app) gateLeader() string {
	a.t.Helper()
	var leader string
	a.waitFor("a gate replica to lead", time.Minute, func() (bool, string) {
		l, err := a.e.n.Kube.CoordinationV1().Leases("delivery-system").Get(context.Background(), "release-gate", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprint(err)
		}
		pods, err := a.e.n.Kube.CoreV1().Pods("delivery-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=release-gate"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name) {
				leader = p.Name
				return true, ""
			}
		}
		return false, "the holder " + *l.Spec.HolderIdentity + " is no pod"
	})
	return leader
}

// scale sets a Deployment's replicas, as a person stopping a controller
// would.
func (a *app) scale(namespace, name string, replicas int) {
	a.t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := a.e.n.Kube.AppsV1().Deployments(namespace).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		a.t.Fatalf("scale %s/%s: %v", namespace, name, err)
	}
}
