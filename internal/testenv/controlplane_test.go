package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestCanaryWithStatus(t *testing.T) {
	cp := testenv.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	canary := &flaggerv1.Canary{
		ObjectMeta: metav1.ObjectMeta{Name: "auth-api", Namespace: ns},
		Spec: flaggerv1.CanarySpec{
			TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "auth-api"},
			Service:   flaggerv1.CanaryService{Port: 8080},
			Analysis:  &flaggerv1.CanaryAnalysis{Interval: "30s", Iterations: 4, Threshold: 3},
		},
	}
	if err := cp.Client.Create(ctx, canary); err != nil {
		t.Fatalf("create a Canary: %v", err)
	}
	canary.Status = flaggerv1.CanaryStatus{Phase: flaggerv1.CanaryPhaseWaitingPromotion, Iterations: 4, LastAppliedSpec: "5d8f", LastPromotedSpec: "7c2a"}
	if err := cp.Client.Status().Update(ctx, canary); err != nil {
		t.Fatalf("write the Canary's status: %v", err)
	}
	var got flaggerv1.Canary
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "auth-api"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != flaggerv1.CanaryPhaseWaitingPromotion || got.Status.LastAppliedSpec != "5d8f" || got.Spec.Service.Port != 8080 {
		t.Fatalf("read back %+v / %+v", got.Spec.Service, got.Status)
	}
}

func TestFluxKinds(t *testing.T) {
	cp := testenv.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	repo := &sourcev1.OCIRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "project-auth", Namespace: ns},
		Spec: sourcev1.OCIRepositorySpec{
			URL:       "oci://registry.example/estate/auth",
			Reference: &sourcev1.OCIRepositoryRef{Digest: "sha256:" + "ab12"},
			Interval:  metav1.Duration{Duration: 600e9},
		},
	}
	unit := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "project-auth", Namespace: ns},
		Spec: kustomizev1.KustomizationSpec{
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "project-auth"},
			Interval:  metav1.Duration{Duration: 600e9},
			Prune:     true,
		},
	}
	for _, obj := range []client.Object{repo, unit} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	var got kustomizev1.Kustomization
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(unit), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.SourceRef.Name != "project-auth" {
		t.Fatalf("read back %+v", got.Spec.SourceRef)
	}
}

func TestApplyAndCount(t *testing.T) {
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	objs, err := cp.Apply(context.Background(), []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: auth-release-gate, namespace: `+ns+`}
data: {releaseGate.json: "{}"}
---
apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: auth-ui, namespace: `+ns+`}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: auth-ui}
  service: {port: 8080}
  analysis: {interval: 30s, iterations: 4, threshold: 3}
status:
  phase: Succeeded
  lastAppliedSpec: abc
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("applied %d objects, want 2", len(objs))
	}
	cfg, counter := testenv.Counting(cp.Config)
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var canary flaggerv1.Canary
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "auth-ui"}, &canary); err != nil {
		t.Fatal(err)
	}
	if canary.Status.Phase != flaggerv1.CanaryPhaseSucceeded {
		t.Fatalf("the applied status did not land: %+v", canary.Status)
	}
	if n := counter.Matching("GET", "/canaries/auth-ui"); n != 1 {
		t.Fatalf("counted %d gets of the Canary (%v), want 1", n, counter.Requests())
	}
}

func TestImpersonationIsBoundByRBAC(t *testing.T) {
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	kube, err := client.New(cp.As(ns, "nobody"), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var list flaggerv1.CanaryList
	err = kube.List(context.Background(), &list, client.InNamespace(ns))
	if err == nil {
		t.Fatal("a ServiceAccount with no grant listed Canaries")
	}
}

func TestAssetsDirNamesTheBuildCommand(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := testenv.AssetsDir()
	if err == nil || !strings.Contains(err.Error(), testenv.BuildCommand) {
		t.Fatalf("AssetsDir in an empty folder = %v, want an error naming %q", err, testenv.BuildCommand)
	}
}
