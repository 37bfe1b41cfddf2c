package releasegate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// The timings the failover tests run the Lease with: short, so a kill costs
// seconds, in the same ratio as the defaults.
var testLeader = releasegate.LeaderSettings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}

// replica is one release-gate process of a pair sharing the Lease.
type replica struct {
	name   string
	cmd    *exec.Cmd
	logs   *testenv.LogBuffer
	exited chan struct{}
	mu     sync.Mutex
	// ledAt is when the replica logged that it leads; zero until then.
	ledAt time.Time
}

// pair runs release-gate binaries under the gate's grant against cp, each a
// replica of its own name, all with the same Lease timings.
type pair struct {
	t          testing.TB
	bin        string
	kubeconfig string
	leader     releasegate.LeaderSettings
	started    int
	all        []*replica
}

func newPair(t testing.TB, cp *testenv.ControlPlane, leader releasegate.LeaderSettings) *pair {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "release-gate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/release-gate").CombinedOutput(); err != nil {
		t.Fatalf("build the gate: %v: %s", err, out)
	}
	cp.Grant(t, gateRBAC, gateNS, gateSA)
	kubeconfig, err := cp.KubeconfigAs(t.TempDir(), gateNS, gateSA)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, bin: bin, kubeconfig: kubeconfig, leader: leader}
	t.Cleanup(func() {
		for _, r := range p.all {
			r.kill()
		}
	})
	return p
}

// start runs one more replica.
func (p *pair) start() *replica {
	p.t.Helper()
	p.started++
	addr, err := testenv.FreeAddress()
	if err != nil {
		p.t.Fatal(err)
	}
	r := &replica{name: fmt.Sprintf("gate-%d", p.started), logs: &testenv.LogBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(p.bin) //nolint:gosec // the gate just built
	r.cmd.Env = append(os.Environ(), "ADDR="+addr, "KUBECONFIG="+p.kubeconfig, "GATE_NAMESPACE="+gateNS,
		"FLAGGER_NAMESPACE="+gateNS, "POD_NAME="+r.name,
		"LEADER_LEASE_DURATION="+p.leader.LeaseDuration.String(),
		"LEADER_RENEW_DEADLINE="+p.leader.RenewDeadline.String(),
		"LEADER_RETRY_PERIOD="+p.leader.RetryPeriod.String())
	out, err := r.cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	r.cmd.Stdout = r.logs
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", r.name, err)
	}
	go r.read(out)
	p.all = append(p.all, r)
	return r
}

// read keeps the replica's log and notes when it first says it leads.
func (r *replica) read(out io.Reader) {
	defer close(r.exited)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		_, _ = r.logs.Write([]byte(line + "\n"))
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "leading" {
			r.mu.Lock()
			if r.ledAt.IsZero() {
				r.ledAt = time.Now()
			}
			r.mu.Unlock()
		}
	}
	_ = r.cmd.Wait()
}

func (r *replica) led() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledAt
}

func (r *replica) signal(sig syscall.Signal) {
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

func (r *replica) kill() { r.signal(syscall.SIGKILL) }

// leaderAmong waits until one of rs leads and returns it.
func (p *pair) leaderAmong(deadline time.Duration, rs ...*replica) *replica {
	p.t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		for _, r := range rs {
			if !r.led().IsZero() {
				return r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var logs []string
	for _, r := range rs {
		logs = append(logs, r.name+":\n"+r.logs.String())
	}
	p.t.Fatalf("no replica led within %s:\n%s", deadline, strings.Join(logs, "\n"))
	return nil
}

// failover stops the leader with sig and returns the replica that leads
// next, with how long after the signal it said so. The stopped replica is
// started again, to be the next failover's follower.
func (p *pair) failover(leader, follower *replica, sig syscall.Signal, deadline time.Duration) (*replica, *replica, time.Duration) {
	p.t.Helper()
	at := time.Now()
	leader.signal(sig)
	next := p.leaderAmong(deadline, follower)
	return next, p.start(), next.led().Sub(at)
}

// TestLeaderSettings holds the timings to the rule that keeps two replicas
// from acting at once.
func TestLeaderSettings(t *testing.T) {
	ok := releasegate.DefaultLeader
	ok.Identity = "gate-0"
	cases := []struct {
		name string
		edit func(*releasegate.LeaderSettings)
		err  string
	}{
		{"the defaults", func(*releasegate.LeaderSettings) {}, ""},
		{"no identity", func(s *releasegate.LeaderSettings) { s.Identity = "" }, "POD_NAME"},
		{"no retry period", func(s *releasegate.LeaderSettings) { s.RetryPeriod = 0 }, "LEADER_RETRY_PERIOD"},
		{"a renew deadline within a jittered retry", func(s *releasegate.LeaderSettings) { s.RenewDeadline = 2 * time.Second }, "LEADER_RENEW_DEADLINE"},
		{"a lease no longer than the renew deadline", func(s *releasegate.LeaderSettings) { s.LeaseDuration = s.RenewDeadline }, "two replicas could act at once"},
	}
	for _, c := range cases {
		s := ok
		c.edit(&s)
		err := s.Check()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: Check() = %v, want an error naming %q", c.name, err, c.err)
		}
	}
}

// TestTwoReplicasNeverStartAMigrationTwice runs the gate as two processes
// sharing the Lease under the gate's grant. Each turn an Application with a
// proven migration appears and the leader is killed at once (SIGKILL, most
// likely in the round that starts it) or stopped (SIGTERM): the other leads
// within a lease duration plus a retry (a retry, once the Lease was
// released), every migration is started, and none twice.
func TestTwoReplicasNeverStartAMigrationTwice(t *testing.T) {
	cp := testenv.Own(t)
	p := newPair(t, cp, testLeader)
	a, b := p.start(), p.start()
	leader := p.leaderAmong(30*time.Second, a, b)
	follower := map[*replica]*replica{a: b, b: a}[leader]
	if !leader.led().IsZero() && !follower.led().IsZero() {
		t.Fatal("both replicas lead")
	}

	starts := watchStarts(t, cp)
	var jobs []string
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGKILL, syscall.SIGTERM, syscall.SIGKILL} {
		ns := cp.Namespace(t)
		proven := &app{ns: ns, name: "shop", migration: true, testedAgainst: prevRev,
			members: []member{{process: "shop-api", phase: "Waiting", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
			jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
			record:  &release.Record{Namespace: ns, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
		proven.apply(t, cp)
		jobs = append(jobs, ns+"/shop-migration-"+tag)
		deadline := testLeader.LeaseDuration + testLeader.RetryPeriod + 5*time.Second
		var took time.Duration
		leader, follower, took = p.failover(leader, follower, sig, deadline)
		t.Logf("turn %d: %s, %s leads after %s", i, sig, leader.name, took.Round(time.Millisecond))
	}
	// The last leader's rounds start what is left.
	wait.Poll{Within: time.Minute, Every: 100 * time.Millisecond}.Until(t, "every migration started", func() (bool, string) {
		var left []string
		for _, j := range jobs {
			ns, name, _ := strings.Cut(j, "/")
			if suspended(t, cp, ns, name) {
				left = append(left, j)
			}
		}
		return len(left) == 0, fmt.Sprintf("still suspended: %v", left)
	})
	for _, j := range jobs {
		if n := starts.count(j); n != 1 {
			t.Errorf("Job %s was started %d times", j, n)
		}
	}
	logged := map[string]int{}
	for _, r := range p.all {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			var l struct{ Msg, Namespace, Job string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "migration started" {
				logged[l.Namespace+"/"+l.Job]++
			}
		}
	}
	for j, n := range logged {
		if n > 1 {
			t.Errorf("Job %s was started by %d rounds", j, n)
		}
	}
}

// starts counts, per Job, the times a watch saw it go from suspended to
// started.
type starts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *starts) count(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[job]
}

func watchStarts(t testing.TB, cp *testenv.ControlPlane) *starts {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cp.Kube.BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &starts{n: map[string]int{}}
	wasSuspended := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			key := j.Namespace + "/" + j.Name
			now := j.Spec.Suspend != nil && *j.Spec.Suspend
			s.mu.Lock()
			if wasSuspended[key] && !now {
				s.n[key]++
			}
			wasSuspended[key] = now
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return s
}
