package wholepath_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/oci"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-containerregistry/pkg/crane"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/estate"
)

// TestFluxRefusesAReleaseSignedByAnotherKeyOrAltered points source-
// controller at the estate's release as an attacker would hand it one.
//   - Verified against another key's public half: refused, no artifact,
//     SourceVerified false, Ready false for VerificationError.
//   - Altered after signing (the gate's image swapped), pushed under the
//     release's own tag, the release's signature copied to where cosign
//     looks for the altered artifact's. The estate's OCIRepository, pinned
//     to the release's digest as docs/install.md says, keeps the release.
//     One that follows the tag takes the altered artifact: source-
//     controller v1.9.3 verifies with cosign's library without its claim
//     check, so a signature is not bound to the digest it names. That is
//     why the install pins the digest; the day Flux checks the claim, this
//     assertion fails and the docs can say so.
func TestFluxRefusesAReleaseSignedByAnotherKeyOrAltered(t *testing.T) {
	t.Parallel()
	e := theEstate(t)
	ctx := context.Background()
	released := e.Release.Manifests.Ref.DigestStr()

	other, err := estate.NewReleaseKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Node.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: another-key, namespace: %[1]s}
stringData:
  cosign.pub: %[2]q
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: delivery-another-key, namespace: %[1]s}
spec:
  interval: 10m
  url: %[3]s
  insecure: true
  ref: {digest: %[4]s}
  verify: {provider: cosign, secretRef: {name: another-key}}
`, testenv.FluxNamespace, string(other.Public), e.ManifestsURL(), released))); err != nil {
		t.Fatal(err)
	}
	// source-controller marks SourceVerified false as it finds no valid
	// signature, and Ready false only as the reconcile ends: wait for both.
	refused := waitSource(t, e, "delivery-another-key", func(r *sourcev1.OCIRepository) bool {
		return apimeta.IsStatusConditionFalse(r.Status.Conditions, sourcev1.SourceVerifiedCondition) &&
			apimeta.IsStatusConditionFalse(r.Status.Conditions, meta.ReadyCondition)
	})
	ready := apimeta.FindStatusCondition(refused.Status.Conditions, meta.ReadyCondition)
	if refused.Status.Artifact != nil || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != sourcev1.VerificationError {
		t.Errorf("another key: artifact %v, Ready %+v; want no artifact and Ready false for %s", refused.Status.Artifact, ready, sourcev1.VerificationError)
	}

	altered := alter(t, e)
	if _, err := e.Node.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: delivery-by-tag, namespace: %[1]s}
spec:
  interval: 10m
  url: %[2]s
  insecure: true
  ref: {tag: %[3]s}
  verify: {provider: cosign, secretRef: {name: delivery-release-key}}
`, testenv.FluxNamespace, e.ManifestsURL(), e.Release.Version))); err != nil {
		t.Fatal(err)
	}
	byTag := waitSource(t, e, "delivery-by-tag", func(r *sourcev1.OCIRepository) bool {
		return r.Status.Artifact != nil || apimeta.IsStatusConditionFalse(r.Status.Conditions, sourcev1.SourceVerifiedCondition)
	})
	if byTag.Status.Artifact == nil || !strings.HasSuffix(byTag.Status.Artifact.Revision, altered) {
		t.Errorf("an OCIRepository following the tag refused the altered artifact (%+v): source-controller now binds a signature "+
			"to its digest; say so in docs/install.md", byTag.Status.Conditions)
	} else {
		t.Logf("an OCIRepository following the tag took the altered artifact %s with the release's copied signature", altered)
	}

	// The estate's own source, pinned to the release's digest, looks again
	// and keeps the release.
	asked := time.Now().Format(time.RFC3339Nano)
	var own sourcev1.OCIRepository
	if err := e.Node.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "delivery"}, &own); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(own.DeepCopy())
	own.Annotations = map[string]string{meta.ReconcileRequestAnnotation: asked}
	if err := e.Node.Client.Patch(ctx, &own, patch); err != nil {
		t.Fatal(err)
	}
	// (The upgrade beside this test may have moved its pin to the next
	// release meanwhile: the source holds whichever release it is pinned
	// to, never the altered artifact.)
	looked := waitSource(t, e, "delivery", func(r *sourcev1.OCIRepository) bool { return r.Status.LastHandledReconcileAt == asked })
	pinned := looked.Spec.Reference.Digest
	if looked.Status.Artifact == nil || !strings.HasSuffix(looked.Status.Artifact.Revision, pinned) || strings.HasSuffix(looked.Status.Artifact.Revision, altered) ||
		!apimeta.IsStatusConditionTrue(looked.Status.Conditions, sourcev1.SourceVerifiedCondition) {
		t.Errorf("the estate's pinned source after the tag moved: artifact %+v, conditions %+v; want its pin %s, verified",
			looked.Status.Artifact, looked.Status.Conditions, pinned)
	}
}

// alter pulls the estate's release's manifests, swaps the gate's image
// for one no release built, pushes the result under the release's own tag
// and copies the release's signature to the tag cosign reads for the new
// digest: what an attacker who can write to the registry can do without
// the key. It returns the altered artifact's digest.
func alter(t *testing.T, e *estate.Estate) string {
	t.Helper()
	ctx := context.Background()
	repo := strings.TrimPrefix(e.ManifestsURL(), "oci://")
	client := oci.NewClient([]crane.Option{crane.Insecure, crane.WithContext(ctx)})
	dir := t.TempDir()
	if _, err := client.Pull(ctx, repo+":"+e.Release.Version, dir); err != nil {
		t.Fatalf("pull the release's manifests: %v", err)
	}
	gate := filepath.Join(dir, "release-gate", "deployment.yaml")
	raw, err := os.ReadFile(gate)
	if err != nil {
		t.Fatal(err)
	}
	swapped := strings.Replace(string(raw), e.Release.Images[0].Ref.String(), repo+"-attacker/release-gate:latest", 1)
	if swapped == string(raw) {
		t.Fatalf("the gate's Deployment does not name %s", e.Release.Images[0].Ref)
	}
	if err := os.WriteFile(gate, []byte(swapped), 0o600); err != nil {
		t.Fatal(err)
	}
	tag := e.Release.Version
	pushed, err := client.Push(ctx, repo+":"+tag, dir, oci.WithPushMetadata(oci.Metadata{Source: "https://github.com/JorisJonkers-dev/delivery", Revision: tag}))
	if err != nil {
		t.Fatal(err)
	}
	digest := pushed[strings.LastIndex(pushed, "@")+1:]
	signature := func(d string) string { return repo + ":" + strings.Replace(d, ":", "-", 1) + ".sig" }
	if err := crane.Copy(signature(e.Release.Manifests.Ref.DigestStr()), signature(digest), crane.Insecure, crane.WithContext(ctx)); err != nil {
		t.Fatalf("copy the release's signature: %v", err)
	}
	return digest
}

// waitSource waits until the OCIRepository name satisfies ok.
func waitSource(t *testing.T, e *estate.Estate, name string, ok func(*sourcev1.OCIRepository) bool) *sourcev1.OCIRepository {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var r sourcev1.OCIRepository
		err := e.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: testenv.FluxNamespace, Name: name}, &r)
		if err == nil && ok(&r) {
			return &r
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 3m for the OCIRepository %s: %v %+v\n%s", name, err, r.Status.Conditions, e.Node.ContainerLogs(testenv.FluxNamespace, 3000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestAnUpgradeLeavesTheReleasesInFlightAlone upgrades the product, the
// way a platform team moves its OCIRepository to the next release, while
// an Application's release is mid-analysis: every service is replaced by
// the next release's signed images, and the release goes on as if nothing
// happened: its migration run once, both members promoted together, the
// record and the Reporter's status as without the upgrade. Every other
// test's release in flight beside it meets the same upgrade.
func TestAnUpgradeLeavesTheReleasesInFlightAlone(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	ctx := context.Background()
	// The next release is published first, so the upgrade's window is the
	// roll of the services alone.
	next, err := a.e.Publish(ctx, "v0.1.0-node.2")
	if err != nil {
		t.Fatal(err)
	}
	a.initialized(first)
	// A long analysis (two minutes at least), so the services' roll
	// (11 s alone, a minute beside every other test) falls inside it.
	slow := second
	slow.Iterations = 12
	a.release(slow)
	up := "auth-migration-" + slow.Tag()
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseProgressing, 4*time.Minute)
	}
	started := time.Now()
	if err := a.e.Upgrade(ctx, next); err != nil {
		t.Fatal(err)
	}
	t.Logf("upgraded to %s in %s; auth-api's Canary then %s, iteration %d", next.Version, time.Since(started).Round(time.Second),
		a.canary("auth-api").Status.Phase, a.canary("auth-api").Status.Iterations)
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseSucceeded, 6*time.Minute)
	}
	a.primariesRun(second.Version, "after the upgrade")
	a.serving(second.Revision, 2*time.Minute)
	if n := a.jobPods(up); n != 1 {
		t.Errorf("the migration ran %d times across the upgrade, want once", n)
	}
	a.expectStatus(second.Version, "success", "promoted and warmed up")
}
