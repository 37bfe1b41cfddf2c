package wholepath_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/estate"
)

// Three releases of the auth Application.
var (
	first  = estate.Release{Version: "1.0.0", Revision: "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"}
	second = estate.Release{Version: "2.0.0", Revision: "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca", TestedAgainst: first.Revision}
	third  = estate.Release{Version: "3.0.0", Revision: "sha256:9cca1f71bf19e0d3c8b5a4f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2", TestedAgainst: second.Revision,
		Failing: map[string]bool{"auth-ui": true}}
)

// TestReleasesAlongTheWholePath delivers the releases of a two-member
// Application with a migration through the real Flux, the real Flagger as
// a pod and the Release Gate installed from its image:
//   - the first: Flux applies it, Flagger initializes both Canaries and the
//     gate records it as serving;
//   - the second: the gate's round starts its migration under proof as a
//     real pod; no pod of the new templates starts before it completed.
//     auth-ui's new copy fails the gate's own traffic at first: auth-api
//     passes and waits at the barrier, unpromoted, until auth-ui's copy
//     passes too; both are promoted together and the record says it serves;
//   - the third: auth-ui's new copy fails its own traffic, Flagger fails it
//     at its threshold, the gate rolls auth-api back rather than promote it
//     alone, holds the release as analysis-failed and undoes its migration;
//     both primaries keep the second release;
//   - a newer render applied while an older one is analysed: Flagger
//     restarts the analysis on the newer template without asking may-start,
//     the gate holds it to may-start's rule (the older one's migration was
//     left applied), so it fails and nothing of either is promoted;
//   - a render whose Canaries name another Application: the gate cannot
//     answer and nothing of it starts.
func TestReleasesAlongTheWholePath(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	ctx := context.Background()

	start := time.Now()
	art := a.initialized(first)
	t.Logf("the first release: pushed to serving in %s", time.Since(start).Round(time.Second))
	a.expectStatus(first.Version, "success", "promoted and warmed up")
	if r := a.expectRecord(first.Version, rr.StateHealthy, evDeployed); r.Image != art.Digest || r.GitRevision != first.Commit() {
		t.Errorf("the first release's record names %q at %q, want %q at %q", r.Image, r.GitRevision, art.Digest, first.Commit())
	}

	// Every pod created from here on, with when.
	created := a.watchPods()
	start = time.Now()
	// auth-ui's copy fails until the test says otherwise; its threshold
	// leaves it the time auth-api needs to reach the barrier.
	held := second
	held.Failing, held.Threshold = map[string]bool{"auth-ui": true}, 12
	art = a.release(held)
	up := "auth-migration-" + second.Tag()
	var migrated time.Time
	a.waitFor("the migration of the second release to complete", 4*time.Minute, func() (bool, string) {
		j, err := a.e.Node.Kube.BatchV1().Jobs(a.ns).Get(ctx, up, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if j.Status.CompletionTime != nil {
			migrated = j.Status.CompletionTime.Time
			return true, ""
		}
		for _, m := range estate.Members {
			if p := a.canary(m.Process).Status.Phase; p == flaggerv1.CanaryPhaseProgressing || p == flaggerv1.CanaryPhasePromoting {
				t.Fatalf("%s is %s before the migration completed", m.Process, p)
			}
		}
		return false, fmt.Sprintf("suspend %v, active %d", *j.Spec.Suspend, j.Status.Active)
	})

	// The barrier: auth-api passes and waits while auth-ui's copy fails.
	a.phase("auth-api", flaggerv1.CanaryPhaseWaitingPromotion, 4*time.Minute)
	a.waitFor("a Flagger tick with auth-api held at the barrier", 2*time.Minute, func() (bool, string) {
		return a.saidAt("may-promote", "auth-api", "not yet", second.Tag()), fmt.Sprint(a.answers("may-promote", "auth-api"))
	})
	if p := a.canary("auth-api").Status.Phase; p != flaggerv1.CanaryPhaseWaitingPromotion {
		t.Fatalf("auth-api went %s while auth-ui had not passed", p)
	}
	for _, m := range estate.Members {
		if got := a.primaryRelease(m.Process); got != first.Version {
			t.Fatalf("%s's primary runs %s before the barrier opened", m.Process, got)
		}
	}
	if !a.saidAt("checks", "auth-ui", "not yet", second.Tag()) {
		t.Errorf("auth-ui's copy failed, but not on the gate's own traffic: %v", a.answers("checks", "auth-ui"))
	}
	a.setFailing("auth-ui", second.Version, false)
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
		if got := a.primaryRelease(m.Process); got != second.Version {
			t.Errorf("%s's primary runs %s, want %s", m.Process, got, second.Version)
		}
	}
	a.serving(second.Revision, 2*time.Minute)
	t.Logf("the second release: pushed to serving in %s", time.Since(start).Round(time.Second))
	a.expectRecord(second.Version, rr.StateHealthy, evUpgraded)
	a.expectRecord(first.Version, rr.StateSuperseded, "")
	if first, ok := created.first(second.Version); !ok {
		t.Errorf("no pod of the second release was seen")
	} else if first.Before(migrated) {
		t.Errorf("a pod of the second release was created at %s, before its migration completed at %s", first, migrated)
	}
	if err := a.e.Applied(ctx, a.ns, art.Digest); err != nil {
		t.Error(err)
	}
	if !a.said("checks", "auth-api", "yes") {
		t.Errorf("the gate never passed auth-api's own traffic: %v", a.answers("checks", "auth-api"))
	}

	// The third: auth-ui's new copy answers 503 to the gate's own traffic.
	start = time.Now()
	a.release(third)
	a.phase("auth-ui", flaggerv1.CanaryPhaseFailed, 6*time.Minute)
	t.Logf("the third release: pushed to failed in %s", time.Since(start).Round(time.Second))
	a.expectStatus(third.Version, "failure", "rolled back")
	if r := a.expectRecord(third.Version, rr.StateAborted, evFailed); r.LastError == "" {
		t.Errorf("the aborted record keeps no error")
	}
	if !a.saidAt("checks", "auth-ui", "not yet", third.Tag()) {
		t.Errorf("auth-ui failed, but not on the gate's own traffic: %v", a.answers("checks", "auth-ui"))
	}
	a.phase("auth-api", flaggerv1.CanaryPhaseFailed, 3*time.Minute)
	if !a.saidAt("rollback", "auth-api", "yes", third.Tag()) {
		t.Errorf("auth-api failed, but not on the gate's rollback: %v", a.answers("rollback", "auth-api"))
	}
	a.primariesRun(second.Version, "after the failed release")
	down := "auth-migration-down-" + third.Tag()
	a.waitFor("the gate to undo the third release's migration", 3*time.Minute, func() (bool, string) {
		j, err := a.e.Node.Kube.BatchV1().Jobs(a.ns).Get(ctx, down, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Status.CompletionTime != nil, fmt.Sprintf("suspend %v, succeeded %d", *j.Spec.Suspend, j.Status.Succeeded)
	})
	// The round after the down completed records the schema as the
	// second's again. A pin moved before that round would find the third's
	// migration still on record and hold the next release on a stale proof
	// (the down Job pruned with the render that replaced it), as a person
	// must then look; a workflow moves the next pin once the gate says so.
	a.waitFor("the gate to record the undo", time.Minute, func() (bool, string) {
		r := a.gateRecord()
		return r.Migrated == "", fmt.Sprintf("%+v", r)
	})
	if r := a.gateRecord(); r.Serving != second.Revision || r.Pinned != third.Revision {
		t.Errorf("the gate's record after the failed release: %+v, want %s serving and %s held", r, second.Tag(), third.Tag())
	}
	if !a.gateLogged("release held", map[string]string{"reason": "analysis-failed"}) {
		t.Errorf("the gate's round did not hold the third release as analysis-failed")
	}

	a.newerWhileAnalysed(created)
	a.anotherApplication()
}

// newerWhileAnalysed applies a newer render while an older one, whose
// migration ran, is analysed. Flagger restarts the analysis on the newer
// template, whose pods start at once; the gate holds them to may-start's
// rule, since the older migration was left applied, so Flagger fails the
// newer release at its threshold, nothing of either is promoted, the
// newer migration never starts and the gate reports the older one.
func (a *app) newerWhileAnalysed(created *podsCreated) {
	t := a.t
	t.Helper()
	ctx := context.Background()
	older := estate.Release{Version: "4.0.0", Revision: "sha256:" + strings.Repeat("4a", 32), TestedAgainst: second.Revision, Iterations: 30}
	newer := estate.Release{Version: "4.0.1", Revision: "sha256:" + strings.Repeat("4b", 32), TestedAgainst: second.Revision}
	a.release(older)
	a.phase("auth-api", flaggerv1.CanaryPhaseProgressing, 5*time.Minute)
	a.release(newer)
	for _, m := range estate.Members {
		a.waitFor(m.Process+" to be analysed at the newer release", 3*time.Minute, func() (bool, string) {
			return a.canaryRevision(m.Process) == newer.Revision, a.canaryRevision(m.Process)
		})
	}
	a.phase("auth-api", flaggerv1.CanaryPhaseFailed, 4*time.Minute)
	a.phase("auth-ui", flaggerv1.CanaryPhaseFailed, 3*time.Minute)
	if !a.saidAt("checks", "auth-api", "not yet", newer.Tag()) {
		t.Errorf("the newer release failed, but not on the gate's checks: %v", a.answers("checks", "auth-api"))
	}
	a.primariesRun(second.Version, "after a release superseded mid-analysis")
	if j, err := a.e.Node.Kube.BatchV1().Jobs(a.ns).Get(ctx, "auth-migration-"+newer.Tag(), metav1.GetOptions{}); err != nil || j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Errorf("the newer release's migration started on a proof that does not hold (%v)", err)
	}
	a.waitFor("the gate to report the older migration left applied", 2*time.Minute, func() (bool, string) {
		return a.gateLogged("migration not undone", map[string]string{"condition": "superseded", "migrated": releasemodel.RevisionTag(older.Revision)}), "not yet"
	})
	if at, ok := created.first(newer.Version); ok {
		t.Logf("the newer template's first pod started at %s, as Flagger restarts an analysis without asking may-start", at.Format(time.TimeOnly))
	}
}

// anotherApplication applies a render whose Canaries name another
// Application, whose inputs are not there: the gate cannot answer and
// nothing of the render starts.
func (a *app) anotherApplication() {
	t := a.t
	t.Helper()
	other := estate.Release{Version: "5.0.0", Revision: "sha256:" + strings.Repeat("5c", 32), TestedAgainst: second.Revision, Application: "billing"}
	a.release(other)
	a.waitFor("the gate to refuse a Canary of another Application", 3*time.Minute, func() (bool, string) {
		for _, s := range a.answers("may-start", "auth-ui") {
			if strings.HasPrefix(s, "cannot answer ") && strings.Contains(s, "billing-release-gate") {
				return true, s
			}
		}
		return false, fmt.Sprint(a.answers("may-start", "auth-ui"))
	})
	for _, m := range estate.Members {
		if got := a.primaryRelease(m.Process); got != second.Version {
			t.Errorf("%s's primary runs %s for a Canary of another Application, want %s", m.Process, got, second.Version)
		}
		if pods := a.copies(m.Process, other.Version); len(pods) > 0 {
			t.Errorf("a pod of a Canary of another Application started: %s", pods[0].Name)
		}
	}
}

// saidAt is whether the gate answered webhook for process at the revision
// tagged tag with outcome.
func (a *app) saidAt(webhook, process, outcome, tag string) bool {
	for _, s := range a.answers(webhook, process) {
		if strings.HasPrefix(s, outcome+" "+tag+":") {
			return true
		}
	}
	return false
}

// said is whether the gate answered webhook for process with outcome.
func (a *app) said(webhook, process, outcome string) bool {
	for _, s := range a.answers(webhook, process) {
		if strings.HasPrefix(s, outcome+" ") {
			return true
		}
	}
	return false
}

// podsCreated is when the first pod of each release was created, as a
// watch of the Application's pods saw them added.
type podsCreated struct {
	mu      sync.Mutex
	firstAt map[string]time.Time
}

// watchPods watches the Application's pods until the test ends.
func (a *app) watchPods() *podsCreated {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := a.e.Node.Kube.CoreV1().Pods(a.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		a.t.Fatalf("watch the pods: %v", err)
	}
	p := &podsCreated{firstAt: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			v := releaseOf(pod)
			p.mu.Lock()
			if at, seen := p.firstAt[v]; !seen || pod.CreationTimestamp.Time.Before(at) {
				p.firstAt[v] = pod.CreationTimestamp.Time
			}
			p.mu.Unlock()
		}
	}()
	a.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return p
}

func (p *podsCreated) first(version string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.firstAt[version]
	return at, ok
}

// releaseOf is the RELEASE a member's pod runs; "" for another pod.
func releaseOf(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, env := range c.Env {
			if env.Name == "RELEASE" {
				return env.Value
			}
		}
	}
	return ""
}
