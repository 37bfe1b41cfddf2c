package fluxunit_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	pin    = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	oldPin = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// TestTheReleasePathReadsTheUnitAsWritten writes a unit with every field
// set, and one without Rollout annotations, and reads both back through
// the reader the Reporter and the release record share.
func TestTheReleasePathReadsTheUnitAsWritten(t *testing.T) {
	cp := testenv.Shared(t)
	ctx := context.Background()
	fluxNS, appNS := cp.Namespace(t), cp.Namespace(t)
	fluxunit.Unit{Namespace: fluxNS, Project: "docs", Pin: pin, Repository: "acme/docs", Version: "2.1.0", URL: "https://docs.example",
		Digest: oldPin, Applied: "latest@" + oldPin, Attempted: "latest@" + pin, Origin: "main@sha1:abc",
		Ready: "False", Reason: "BuildFailed", Message: "kustomize build failed: \"x\"",
		Inventory: []fluxunit.Entry{fluxunit.Canary(appNS, "api"), fluxunit.Deployment(appNS, "api")},
		Source:    &fluxunit.SourceReady{Status: "False", Reason: "OCIArtifactPullFailed", Message: "manifest unknown", Generation: 1}}.Apply(t, cp)
	fluxunit.Unit{Namespace: fluxNS, Project: "plain", Pin: pin, Applied: "latest@" + pin, Attempted: "latest@" + pin}.Apply(t, cp)

	kube, err := releasepath.NewKube(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	units, err := kube.Units(ctx, fluxNS)
	if err != nil || len(units) != 2 {
		t.Fatalf("%d units, %v", len(units), err)
	}
	docs, plain := units[0], units[1]
	rollout, err := releasepath.RolloutOf(docs.Annotations)
	if err != nil || rollout.Repository.String() != "acme/docs" || rollout.Version != "2.1.0" || rollout.Digest != oldPin || rollout.URL != "https://docs.example" {
		t.Errorf("the Rollout %+v, %v", rollout, err)
	}
	want := releasepath.Unit{AppliedRevision: "latest@" + oldPin, AttemptedRevision: "latest@" + pin,
		Ready: releasepath.Condition{Status: "False", Reason: "BuildFailed", Message: "kustomize build failed: \"x\""}}
	if docs.Unit != want || docs.SourceKind != "OCIRepository" || docs.Source != (types.NamespacedName{Namespace: fluxNS, Name: "project-docs"}) {
		t.Errorf("the unit %+v", docs)
	}
	if !reflect.DeepEqual(docs.Canaries, []types.NamespacedName{{Namespace: appNS, Name: "api"}}) {
		t.Errorf("the Canaries %v", docs.Canaries)
	}
	var ks kustomizev1.Kustomization
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: fluxNS, Name: "project-docs"}, &ks); err != nil || ks.Status.LastAppliedOriginRevision != "main@sha1:abc" {
		t.Errorf("the origin revision %q, %v", ks.Status.LastAppliedOriginRevision, err)
	}
	source, err := kube.Source(ctx, fluxNS, "project-docs")
	if err != nil || source.Pin != pin || source.Ready != (releasepath.Condition{Status: "False", Reason: "OCIArtifactPullFailed", Message: "manifest unknown"}) {
		t.Errorf("the source %+v, %v", source, err)
	}
	if _, err := releasepath.RolloutOf(plain.Annotations); !errors.Is(err, releasepath.ErrNoRollout) {
		t.Errorf("a unit with no repository carries Rollout annotations: %v", plain.Annotations)
	}
	if plain.Unit.Ready.Status != "True" || plain.Unit.Ready.Reason != "ReconciliationSucceeded" {
		t.Errorf("a unit with no Ready condition set: %+v", plain.Unit.Ready)
	}
}
