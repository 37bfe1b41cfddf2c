package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// The estate's fixed names: where the gate and Flagger run, and the name
// deploy-kit's webhooks reach the gate by.
const (
	gateNS   = "delivery-system"
	gateHost = "release-gate.delivery-system.svc.cluster.local"
)

// gateAddress is the loopback host:port, port 8080 as the webhooks name it,
// that gateHost means to Flagger; TestMain picks an address of this run's
// own, so two runs side by side do not collide.
var gateAddress string

// Three revisions of the auth Application, each with its tag.
var revisions = []string{
	"sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a",
	"sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca",
	"sha256:9cca1f71bf19e0d3c8b5a4f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2",
}

func tag(revision string) string { return releasemodel.RevisionTag(revision) }

// gateBin is the release-gate binary TestMain builds, beside recordBin.
var gateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-gate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if gateAddress, err = testenv.FreeLoopback(context.Background(), 8080); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gateBin, recordBin = filepath.Join(dir, "release-gate"), filepath.Join(dir, "release-record")
	build := exec.Command("go", "build", "-o", dir, "../../cmd/release-gate", "../../cmd/release-record")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the release gate and the release record: %v: %s\n", err, out)
		os.Exit(1)
	}
	code := testenv.Main(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// estate is one test's Application: a namespace of its own in the shared
// cluster, loopback servers standing in for each member's new copy behind its
// Canary service, and the gate process.
type estate struct {
	t       *testing.T
	c       *testenv.Cluster
	ns      string
	members map[string]*member
	gate    *process
}

// member is a loopback server a member's Canary service name reaches; the
// test makes it fail.
type member struct {
	process string
	addr    string
	failing atomic.Bool
	srv     *http.Server
}

func (m *member) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if m.failing.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// newEstate starts (once per package) the cluster Flagger runs in, makes the
// test's namespace, serves its members and starts the gate under its grant.
func newEstate(t *testing.T) *estate {
	t.Helper()
	gateIP, _, _ := net.SplitHostPort(gateAddress)
	c := testenv.SharedCluster(t, testenv.ClusterOptions{Hosts: map[string]string{gateHost: gateIP}})
	e := &estate{t: t, c: c, ns: c.Namespace(t), members: map[string]*member{}}
	// The namespace controller runs here: deleting the namespace stops
	// Flagger and the next test's gate from working on this test's release.
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{})
	})
	for _, p := range []string{"auth-api", "auth-ui"} {
		// Each member at the Canary service's port, on an address of its own.
		ln, err := testenv.ListenLoopback(context.Background(), 8080)
		if err != nil {
			t.Fatalf("serve member %s: %v", p, err)
		}
		m := &member{process: p, addr: ln.Addr().String()}
		m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = m.srv.Serve(ln) }()
		t.Cleanup(func() { _ = m.srv.Close() })
		e.members[p] = m
	}
	e.gate = e.startGate()
	return e
}

// process is a service binary the test started: a gate replica, or the
// release record.
type process struct {
	cmd    *exec.Cmd
	logs   *testenv.LogBuffer
	exited chan struct{}
}

// startGate runs the gate binary as its ServiceAccount under
// deploy/release-gate/rbac.yaml at gateAddress, resolving the members' Canary
// services through a private /etc/hosts.
func (e *estate) startGate() *process { return e.startGateAt(gateAddress) }

// startGateAt runs one more gate replica at addr, with env added to its
// environment (its name on the Lease, the Lease's timings).
func (e *estate) startGateAt(addr string, env ...string) *process {
	t := e.t
	t.Helper()
	kubeconfig := e.c.GrantKubeconfig(t, "../../deploy/release-gate/rbac.yaml", gateNS, "release-gate")
	hosts := map[string]string{}
	for p, m := range e.members {
		host, _, _ := net.SplitHostPort(m.addr)
		hosts[p+"-canary."+e.ns+".svc.cluster.local"] = host
	}
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte(testenv.HostsFile(hosts)), 0o600); err != nil {
		t.Fatal(err)
	}
	args, err := testenv.PrivateHosts(context.Background(), hostsFile, []string{gateBin})
	if err != nil {
		t.Fatal(err)
	}
	env = append([]string{
		"ADDR=" + addr,
		"KUBECONFIG=" + kubeconfig,
		"FLAGGER_NAMESPACE=" + testenv.FlaggerNamespace,
		"FLAGGER_SELECTOR=app.kubernetes.io/instance=flagger",
		"FLAGGER_SERVICE_ACCOUNT=flagger",
		"GATE_NAMESPACE=" + gateNS,
	}, env...)
	return e.startProcess("the gate", args, env, addr)
}

// startProcess runs a service binary with env added to the test's
// environment, in a process group of its own that dies with the test, and
// waits until it answers /readyz at addr.
func (e *estate) startProcess(what string, args, env []string, addr string) *process {
	t := e.t
	t.Helper()
	g := &process{logs: &testenv.LogBuffer{}, exited: make(chan struct{})}
	g.cmd = exec.Command(args[0], args[1:]...) //nolint:gosec // a binary TestMain built
	g.cmd.Env = append(os.Environ(), env...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(g.stop)
	e.waitFor(what+" to be ready", time.Minute, func() (bool, string) {
		select {
		case <-g.exited:
			t.Fatalf("%s exited:\n%s", what, g.logs)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz") //nolint:noctx // a probe with the client's timeout
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return g
}

// stop ends the process with SIGTERM, as a pod's deletion would, and waits.
func (g *process) stop() {
	select {
	case <-g.exited:
		return
	default:
	}
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.exited
	}
}

// answers are the gate's logged answers to one webhook in the estate's
// namespace: each its outcome ("yes", "not yet", "cannot answer") and reason.
func (e *estate) answers(webhook, process string) []answer {
	var out []answer
	for _, line := range strings.Split(e.gate.logs.String(), "\n") {
		var l struct {
			Msg, Webhook, Namespace, Process, Revision, Reason, Cause string
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Namespace != e.ns || l.Webhook != webhook || l.Process != process {
			continue
		}
		switch l.Msg {
		case "yes", "not yet", "cannot answer":
			out = append(out, answer{outcome: l.Msg, revision: l.Revision, reason: l.Reason + l.Cause})
		}
	}
	return out
}

type answer struct{ outcome, revision, reason string }

// waitFor polls cond every half second until it holds, failing the test
// with what it last said once deadline has passed.
func (e *estate) waitFor(what string, deadline time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			e.t.Fatalf("waited %s for %s; last: %s\ngate log:\n%s\nFlagger log (end):\n%s", deadline, what, last, e.gate.tail(), tail(e.c.FlaggerLogs.String()))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (g *process) tail() string { return tail(g.logs.String()) }

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}

// canary reads a member's Canary.
func (e *estate) canary(process string) *flaggerv1.Canary {
	e.t.Helper()
	var c flaggerv1.Canary
	if err := e.c.Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: process}, &c); err != nil {
		e.t.Fatalf("read Canary %s: %v", process, err)
	}
	return &c
}

// phase waits until process's Canary is in phase.
func (e *estate) phase(process string, phase flaggerv1.CanaryPhase, deadline time.Duration) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("Canary %s to be %s", process, phase), deadline, func() (bool, string) {
		c := e.canary(process)
		return c.Status.Phase == phase, fmt.Sprintf("%s, iterations %d, failed checks %d", c.Status.Phase, c.Status.Iterations, c.Status.FailedChecks)
	})
}

func (e *estate) deployment(name string) *appsv1.Deployment {
	e.t.Helper()
	d, err := e.c.Kube.AppsV1().Deployments(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("read Deployment %s: %v", name, err)
	}
	return d
}

func (e *estate) job(name string) *batchv1.Job {
	e.t.Helper()
	j, err := e.c.Kube.BatchV1().Jobs(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("read Job %s: %v", name, err)
	}
	return j
}

// record is the gate's record of the estate's Application; ok is false
// while there is none.
func (e *estate) record() (releasemodel.Record, bool) {
	cm, err := e.c.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), releasemodel.RecordConfigMap(e.ns, "auth"), metav1.GetOptions{})
	if err != nil {
		return releasemodel.Record{}, false
	}
	r, err := releasemodel.DecodeRecord(e.ns, "auth", cm.Data)
	return r, err == nil
}

// serving waits until the gate's record says revision serves.
func (e *estate) serving(revision string, deadline time.Duration) {
	e.t.Helper()
	e.waitFor("the record to say "+tag(revision)+" serves", deadline, func() (bool, string) {
		r, ok := e.record()
		return ok && r.Serving == revision, fmt.Sprintf("%+v", r)
	})
}

// podsRunning lists the pods of the estate whose container runs image.
func (e *estate) podsRunning(image string) []corev1.Pod {
	e.t.Helper()
	list, err := e.c.Kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		for _, c := range p.Spec.Containers {
			if c.Image == image {
				out = append(out, p)
			}
		}
	}
	return out
}

// restart makes the first pod running image report restarts, as a kubelet
// would for a container that keeps crashing; kwok leaves the count alone.
func (e *estate) restart(image string, restarts int32) {
	e.t.Helper()
	var pod corev1.Pod
	e.waitFor("a pod running "+image, time.Minute, func() (bool, string) {
		for _, p := range e.podsRunning(image) {
			if len(p.Status.ContainerStatuses) > 0 && p.DeletionTimestamp == nil {
				pod = p
				return true, ""
			}
		}
		return false, "none with a container status"
	})
	pod.Status.ContainerStatuses[0].RestartCount = restarts
	if _, err := e.c.Kube.CoreV1().Pods(e.ns).UpdateStatus(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("restart pod %s: %v", pod.Name, err)
	}
}

// podStarts is when the first pod of each image was created, as a watch of
// the estate's namespace saw pods added.
type podStarts struct {
	mu      sync.Mutex
	firstAt map[string]time.Time
}

// watchPods watches the estate's pods until the test ends.
func (e *estate) watchPods() *podStarts {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.c.Kube.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		e.t.Fatalf("watch the pods: %v", err)
	}
	s := &podStarts{firstAt: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			s.mu.Lock()
			for _, c := range p.Spec.Containers {
				if at, seen := s.firstAt[c.Image]; !seen || p.CreationTimestamp.Time.Before(at) {
					s.firstAt[c.Image] = p.CreationTimestamp.Time
				}
			}
			s.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return s
}

func (s *podStarts) first(image string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.firstAt[image]
	return at, ok
}
