package wholepath_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/estate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

// TestMain runs the tests, stops the node, and fails the run when the node
// left anything on this machine.
func TestMain(m *testing.M) {
	flag.Parse()
	runAllAtOnce()
	code := testenv.Main(m)
	if left := testenv.NodeLeftovers(); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "the node left behind:", strings.Join(left, "; "))
		code = 1
	}
	os.Exit(code)
}

// sideBySide is how many of the package's tests run at once unless -parallel
// says otherwise: every test that runs side by side, as they spend their
// time waiting on the node and Flagger's ticks, not on a core. go test's
// default, GOMAXPROCS, would run them two by two on a machine of two cores
// and make the package take its tests' sum rather than the longest one.
const sideBySide = 8

func runAllAtOnce() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", fmt.Sprint(sideBySide)); err != nil {
			fmt.Fprintln(os.Stderr, "set -parallel:", err)
			os.Exit(2)
		}
	}
}

// gateNS is where the product and Flagger run.
const gateNS = estate.GateNamespace

// The release record's cluster and environment on the node.
const (
	recordCluster = estate.RecordCluster
	recordEnv     = estate.RecordEnvironment
)

var shared struct {
	once sync.Once
	e    *estate.Estate
	err  error
}

// theEstate starts the node and installs the estate on it once: Flux,
// Flagger and the product through Flux, as a platform team would.
func theEstate(t *testing.T) *estate.Estate {
	t.Helper()
	shared.once.Do(func() { shared.e, shared.err = startEstate(t) })
	if shared.err != nil {
		t.Fatalf("no estate on a node for this test: %v", shared.err)
	}
	return shared.e
}

// startEstate builds the member image, takes the machine's node (waiting,
// within its own bound, for another run's to stop) and only then gives the
// install its 15 minutes, so a wait for the node does not eat them.
func startEstate(t *testing.T) (*estate.Estate, error) {
	dir, err := os.MkdirTemp("", "wholepath-")
	if err != nil {
		return nil, err
	}
	build, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	member, err := testenv.BuildMemberImage(build, dir)
	cancel()
	if err != nil {
		return nil, err
	}
	say := func(s string) { t.Log(s) }
	n := testenv.SharedNode(t, testenv.NodeOptions{Images: []string{member}, Say: say})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e, err := estate.Install(ctx, n, estate.Options{Root: filepath.Join("..", "..", ".."), Dir: dir, Say: say})
	if err == nil {
		keepGateLog(n)
	}
	return e, err
}

// app is one test's Application in a namespace of its own.
type app struct {
	t  *testing.T
	e  *estate.Estate
	ns string
	// deployments are the GitHub Deployments of its releases by version,
	// the newest of each.
	deployments map[string]int64
	// pinnedAt is when its pin last moved.
	pinnedAt time.Time
}

func newApp(t *testing.T) *app {
	t.Helper()
	e := theEstate(t)
	a := &app{t: t, e: e, ns: e.Node.Namespace(t), deployments: map[string]int64{}}
	return a
}

// release pushes r's render as the Project's artifact and moves the pin.
func (a *app) release(r estate.Release) testenv.Artifact {
	a.t.Helper()
	art := a.push(r)
	a.pin(art)
	return art
}

// initialized delivers the Application's first release: Flux applies it,
// Flagger initializes both Canaries, and the gate records it as serving.
func (a *app) initialized(r estate.Release) testenv.Artifact {
	a.t.Helper()
	art := a.release(r)
	if err := a.e.Applied(context.Background(), a.ns, art.Digest); err != nil {
		a.t.Fatal(err)
	}
	for _, m := range estate.Members {
		a.phase(m.Process, flaggerv1.CanaryPhaseInitialized, 3*time.Minute)
	}
	a.serving(r.Revision, 2*time.Minute)
	return art
}

// push pushes r's render as the Project's artifact, tagged with its
// version, as the release workflow does.
func (a *app) push(r estate.Release) testenv.Artifact {
	a.t.Helper()
	dir := a.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.yaml"), []byte(r.Render(a.ns)), 0o600); err != nil {
		a.t.Fatal(err)
	}
	art, err := a.e.Flux.Push(context.Background(), dir, a.ns+"/auth", r.Version, "https://github.com/example-org/auth", "main@sha1:"+r.Commit())
	if err != nil {
		a.t.Fatal(err)
	}
	return art
}

// pin moves the Project's pin to art, as a merge to the estate repository
// does.
func (a *app) pin(art testenv.Artifact) {
	a.t.Helper()
	// The workflow creates the release's GitHub Deployment with the pin;
	// every status after that is the Reporter's.
	a.deployments[art.Tag] = a.e.GitHub.AddDeployment(a.repository(), fakegithub.NewDeployment{Ref: art.Tag, Environment: recordEnv,
		Payload: json.RawMessage(fmt.Sprintf(`{"project":%q,"version":%q}`, a.ns, art.Tag))})
	a.pinnedAt = time.Now()
	if err := a.e.Unit(context.Background(), a.ns, art); err != nil {
		a.t.Fatal(err)
	}
}

// waitFor polls cond every half second until it holds, failing the test
// with what it last said, the gate's and Flagger's logs once deadline has
// passed.
func (a *app) waitFor(what string, deadline time.Duration, cond func() (bool, string)) {
	a.t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			a.t.Fatalf("waited %s for %s; last: %s\ngate, Flagger, Reporter and release record:\n%s\nthe Application's pods:\n%s", deadline, what, last,
				tail(withoutRequests(a.e.Node.ContainerLogs(gateNS, 20000))), tail(a.e.Node.ContainerLogs(a.ns, 2000)))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// withoutRequests drops the services' request lines (probes, mostly),
// which would crowd their decisions out of a failure's tail.
func withoutRequests(logs string) string {
	var b strings.Builder
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"request"`) {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func tail(s string) string {
	if len(s) > 12000 {
		return s[len(s)-12000:]
	}
	return s
}

// canary reads a member's Canary.
func (a *app) canary(process string) *flaggerv1.Canary {
	a.t.Helper()
	var c flaggerv1.Canary
	if err := a.e.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: process}, &c); err != nil {
		return &flaggerv1.Canary{}
	}
	return &c
}

// phase waits until process's Canary is in phase.
func (a *app) phase(process string, phase flaggerv1.CanaryPhase, deadline time.Duration) {
	a.t.Helper()
	// A release's end is Flagger's only once written after the pin moved:
	// until Flagger's next tick sees the new spec, the Canary still says
	// how the release before it ended.
	ended := phase == flaggerv1.CanaryPhaseSucceeded || phase == flaggerv1.CanaryPhaseFailed
	a.waitFor(fmt.Sprintf("Canary %s to be %s", process, phase), deadline, func() (bool, string) {
		c := a.canary(process)
		said := fmt.Sprintf("%q, iterations %d, failed checks %d", c.Status.Phase, c.Status.Iterations, c.Status.FailedChecks)
		if ended && c.Status.LastTransitionTime.Time.Before(a.pinnedAt.Truncate(time.Second)) {
			return false, said + ", written before the pin moved"
		}
		return c.Status.Phase == phase, said
	})
}

// serving waits until the gate's record says revision serves.
func (a *app) serving(revision string, deadline time.Duration) {
	a.t.Helper()
	a.waitFor("the gate's record to say "+releasemodel.RevisionTag(revision)+" serves", deadline, func() (bool, string) {
		cm, err := a.e.Node.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), releasemodel.RecordConfigMap(a.ns, "auth"), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		r, err := releasemodel.DecodeRecord(a.ns, "auth", cm.Data)
		if err != nil {
			return false, err.Error()
		}
		return r.Serving == revision, fmt.Sprintf("%+v", r)
	})
}

// primaryRelease is the release a member's primary Deployment runs, from
// its template's RELEASE.
func (a *app) primaryRelease(process string) string {
	a.t.Helper()
	d, err := a.e.Node.Kube.AppsV1().Deployments(a.ns).Get(context.Background(), process+"-primary", metav1.GetOptions{})
	if err != nil {
		a.t.Fatalf("read %s-primary: %v", process, err)
	}
	for _, env := range d.Spec.Template.Spec.Containers[0].Env {
		if env.Name == "RELEASE" {
			return env.Value
		}
	}
	return ""
}

// primariesRun fails the test unless both members' primaries run version,
// saying when.
func (a *app) primariesRun(version, when string) {
	a.t.Helper()
	for _, m := range estate.Members {
		if got := a.primaryRelease(m.Process); got != version {
			a.t.Errorf("%s's primary runs %s %s, want %s", m.Process, got, when, version)
		}
	}
}

// answers are the gate's logged answers to one webhook of this
// Application's process: each its outcome and reason.
func (a *app) answers(webhook, process string) []string {
	var out []string
	for _, line := range a.gateLines() {
		var l struct{ Msg, Webhook, Namespace, Process, Revision, Reason, Cause string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Namespace != a.ns || l.Webhook != webhook || l.Process != process {
			continue
		}
		switch l.Msg {
		case "yes", "not yet", "cannot answer":
			out = append(out, l.Msg+" "+releasemodel.RevisionTag(l.Revision)+": "+l.Reason+l.Cause)
		}
	}
	return out
}
