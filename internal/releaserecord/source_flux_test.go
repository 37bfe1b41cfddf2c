package releaserecord_test

import (
	"strings"
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	gaterelease "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

var (
	pin1 = "sha256:" + strings.Repeat("1", 64)
	pin0 = "sha256:" + strings.Repeat("0", 64)
)

// view is a unit of the Project docs at 2.1.0, pinned and applied, Ready,
// with the members given.
func view(members ...releasepath.Member) rr.FluxUnit {
	return rr.FluxUnit{
		Unit: releasepath.UnitObject{Name: "project-docs", Project: "docs", Annotations: map[string]string{}, SourceKind: "OCIRepository",
			Source: types.NamespacedName{Namespace: "flux-system", Name: "project-docs"},
			Unit: releasepath.Unit{AppliedRevision: "latest@" + pin1, AttemptedRevision: "latest@" + pin1,
				Ready: releasepath.Condition{Status: "True", Reason: "ReconciliationSucceeded"}}},
		Rollout: releasepath.Rollout{Repository: githubapp.Repository{Owner: "acme", Name: "docs"}, Version: "2.1.0", Digest: pin1},
		Source:  releasepath.Source{Pin: pin1, Ready: releasepath.Condition{Status: "True"}},
		Members: members,
		Gate:    releasepath.Gate{Answered: true},
	}
}

// member is a member in phase; settled promotes its spec and gives its
// primary what its Deployment runs.
func member(name string, phase flaggerv1.CanaryPhase, settled bool) releasepath.Member {
	dep := func(image string) *gaterelease.Deployment {
		return &gaterelease.Deployment{Name: name, Containers: []gaterelease.Container{{Name: "app", Image: image}}}
	}
	m := releasepath.Member{Namespace: "docs", State: gaterelease.MemberState{Process: name, HasCanary: true,
		Canary: gaterelease.Canary{Name: name, Phase: phase, LastAppliedSpec: name + "-spec-new", LastPromotedSpec: name + "-spec-old"},
		Target: dep("img:new"), Primary: dep("img:old")}, Iterations: 4, ChangedAt: t0}
	if settled {
		m.State.Canary.LastPromotedSpec = m.State.Canary.LastAppliedSpec
		m.State.Primary = dep("img:new")
	}
	return m
}

func TestFluxFacts(t *testing.T) {
	notPinned := view()
	notPinned.Source.Pin = pin0
	sourceFails := view()
	sourceFails.Unit.Unit = releasepath.Unit{AppliedRevision: "latest@" + pin0, AttemptedRevision: "latest@" + pin0, Ready: releasepath.Condition{Status: "True"}}
	sourceFails.Source.Ready = releasepath.Condition{Status: "False", Reason: "OCIArtifactPullFailed", Message: "unauthorized"}
	unitFails := view()
	unitFails.Unit.Unit = releasepath.Unit{AppliedRevision: "latest@" + pin0, AttemptedRevision: "latest@" + pin1,
		Ready: releasepath.Condition{Status: "False", Reason: "BuildFailed", Message: "kustomize build failed"}}
	waiting := view()
	waiting.Unit.Unit = releasepath.Unit{AppliedRevision: "latest@" + pin0, AttemptedRevision: "latest@" + pin1,
		Ready: releasepath.Condition{Status: "False", Reason: "DependencyNotReady"}}
	applying := view()
	applying.Unit.Unit.Ready = releasepath.Condition{Status: "Unknown", Reason: "Progressing"}
	failedAfterApply := view(member("api", flaggerv1.CanaryPhaseSucceeded, true))
	failedAfterApply.Unit.Unit.Ready = releasepath.Condition{Status: "False", Reason: "HealthCheckFailed", Message: "timeout"}
	gated := member("api", flaggerv1.CanaryPhaseSucceeded, true)
	gated.State.Canary.Webhooks = []map[string]string{{"application": "docs", "revision": "sha256:" + strings.Repeat("a", 64)}}
	warmupFailed := view(gated)
	warmupFailed.Gate.Warmups = map[string]releasepath.Warmup{"docs/docs": {Revision: "sha256:" + strings.Repeat("a", 64),
		Failed: &releasepath.WarmupFailure{Request: "GET /", Status: 500}}}
	warming := view(gated)
	failed := member("ui", flaggerv1.CanaryPhaseFailed, false)
	failed.Message = "canary analysis failed"
	rollback := view()
	rollback.Unit.Annotations = map[string]string{rr.AnnotationRollbackOf: idB, rr.AnnotationRollbackReason: "error\nrate"}
	badRollback := view()
	badRollback.Unit.Annotations = map[string]string{rr.AnnotationRollbackOf: "docs"}
	badProject := view()
	badProject.Unit.Project = "Docs"
	// Flux records the pin applied only once its health checks pass, which
	// wait on the Canaries.
	beforeApplied := func(members ...releasepath.Member) rr.FluxUnit {
		u := view(members...)
		u.Unit.Unit = releasepath.Unit{AppliedRevision: "latest@" + pin0, AttemptedRevision: "latest@" + pin1,
			Ready: releasepath.Condition{Status: "Unknown", Reason: "Progressing", Message: "Health check in progress"}}
		return u
	}
	analysingEarly := beforeApplied(member("api", flaggerv1.CanaryPhaseProgressing, false))
	notAnalysing := beforeApplied(member("api", flaggerv1.CanaryPhaseSucceeded, true))
	notAttempted := beforeApplied(member("api", flaggerv1.CanaryPhaseProgressing, false))
	notAttempted.Unit.Unit.AttemptedRevision = "latest@" + pin0
	fetchRetrying := view()
	fetchRetrying.Unit.Unit = releasepath.Unit{AppliedRevision: "latest@" + pin0, AttemptedRevision: "latest@" + pin0, Ready: releasepath.Condition{Status: "True"}}
	fetchRetrying.Source.Ready = releasepath.Condition{}
	fetchRetrying.Origin.SourceFailure = rr.SourceFailure{Pin: pin1, Condition: releasepath.Condition{Status: "False", Reason: "OCIArtifactPullFailed", Message: "manifest unknown"}}
	fetchRetryingBefore := fetchRetrying
	fetchRetryingBefore.Origin.SourceFailure.Pin = pin0

	for _, tc := range []struct {
		name    string
		unit    rr.FluxUnit
		phase   rr.Phase // "" for the merged fact alone
		abort   bool
		podHash string
		message string
		err     string
	}{
		{name: "the source not pinned to the Rollout yet: merged alone", unit: notPinned},
		{name: "the source cannot pull the pin: a sync failure", unit: sourceFails, phase: rr.PhaseSyncFailed, message: "OCIArtifactPullFailed: unauthorized"},
		{name: "the unit fails on the release: a sync failure", unit: unitFails, phase: rr.PhaseSyncFailed, message: "BuildFailed: kustomize build failed"},
		{name: "the unit waits on another: merged alone", unit: waiting},
		{name: "applied, no members, not Ready yet: progressing", unit: applying, phase: rr.PhaseProgressing},
		{name: "applied, no members, Ready: healthy", unit: view(), phase: rr.PhaseHealthy},
		{name: "a Canary analysing: progressing, no pod hash", unit: view(member("api", flaggerv1.CanaryPhaseProgressing, false), member("ui", flaggerv1.CanaryPhaseSucceeded, true)), phase: rr.PhaseProgressing},
		{name: "every member settled and promoted: healthy with the pod hash", unit: view(member("ui", flaggerv1.CanaryPhaseSucceeded, true), member("api", flaggerv1.CanaryPhaseInitialized, true)),
			phase: rr.PhaseHealthy, podHash: "api=api-spec-new,ui=ui-spec-new"},
		{name: "a member settled but not promoted: progressing", unit: view(member("api", flaggerv1.CanaryPhaseSucceeded, false)), phase: rr.PhaseProgressing},
		{name: "a Canary failed: degraded with the abort flag", unit: view(member("api", flaggerv1.CanaryPhaseSucceeded, true), failed),
			phase: rr.PhaseDegraded, abort: true, podHash: "api=api-spec-new,ui=ui-spec-new", message: "ui rolled back: canary analysis failed"},
		{name: "Flux fails after applying: a sync failure", unit: failedAfterApply, phase: rr.PhaseSyncFailed, message: "HealthCheckFailed: timeout"},
		{name: "the warmup failed: degraded without the abort flag", unit: warmupFailed, phase: rr.PhaseDegraded, podHash: "api=api-spec-new", message: "warmup failed"},
		{name: "the gate warming up: progressing", unit: warming, phase: rr.PhaseProgressing},
		{name: "a Canary analysing the attempted pin before Flux records it applied: progressing", unit: analysingEarly, phase: rr.PhaseProgressing},
		{name: "before applied, no Canary analysing: merged alone", unit: notAnalysing},
		{name: "a Canary analysing, the pin not attempted: merged alone", unit: notAttempted},
		{name: "the source's first failed fetch of the pin, still retrying: a sync failure", unit: fetchRetrying, phase: rr.PhaseSyncFailed,
			message: "OCIArtifactPullFailed: manifest unknown"},
		{name: "a failed fetch of another pin: merged alone", unit: fetchRetryingBefore},
		{name: "a malformed rollback-of", unit: badRollback, err: "rollback-of"},
		{name: "a Project that is no app name", unit: badProject, err: "malformed release id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts, err := rr.FluxFacts(tc.unit, "prod-eu", "prod")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(facts) == 0 || facts[0].Phase != rr.PhaseMerged {
				t.Fatalf("%+v %v", facts, err)
			}
			m := facts[0].Release
			if m.ID.String() != idA || m.Image != pin1 || m.GitURL != "https://github.com/acme/docs" || m.Kind != rr.KindPromote {
				t.Fatalf("merged %+v", m)
			}
			if tc.phase == "" {
				if len(facts) != 1 {
					t.Fatalf("%+v", facts)
				}
				return
			}
			if len(facts) != 2 {
				t.Fatalf("%d facts: %+v", len(facts), facts)
			}
			f := facts[1]
			if f.Phase != tc.phase || f.Abort != tc.abort || f.PodHash != tc.podHash || !strings.Contains(f.Message, tc.message) || f.Release.ID != m.ID {
				t.Fatalf("%+v", f)
			}
			if f.Abort && !f.At.Equal(t0) {
				t.Fatalf("a failure's time %v", f.At)
			}
		})
	}
	facts, err := rr.FluxFacts(rollback, "prod-eu", "prod")
	if err != nil || facts[0].Release.Kind != rr.KindRollback || facts[0].Release.RollbackOf != idB || facts[0].Release.RollbackReason != "error rate" {
		t.Fatalf("a rollback: %+v %v", facts, err)
	}
}

// TestGitRevision holds the record's gitRevision to what the unit and its
// source carry of the artifact at the pin.
func TestGitRevision(t *testing.T) {
	commit := "0123abc" + strings.Repeat("d", 33)
	applied := view()
	applied.Origin = rr.Origin{Applied: "main@sha1:" + commit}
	fetched := view()
	fetched.Unit.Unit.AppliedRevision = "latest@" + pin0
	fetched.Origin = rr.Origin{Applied: "main@sha1:older", ArtifactRevision: "latest@" + pin1, ArtifactOrigin: "main@sha1:" + commit}
	artifactOfBefore := view()
	artifactOfBefore.Unit.Unit.AppliedRevision = "latest@" + pin0
	artifactOfBefore.Origin = rr.Origin{Applied: "main@sha1:older", ArtifactRevision: "latest@" + pin0, ArtifactOrigin: "main@sha1:older"}
	notPinned := view()
	notPinned.Source.Pin = pin0
	notPinned.Origin = rr.Origin{Applied: "main@sha1:" + commit}
	appliedWithout := view()
	appliedWithout.Origin = rr.Origin{ArtifactRevision: "latest@" + pin1, ArtifactOrigin: "sha1:" + commit}
	tag := view()
	tag.Origin = rr.Origin{Applied: "v2.1.0"}
	long := view()
	long.Origin = rr.Origin{Applied: strings.Repeat("x", 257)}
	for _, tc := range []struct {
		name string
		unit rr.FluxUnit
		want string
	}{
		{name: "the unit applied the pin: its origin revision, read as the commit", unit: applied, want: commit},
		{name: "not applied yet, the source fetched the pin: the artifact's", unit: fetched, want: commit},
		{name: "neither at the pin: none", unit: artifactOfBefore},
		{name: "the source not pinned to the Rollout: none", unit: notPinned},
		{name: "applied without an origin on the unit: the artifact's, sha1: alone", unit: appliedWithout, want: commit},
		{name: "a revision not of git's form is kept whole", unit: tag, want: "v2.1.0"},
		{name: "one past the schema's bound is none", unit: long},
		{name: "no origin at all: none", unit: view()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rr.GitRevision(tc.unit); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
			facts, err := rr.FluxFacts(tc.unit, "prod-eu", "prod")
			if err != nil || facts[0].Release.GitRevision != tc.want {
				t.Fatalf("the merged fact %+v %v", facts, err)
			}
		})
	}
}

// TestOriginOf: what the unit and its source say of their origin, the
// source's generation at its pin, and a failure at that generation said
// before status.observedGeneration reaches it.
func TestOriginOf(t *testing.T) {
	const uid = "0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a"
	repo := func(observed, conditionAt int64, status metav1.ConditionStatus) *sourcev1.OCIRepository {
		r := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "project-docs", UID: uid, Generation: 3},
			Spec: sourcev1.OCIRepositorySpec{Reference: &sourcev1.OCIRepositoryRef{Digest: pin1}}}
		r.Status.ObservedGeneration = observed
		r.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: "OCIArtifactPullFailed", Message: "manifest unknown", ObservedGeneration: conditionAt}}
		return r
	}
	ks := &kustomizev1.Kustomization{}
	ks.Status.LastAppliedOriginRevision = "main@sha1:abc"
	o := rr.OriginOf(ks, repo(2, 3, metav1.ConditionFalse))
	if o.Applied != "main@sha1:abc" || o.SourcePin != pin1 || o.SourceGeneration != "OCIRepository/flux-system/project-docs/"+uid+"=3" {
		t.Fatalf("%+v", o)
	}
	if o.SourceFailure.Pin != pin1 || o.SourceFailure.Status != "False" || o.SourceFailure.Reason != "OCIArtifactPullFailed" {
		t.Fatalf("the first failed fetch: %+v", o.SourceFailure)
	}
	if o := rr.OriginOf(ks, repo(2, 2, metav1.ConditionFalse)); o.SourceFailure.Status != "" {
		t.Fatalf("a failure of the spec before: %+v", o.SourceFailure)
	}
	if o := rr.OriginOf(ks, repo(3, 3, metav1.ConditionTrue)); o.SourceFailure.Status != "" {
		t.Fatalf("a Ready source: %+v", o.SourceFailure)
	}
	unpinned := repo(3, 3, metav1.ConditionFalse)
	unpinned.Spec.Reference = nil
	if o := rr.OriginOf(nil, unpinned); o.SourcePin != "" || o.SourceGeneration != "" || o.SourceFailure.Status != "" {
		t.Fatalf("an unpinned source: %+v", o)
	}
	// The merged fact carries the source's generation while it pins the
	// Rollout's digest, and no order otherwise.
	u := view()
	u.Origin = rr.OriginOf(ks, repo(3, 3, metav1.ConditionTrue))
	if facts, err := rr.FluxFacts(u, "prod-eu", "prod"); err != nil || facts[0].Order.ObjectGeneration != u.Origin.SourceGeneration {
		t.Fatalf("%+v %v", facts, err)
	}
	u.Origin.SourcePin = pin0
	if facts, err := rr.FluxFacts(u, "prod-eu", "prod"); err != nil || facts[0].Order.ObjectGeneration != "" {
		t.Fatalf("another pin's generation: %+v %v", facts, err)
	}
}
