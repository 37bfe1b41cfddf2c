package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// newRealNode is a node on the real nats-server.
func newRealNode(t *testing.T) *node {
	t.Helper()
	n := newNode(t)
	n.bus = bustest.Open(t, testenv.NewNATS(t).URL, 1)
	return n
}

// haves is every have the node writes of web from now on, in order.
type haves struct {
	t  *testing.T
	n  *node
	ch chan bus.Have
}

func (n *node) watchHaves(t *testing.T) *haves {
	t.Helper()
	key, _ := bus.HaveKey("n1", "web")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := n.bus.Haves.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan bus.Have, 1024)
	go func() {
		for entry := range w.Updates() {
			if entry == nil {
				continue
			}
			if h, err := bus.DecodeHave(entry.Value()); err == nil {
				ch <- h
			}
		}
	}()
	return &haves{t: t, n: n, ch: ch}
}

// next is the first have from now on that satisfies ok, within 30 s.
func (h *haves) next(what string, ok func(bus.Have) bool) bus.Have {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	var last bus.Have
	for {
		select {
		case last = <-h.ch:
			if ok(last) {
				return last
			}
		case <-deadline:
			h.t.Fatalf("no have %s within 30 s; last %+v\n%s", what, last, h.n.logs)
		}
	}
}

// pid is the process group the version that runs of web was started as.
func (n *node) pid() int {
	n.t.Helper()
	_, dir, err := agent.Layout{Root: n.root}.Current("web")
	if err != nil {
		n.t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ".pid"))
	if err != nil {
		n.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		n.t.Fatal(err)
	}
	return pid
}

// TestARunningModuleIsSupervised: a module whose check starts failing is
// said unhealthy within an interval and healthy again once it passes; one
// whose process is killed is said failed and started again, healthy.
func TestARunningModuleIsSupervised(t *testing.T) {
	n := newRealNode(t)
	n.start(func(a *agent.Agent) { a.Restart = agent.Backoff{First: 300 * time.Millisecond, Most: time.Second} })
	haves := n.watchHaves(t)
	sick := filepath.Join(t.TempDir(), "sick")
	d1, _ := n.compose(n.signer, "f1", map[string]string{"MESH_TEST_SICK": sick})
	n.want("f1", d1)
	haves.next("f1 running healthy", running("f1"))

	if err := os.WriteFile(sick, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := haves.next("f1 unhealthy", func(h bus.Have) bool { return h.Health == bus.Unhealthy })
	if h.Fingerprint != "f1" || h.Phase != bus.PhaseRunning || !strings.Contains(h.Reason, "503") {
		t.Fatalf("have %+v", h)
	}
	if err := os.Remove(sick); err != nil {
		t.Fatal(err)
	}
	haves.next("f1 healthy again", running("f1"))

	before := n.pid()
	if err := syscall.Kill(-before, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h = haves.next("f1 failed", func(h bus.Have) bool { return h.Phase == bus.PhaseFailed })
	if h.Fingerprint != "f1" || h.Health != bus.Unhealthy || !strings.Contains(h.Reason, "the process ended") {
		t.Fatalf("have %+v", h)
	}
	haves.next("f1 started again, healthy", running("f1"))
	if after := n.pid(); after == before || n.serves() != "f1" {
		t.Fatalf("pid %d (was %d), serving %q", after, before, n.serves())
	}
}

// TestAVersionThatFailsItsHealthGoesBack: a version that does not pass its
// check within HealthWithin gives way to the one that last ran healthy;
// the have says what runs and the version it went back from, the more so
// after the agent restarts, which does not try that version again; the
// next version ends the rollback.
func TestAVersionThatFailsItsHealthGoesBack(t *testing.T) {
	n := newRealNode(t)
	n.heartbeat = 200 * time.Millisecond
	quick := func(a *agent.Agent) { a.HealthWithin = time.Second }
	first := n.start(quick)
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))

	d2, _ := n.compose(n.signer, "f2", map[string]string{"MESH_TEST_UNHEALTHY": "1"})
	n.want("f2", d2)
	back := func(h bus.Have) bool {
		return h.Phase == bus.PhaseRolledBack && h.Fingerprint == "f1" && h.Digest == d1 && h.Health == bus.Healthy &&
			h.Attempt == bus.Attempt{Fingerprint: "f2", Digest: d2}
	}
	h := n.have("rolled back to f1", back)
	if !strings.Contains(h.Reason, "did not pass its health") || n.serves() != "f1" {
		t.Fatalf("have %+v, serving %q", h, n.serves())
	}
	if r, _, _ := (agent.Layout{Root: n.root}).Current("web"); r.Fingerprint != "f1" {
		t.Fatalf("current names %+v", r)
	}

	// A new agent reads the rollback from disk and does not apply f2 again
	// for the want it failed under: every have it writes, heartbeats
	// through several passes, says the rollback.
	n.end(first)
	haves := n.watchHaves(t)
	n.start(quick)
	var at time.Time
	for range 3 {
		h := haves.next("a have", func(bus.Have) bool { return true })
		if !back(h) || !h.At.After(at) {
			t.Fatalf("after the restart the have is %+v", h)
		}
		at = h.At
	}

	d3, _ := n.compose(n.signer, "f3", nil)
	n.want("f3", d3)
	h = n.have("f3 running healthy", running("f3"))
	if h.Attempt != (bus.Attempt{}) || n.serves() != "f3" {
		t.Fatalf("have %+v, serving %q", h, n.serves())
	}
}

// gate is a backup seat that answers when the test says.
type gate struct {
	asked  chan string
	answer chan error
}

func (g gate) BackUp(_ context.Context, module, _ string) error {
	g.asked <- module
	return <-g.answer
}

// TestTheHaveNamesWhatRuns: while a backup is under way, and after it
// failed, the have names the version that runs, healthy, and the want
// beside it as the attempt.
func TestTheHaveNamesWhatRuns(t *testing.T) {
	n := newRealNode(t)
	g := gate{asked: make(chan string, 2), answer: make(chan error, 2)}
	g.answer <- nil
	n.startWith(g)
	d1, _ := n.composeDoc(n.signer, "f1", nil, true)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))
	<-g.asked

	d2, _ := n.composeDoc(n.signer, "f2", nil, true)
	n.want("f2", d2)
	<-g.asked
	tries := bus.Attempt{Fingerprint: "f2", Digest: d2}
	h := n.have("applying f2", func(h bus.Have) bool { return h.Phase == bus.PhaseApplying })
	if h.Fingerprint != "f1" || h.Digest != d1 || h.Health != bus.Healthy || h.Attempt != tries {
		t.Fatalf("while the seat is silent the have is %+v", h)
	}
	g.answer <- errors.New("the disk is full")
	h = n.have("f2 failed", func(h bus.Have) bool { return h.Phase == bus.PhaseFailed })
	if h.Fingerprint != "f1" || h.Health != bus.Healthy || h.Attempt != tries || !strings.Contains(h.Reason, "the disk is full") || n.serves() != "f1" {
		t.Fatalf("after the failed backup the have is %+v, serving %q", h, n.serves())
	}

	// A whole apply, have by have: what runs named at each step.
	haves := n.watchHaves(t)
	d3, _ := n.composeDoc(n.signer, "f3", nil, true)
	g.answer <- nil
	n.want("f3", d3)
	<-g.asked
	f3 := bus.Attempt{Fingerprint: "f3", Digest: d3}
	// The watch gives the have before the apply first.
	haves.next("f1 healthy beside f3 while backing up", func(h bus.Have) bool {
		return h.Phase == bus.PhaseApplying && h.Fingerprint == "f1" && h.Health == bus.Healthy && h.Attempt == f3
	})
	for _, step := range []struct {
		what string
		ok   func(bus.Have) bool
	}{
		{"f1 stopping", func(h bus.Have) bool {
			return h.Phase == bus.PhaseApplying && h.Fingerprint == "f1" && h.Health == bus.Unknown && h.Attempt == f3
		}},
		{"f3 started, proving itself", func(h bus.Have) bool {
			return h.Phase == bus.PhaseApplying && h.Fingerprint == "f3" && h.Health == bus.Unknown && h.Attempt == f3
		}},
		{"f3 running healthy", func(h bus.Have) bool { return running("f3")(h) && h.Attempt == bus.Attempt{} }},
	} {
		if h := haves.next(step.what, func(bus.Have) bool { return true }); !step.ok(h) {
			t.Fatalf("where the have should say %s it is %+v", step.what, h)
		}
	}
}

// TestARestartedAgentRestartsNothingThatDidNotChange: an agent stopped
// alone leaves its module running; the next one takes that process over,
// serving all along, and supervises it as its own.
func TestARestartedAgentRestartsNothingThatDidNotChange(t *testing.T) {
	n := newRealNode(t)
	first := n.start(func(a *agent.Agent) { a.Restart = agent.Backoff{First: 300 * time.Millisecond, Most: time.Second} })
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))
	before := n.pid()
	n.leave(first)
	left := time.Now()
	if n.serves() != "f1" {
		t.Fatalf("with its agent stopped the module answers %q", n.serves())
	}
	n.start(func(a *agent.Agent) { a.Restart = agent.Backoff{First: 300 * time.Millisecond, Most: time.Second} })
	n.have("f1 said again by the new agent", func(h bus.Have) bool { return running("f1")(h) && h.At.After(left) })
	if after := n.pid(); after != before || syscall.Kill(before, 0) != nil || n.serves() != "f1" {
		t.Fatalf("pid %d, was %d; serving %q", after, before, n.serves())
	}

	// Taken over, it is supervised: killed, it is started again.
	haves := n.watchHaves(t)
	if err := syscall.Kill(-before, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	haves.next("f1 failed", func(h bus.Have) bool { return h.Phase == bus.PhaseFailed })
	haves.next("f1 started again, healthy", running("f1"))
	if after := n.pid(); after == before || n.serves() != "f1" {
		t.Fatalf("pid %d (was %d), serving %q", after, before, n.serves())
	}
}
