package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestAReleaseThroughALeaderKilledMidRelease runs the gate as two replicas
// and walks the second release through the real Flagger. The leader, which
// Flagger's questions reach, is killed with SIGKILL the moment its round has
// started the migration; a new replica takes its address (as a replaced pod
// behind the Service would), one of the two leads once the dead one's Lease
// has expired, and the release completes: both Canaries promoted, the record
// written by the new leader, and the migration started once.
func TestAReleaseThroughALeaderKilledMidRelease(t *testing.T) {
	e := newEstate(t)
	e.initialized()
	first := e.gate
	waitLeading(e, first, "the first replica", time.Minute)

	addr, err := testenv.FreeLoopback(context.Background(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	other := e.startGateAt(addr, "POD_NAME=gate-other")
	if led(other) {
		t.Fatal("the second replica leads while the first holds the Lease")
	}

	up := "auth-migration-" + tag(second.revision)
	starts := watchJobStarts(e)
	e.apply(second.core(e.ns))
	e.apply(second.canaries(e.ns))
	e.waitFor("the leader's round to start the migration", 2*time.Minute, func() (bool, string) {
		j := e.job(up)
		return j.Spec.Suspend != nil && !*j.Spec.Suspend, "still suspended"
	})
	_ = syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL)
	<-first.exited
	killed := time.Now()
	e.gate = e.startGateAt(gateAddress, "POD_NAME=gate-replaced")

	// The default Lease: 15 s, retried every 2 s. Either replica may take
	// it; never both.
	e.waitFor("a replica to lead after the kill", 15*time.Second+2*time.Second+10*time.Second, func() (bool, string) {
		return led(other) || led(e.gate), "none leads"
	})
	t.Logf("a replica led %s after the kill", time.Since(killed).Round(time.Second))
	for _, p := range []string{"auth-api", "auth-ui"} {
		e.phase(p, flaggerv1.CanaryPhaseSucceeded, 4*time.Minute)
	}
	for p, img := range second.images {
		if got := e.deployment(p + "-primary").Spec.Template.Spec.Containers[0].Image; got != img {
			t.Errorf("%s's primary runs %s, want %s", p, got, img)
		}
	}
	e.serving(second.revision, time.Minute)

	if n := starts.count(up); n != 1 {
		t.Errorf("the migration Job was started %d times, want once", n)
	}
	var logged []string
	for _, g := range []*process{first, other, e.gate} {
		for _, line := range strings.Split(g.logs.String(), "\n") {
			var l struct{ Msg, Namespace, Job string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "migration started" && l.Namespace == e.ns && l.Job == up {
				logged = append(logged, line)
			}
		}
	}
	if len(logged) != 1 {
		t.Errorf("%d rounds logged the migration's start, want 1:\n%s", len(logged), strings.Join(logged, "\n"))
	}
	if led(other) && led(e.gate) {
		t.Error("both replicas led after the kill")
	}
}

// led reports whether g has logged that it leads.
func led(g *process) bool {
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "leading" {
			return true
		}
	}
	return false
}

func waitLeading(e *estate, g *process, who string, deadline time.Duration) {
	e.t.Helper()
	e.waitFor(who+" to lead", deadline, func() (bool, string) { return led(g), "not leading" })
}

// jobStarts counts, per Job of the estate, the times a watch saw it go from
// suspended to started.
type jobStarts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *jobStarts) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

func watchJobStarts(e *estate) *jobStarts {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.c.Kube.BatchV1().Jobs(e.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	s := &jobStarts{n: map[string]int{}}
	wasSuspended := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			now := j.Spec.Suspend != nil && *j.Spec.Suspend
			s.mu.Lock()
			if wasSuspended[j.Name] && !now {
				s.n[j.Name]++
			}
			wasSuspended[j.Name] = now
			s.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return s
}
