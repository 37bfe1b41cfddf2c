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

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Three releases of the auth Application.
var (
	first  = release{version: "1.0.0", revision: "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"}
	second = release{version: "2.0.0", revision: "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca", testedAgainst: first.revision}
	third  = release{version: "3.0.0", revision: "sha256:9cca1f71bf19e0d3c8b5a4f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2", testedAgainst: second.revision,
		failing: map[string]bool{"auth-ui": true}}
)

// TestReleasesAlongTheWholePath delivers three releases of a two-member
// Application with a migration through the real Flux, the real Flagger as
// a pod and the Release Gate installed from its image:
//   - the first: Flux applies it, Flagger initializes both Canaries and the
//     gate records it as serving;
//   - the second: the gate's round starts its migration under proof as a
//     real pod; no pod of the new templates starts before it completed; the
//     gate's own traffic reaches each new copy through its Canary Service;
//     both members are promoted together and the record says it serves;
//   - the third: auth-ui's new copy fails the gate's own traffic, Flagger
//     fails it at its threshold, auth-api is not promoted alone, and both
//     primaries keep the second release.
func TestReleasesAlongTheWholePath(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()

	start := time.Now()
	art := a.initialized(first)
	t.Logf("the first release: pushed to serving in %s", time.Since(start).Round(time.Second))
	if r := a.expectRecord(first.version, rr.StateHealthy, evDeployed); r.Image != art.Digest || r.GitRevision != first.commit() {
		t.Errorf("the first release's record names %q at %q, want %q at %q", r.Image, r.GitRevision, art.Digest, first.commit())
	}

	// Every pod created from here on, with when.
	created := a.watchPods()
	start = time.Now()
	art = a.release(second)
	up := "auth-migration-" + second.tag()
	var migrated time.Time
	a.waitFor("the migration of the second release to complete", 4*time.Minute, func() (bool, string) {
		j, err := a.e.n.Kube.BatchV1().Jobs(a.ns).Get(ctx, up, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if j.Status.CompletionTime != nil {
			migrated = j.Status.CompletionTime.Time
			return true, ""
		}
		for _, m := range members {
			if p := a.canary(m.process).Status.Phase; p == flaggerv1.CanaryPhaseProgressing || p == flaggerv1.CanaryPhasePromoting {
				t.Fatalf("%s is %s before the migration completed", m.process, p)
			}
		}
		return false, fmt.Sprintf("suspend %v, active %d", *j.Spec.Suspend, j.Status.Active)
	})
	for _, m := range members {
		a.phase(m.process, flaggerv1.CanaryPhaseSucceeded, 5*time.Minute)
		if got := a.primaryRelease(m.process); got != second.version {
			t.Errorf("%s's primary runs %s, want %s", m.process, got, second.version)
		}
	}
	a.serving(second.revision, 2*time.Minute)
	t.Logf("the second release: pushed to serving in %s", time.Since(start).Round(time.Second))
	a.expectRecord(second.version, rr.StateHealthy, evUpgraded)
	a.expectRecord(first.version, rr.StateSuperseded, "")
	if first, ok := created.first(second.version); !ok {
		t.Errorf("no pod of the second release was seen")
	} else if first.Before(migrated) {
		t.Errorf("a pod of the second release was created at %s, before its migration completed at %s", first, migrated)
	}
	if err := a.e.applied(ctx, a.ns, art.Digest); err != nil {
		t.Error(err)
	}
	for _, m := range members {
		if !a.said("checks", m.process, "yes") {
			t.Errorf("the gate never passed %s's own traffic: %v", m.process, a.answers("checks", m.process))
		}
	}

	// The third: auth-ui's new copy answers 503 to the gate's own traffic.
	start = time.Now()
	a.release(third)
	a.phase("auth-ui", flaggerv1.CanaryPhaseFailed, 6*time.Minute)
	t.Logf("the third release: pushed to failed in %s", time.Since(start).Round(time.Second))
	if r := a.expectRecord(third.version, rr.StateAborted, evFailed); r.LastError == "" {
		t.Errorf("the aborted record keeps no error")
	}
	if !a.said("checks", "auth-ui", "not yet") {
		t.Errorf("auth-ui failed, but not on the gate's own traffic: %v", a.answers("checks", "auth-ui"))
	}
	a.waitFor("auth-api not to be promoted alone", 2*time.Minute, func() (bool, string) {
		p := a.canary("auth-api").Status.Phase
		return p == flaggerv1.CanaryPhaseFailed || p == flaggerv1.CanaryPhaseWaitingPromotion, string(p)
	})
	for _, m := range members {
		if got := a.primaryRelease(m.process); got != second.version {
			t.Errorf("%s's primary runs %s after the failed release, want %s", m.process, got, second.version)
		}
	}
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
	w, err := a.e.n.Kube.CoreV1().Pods(a.ns).Watch(ctx, metav1.ListOptions{})
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
