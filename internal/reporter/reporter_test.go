package reporter

import (
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"
)

const repo = "acme/auth"

func authUnit(w *world) unit {
	return unit{project: "auth", repo: repo, version: "1.4.0", url: "https://auth.example", pin: pin,
		applied: "latest@" + pin, attempted: "latest@" + pin, canaries: []string{"auth-api", "auth-ui"}}
}

// expect checks that the last pass wrote exactly one status, this one, and
// that it kept the workflow's log_url and named the rollout URL.
func expect(t *testing.T, w *world, id int64, before int, state, description string) {
	t.Helper()
	all := w.fake.Statuses(repo, id)
	if len(all) != before+1 {
		t.Fatalf("%d statuses written, want 1: %+v\nlogs:\n%s", len(all)-before, all[before:], w.logs)
	}
	got := all[len(all)-1]
	if got.State != state || got.Description != description {
		t.Fatalf("wrote %s %q, want %s %q", got.State, got.Description, state, description)
	}
	if got.LogURL != logURL || got.EnvironmentURL != "https://auth.example" || got.Environment != "production" {
		t.Fatalf("status lost its URLs: %+v", got)
	}
}

func TestOneReleaseThroughEveryStage(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	n := func() int { return len(w.fake.Statuses(repo, id)) }

	// Pinned, not applied yet: nothing of the Reporter's to say.
	u := authUnit(w)
	u.applied, u.attempted = "latest@"+oldPin, "latest@"+oldPin
	w.applyUnit(u)
	w.pass(r)
	if n() != 1 {
		t.Fatalf("wrote before Flux applied: %+v", w.fake.Statuses(repo, id))
	}

	// Flux cannot build it: failure, which Flux's retry may still turn around.
	u.attempted, u.ready, u.reason, u.message = "latest@"+pin, "False", "BuildFailed", "kustomize build failed: missing resource"
	w.applyUnit(u)
	w.pass(r)
	expect(t, w, id, 1, releasepath.StateFailure, "Flux could not apply auth 1.4.0: BuildFailed: kustomize build failed: missing resource")

	// Applied; auth-api in analysis, auth-ui unchanged.
	u = authUnit(w)
	w.applyUnit(u)
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Progressing", iterations: 2})
	w.applyCanary(canary{name: "auth-ui", app: "auth", rev: revA, phase: "Initialized", settled: true})
	w.pass(r)
	expect(t, w, id, 2, releasepath.StateInProgress, "applied by Flux; auth-api checks 2/4")

	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "WaitingPromotion", iterations: 4})
	w.pass(r)
	expect(t, w, id, 3, releasepath.StateInProgress, "applied by Flux; auth-api waits for the other members")

	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Promoting"})
	w.pass(r)
	expect(t, w, id, 4, releasepath.StateInProgress, "applied by Flux; auth-api promoting")

	// Promoted: every member settled, the gate has not warmed auth up yet.
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Succeeded", settled: true})
	w.gate.set(w.appNS+"/auth", releasepath.Warmup{Revision: revB, Warmed: true}) // the previous release's warmup
	w.pass(r)
	expect(t, w, id, 5, releasepath.StateInProgress, "promoted; the Release Gate is warming up auth")

	// The pass after a write reads the changed statuses once (the write
	// changed them); from then on a quiet pass costs nothing: every read is
	// answered 304 and nothing is written.
	used := w.fake.RateLimitUsed()
	w.pass(r)
	if spent := w.fake.RateLimitUsed() - used; spent > 2 {
		t.Fatalf("the pass after a write spent %d units", spent)
	}
	used = w.fake.RateLimitUsed()
	w.pass(r)
	if n() != 6 || w.fake.RateLimitUsed() != used {
		t.Fatalf("a quiet pass wrote %d statuses and spent %d units", n()-6, w.fake.RateLimitUsed()-used)
	}

	w.gate.set(w.appNS+"/auth", releasepath.Warmup{Revision: revA, Warmed: true})
	w.pass(r)
	expect(t, w, id, 6, releasepath.StateSuccess, "auth 1.4.0 promoted and warmed up")

	// Success is final: whatever the cluster does next, nothing more is written.
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Failed", message: "late"})
	w.pass(r)
	if n() != 7 {
		t.Fatalf("a final status took another: %+v", w.fake.Statuses(repo, id))
	}
}

func TestRolledBackMemberFailsTheRelease(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	w.applyUnit(authUnit(w))
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Failed", message: "Canary analysis failed, Deployment scaled to zero.",
		changedAt: time.Now().Add(time.Minute)})
	w.applyCanary(canary{name: "auth-ui", app: "auth", rev: revA, phase: "Initialized", settled: true})
	w.pass(r)
	expect(t, w, id, 1, releasepath.StateFailure, "auth-api rolled back: Canary analysis failed, Deployment scaled to zero.")
}

// A member that failed in the release before stays Failed until Flagger
// starts on this one, and Flagger stamps its status.lastTransitionTime on
// every tick meanwhile: that is no rollback of this release.
func TestAFailureFromTheReleaseBeforeIsNoRollback(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	w.applyUnit(authUnit(w))
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Failed", message: "Canary analysis failed, Deployment scaled to zero.",
		changedAt: time.Now().Add(-time.Hour)})
	w.applyCanary(canary{name: "auth-ui", app: "auth", rev: revA, phase: "Initialized", settled: true})
	w.pass(r)
	expect(t, w, id, 1, releasepath.StateInProgress, "applied by Flux; auth-api waits for Flagger")
}

func TestWarmupFailureIsTheLastWordAndTheGateDownFailsNothing(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	w.applyUnit(authUnit(w))
	w.applyCanary(canary{name: "auth-api", app: "auth", rev: revA, phase: "Succeeded", settled: true})
	w.applyCanary(canary{name: "auth-ui", app: "auth", rev: revA, phase: "Initialized", settled: true})

	// The gate does not answer: promoted, in progress, never failed.
	w.gate.setDown(true)
	w.pass(r)
	expect(t, w, id, 1, releasepath.StateInProgress, "promoted; the Release Gate is warming up auth")
	w.pass(r)
	if len(w.fake.Statuses(repo, id)) != 2 {
		t.Fatal("the gate being down wrote twice")
	}
	if !strings.Contains(w.logs.String(), "the Release Gate did not answer") {
		t.Fatalf("the gate being down was not logged:\n%s", w.logs)
	}

	w.gate.setDown(false)
	w.gate.set(w.appNS+"/auth", releasepath.Warmup{Revision: revA, Failed: &releasepath.WarmupFailure{Request: "auth.example/login", Status: 502}})
	w.pass(r)
	expect(t, w, id, 2, releasepath.StateFailure, "auth promoted, but its warmup failed: auth.example/login answered 502")

	// The gate never rolls back: the failure stays, gate down or not.
	w.gate.setDown(true)
	w.pass(r)
	w.gate.setDown(false)
	w.gate.set(w.appNS+"/auth", releasepath.Warmup{Revision: revA, Warmed: true})
	w.pass(r)
	if len(w.fake.Statuses(repo, id)) != 3 {
		t.Fatalf("a failed warmup was overwritten: %+v", w.fake.Statuses(repo, id))
	}
}

func TestRestartWritesNothingTwice(t *testing.T) {
	w := newWorld(t)
	id := w.deployment(repo, "auth", "1.4.0")
	u := authUnit(w)
	u.canaries = nil
	u.ready, u.reason = "Unknown", "Progressing"
	w.applyUnit(u)
	w.pass(w.reporter())
	expect(t, w, id, 1, releasepath.StateInProgress, "applied by Flux")

	// A Reporter started afresh (no cache, no memory) finds the same stage and writes nothing.
	w.pass(w.reporter())
	if len(w.fake.Statuses(repo, id)) != 2 {
		t.Fatalf("a restart wrote again: %+v", w.fake.Statuses(repo, id))
	}
	u.ready, u.reason = "True", "ReconciliationSucceeded"
	w.applyUnit(u)
	w.pass(w.reporter())
	expect(t, w, id, 2, releasepath.StateSuccess, "auth 1.4.0 applied by Flux and ready")
}

func TestFinalStatusesTakeNothing(t *testing.T) {
	for _, state := range []string{releasepath.StateSuccess, releasepath.StateInactive, releasepath.StateError} {
		t.Run(state, func(t *testing.T) {
			w := newWorld(t)
			id := w.deployment(repo, "auth", "1.4.0")
			w.fake.AddStatus(repo, id, fakegithubStatus(state))
			u := authUnit(w)
			u.canaries = nil
			w.applyUnit(u)
			r := w.reporter()
			w.pass(r)
			w.pass(r)
			if got := w.fake.Statuses(repo, id); len(got) != 2 {
				t.Fatalf("a %s Deployment took %+v", state, got[2:])
			}
			if posts := w.fake.CallsMatching("POST", "/statuses"); posts != 0 {
				t.Fatalf("%d writes", posts)
			}
		})
	}
}

func TestProjectsSharingARepositoryNeverTakeEachOthersStatus(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	shared := "acme/platform"
	auth := w.deployment(shared, "auth", "1.4.0")
	billing := w.deployment(shared, "billing", "1.4.0") // newer, same version
	other := w.deployment(shared, "search", "2.0.0")
	w.applyUnit(unit{project: "auth", repo: shared, version: "1.4.0", pin: pin, applied: pin, attempted: pin})
	// billing is pinned but not applied; docs names a version no Deployment has.
	w.applyUnit(unit{project: "billing", repo: shared, version: "1.4.0", pin: pin, applied: oldPin, attempted: oldPin})
	w.applyUnit(unit{project: "docs", repo: shared, version: "1.4.0", pin: pin, applied: pin, attempted: pin})
	w.pass(r)
	if got := w.latest(shared, auth); got.State != releasepath.StateSuccess || got.Description != "auth 1.4.0 applied by Flux and ready" {
		t.Fatalf("auth: %+v", got)
	}
	for name, id := range map[string]int64{"billing": billing, "search": other} {
		if got := w.fake.Statuses(shared, id); len(got) != 1 {
			t.Fatalf("%s's Deployment took another Project's status: %+v", name, got)
		}
	}
	// One list of the shared repository served all three units.
	if lists := w.fake.CallsMatching("GET", "/repos/acme/platform/deployments") - w.fake.CallsMatching("GET", "/statuses"); lists != 1 {
		t.Fatalf("%d lists of one repository in one pass", lists)
	}
	if !strings.Contains(w.logs.String(), "has no Deployment whose payload names project docs version 1.4.0") {
		t.Fatalf("docs' missing Deployment not logged:\n%s", w.logs)
	}
}

func TestUnitsWithoutRolloutAreSkippedAndLoggedOnce(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	w.applyUnit(unit{project: "plain", pin: pin, applied: pin, attempted: pin})
	w.applyUnit(unit{project: "typo", repo: repo, version: "latest", pin: pin, applied: pin, attempted: pin})
	// What a unit names is missing: a repository the installation cannot see, a pin.
	w.applyUnit(unit{project: "unseen", repo: "acme/unseen", version: "1.0.0", pin: pin, applied: pin, attempted: pin})
	w.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: project-nopin, namespace: %s, annotations: {%s: acme/x, %s: "1.0.0", %s: %q}}
spec: {interval: 10m, prune: true, path: ./, sourceRef: {kind: OCIRepository, name: project-nopin}}`, w.fluxNS, releasepath.AnnotationRepository, releasepath.AnnotationVersion, releasepath.AnnotationDigest, pin)
	// Not a Project's unit at all.
	w.apply(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: flux-system, namespace: %s}
spec: {interval: 10m, prune: true, path: ./, sourceRef: {kind: GitRepository, name: flux-system}}`, w.fluxNS)
	w.pass(r)
	w.pass(r)
	logs := w.logs.String()
	for _, name := range []string{"plain", "typo", "unseen", "nopin"} {
		if strings.Count(logs, `"unit":"project-`+name+`"`) != 1 {
			t.Fatalf("project-%s not logged exactly once:\n%s", name, logs)
		}
	}
	if !strings.Contains(logs, "cannot see repository acme/unseen") || !strings.Contains(logs, "project-nopin") {
		t.Fatalf("skips not logged exactly once:\n%s", logs)
	}
	if !strings.Contains(logs, "rollout-version") || strings.Contains(logs, `"unit":"flux-system"`) {
		t.Fatalf("skip reasons:\n%s", logs)
	}
	if w.fake.RateLimitUsed() != 1 { // the one list that met the unseen repository's 404
		t.Fatalf("skipped units spent %d units", w.fake.RateLimitUsed())
	}
	// The unseen repository is asked for again once unseenRetry has passed.
	r.Now = func() time.Time { return time.Now().Add(unseenRetry) }
	w.pass(r)
	if w.fake.RateLimitUsed() != 2 {
		t.Fatalf("after the retry time: %d units", w.fake.RateLimitUsed())
	}
}

func TestGitHubFailureFailsThePassButNotTheOtherUnits(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	docs := twoUnits(w)
	w.fake.FailWith(502)
	if err := r.Pass(w.ctx); err == nil || !strings.Contains(err.Error(), "2 of 2 units") {
		t.Fatalf("pass: %v", err)
	}
	w.fake.FailWith(0)
	w.pass(r)
	if got := w.latest("acme/docs", docs); got.State != releasepath.StateSuccess {
		t.Fatalf("docs after recovery: %+v", got)
	}
}

// A pin the source cannot fetch or verify is a failure: the unit goes on
// applying the release before and would never attempt this one.
func TestAPinTheSourceCannotFetchFails(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	u := authUnit(w)
	u.applied, u.attempted = "latest@"+oldPin, "latest@"+oldPin
	u.source = &fluxunit.SourceReady{Status: "False", Reason: "OCIArtifactPullFailed", Message: "failed to pull artifact: manifest unknown", Generation: 1}
	w.applyUnit(u)
	w.pass(r)
	expect(t, w, id, 1, releasepath.StateFailure, "Flux could not apply auth 1.4.0: OCIArtifactPullFailed: failed to pull artifact: manifest unknown")
}

// A source's Ready condition about a spec before the pin says nothing of
// the pin: nothing is written.
func TestASourceConditionAboutAnEarlierSpecWritesNothing(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	id := w.deployment(repo, "auth", "1.4.0")
	u := authUnit(w)
	u.applied, u.attempted = "latest@"+oldPin, "latest@"+oldPin
	u.source = &fluxunit.SourceReady{Status: "False", Reason: "OCIArtifactPullFailed", Message: "failed to pull artifact: manifest unknown", Generation: 0}
	w.applyUnit(u)
	w.pass(r)
	for _, st := range w.fake.Statuses(repo, id) {
		if st.State == releasepath.StateFailure {
			t.Fatalf("a failure from a condition about an earlier spec: %+v", st)
		}
	}
}

// A unit GitHub refuses for what it is (its repository archived, so
// read-only) is skipped and logged once; the pass still succeeds for the
// rest, so the Reporter stays fresh and is not restarted for it.
func TestAUnitGitHubRefusesIsSkipped(t *testing.T) {
	w := newWorld(t)
	r := w.reporter()
	docs := twoUnits(w)
	w.fake.ArchiveRepository(repo)
	w.pass(r)
	w.pass(r) // reads again what docs' first write changed
	used := w.fake.RateLimitUsed()
	w.pass(r)
	if got := w.latest("acme/docs", docs); got.State != releasepath.StateSuccess {
		t.Fatalf("docs beside the refused unit: %+v", got)
	}
	if n := strings.Count(w.logs.String(), `"msg":"unit skipped","unit":"project-auth"`); n != 1 {
		t.Fatalf("the refused unit was logged %d times, want once:\n%s", n, w.logs)
	}
	// GitHub charges a refusal: the refused write waits unseenRetry.
	if n := w.fake.RateLimitUsed() - used; n != 0 {
		t.Fatalf("the pass after a refusal spent %d rate-limit units, want 0", n)
	}
	r.Now = func() time.Time { return time.Now().Add(unseenRetry) }
	w.pass(r)
	if w.fake.RateLimitUsed() == used {
		t.Fatal("the refused write was not tried again after unseenRetry")
	}
	// Every unit refused is the App's doing, and fails the pass.
	w.fake.ArchiveRepository("acme/docs")
	w.applyUnit(unit{project: "docs", repo: "acme/docs", version: "1.4.1", pin: pin, applied: "latest@" + pin, attempted: "latest@" + pin})
	w.deployment("acme/docs", "docs", "1.4.1")
	if err := r.Pass(w.ctx); err == nil || !strings.Contains(err.Error(), "GitHub refused every unit") {
		t.Fatalf("a pass whose every unit GitHub refused: %v", err)
	}
}

// twoUnits applies auth's unit, released from repo, and docs', released from
// acme/docs, neither with members, each with its Deployment; it returns
// docs'.
func twoUnits(w *world) int64 {
	w.deployment(repo, "auth", "1.4.0")
	u := authUnit(w)
	u.canaries = nil
	w.applyUnit(u)
	u.project, u.repo = "docs", "acme/docs"
	w.applyUnit(u)
	return w.deployment("acme/docs", "docs", "1.4.0")
}
