package wholepath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/reporter"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestMain runs the tests, stops the node, and fails the run when the node
// left anything on this machine.
func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if left := testenv.NodeLeftovers(); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "the node left behind:", strings.Join(left, "; "))
		code = 1
	}
	os.Exit(code)
}

// gateNS is where the product and Flagger run, as deploy-kit names them.
const gateNS = "delivery-system"

// estate is the node with the real Flux and Flagger on it and the Release
// Gate installed by Flux from deploy/, shared by the package's tests.
type estate struct {
	n    *testenv.Node
	flux *testenv.Flux
}

var shared struct {
	once sync.Once
	e    *estate
	err  error
}

// theEstate starts the node, Flux and Flagger once, and installs the
// product through Flux as a platform team would: deploy/'s manifests in an
// overlay that names the images on the node, pushed as an artifact, pulled
// and applied by source- and kustomize-controller.
func theEstate(t *testing.T) *estate {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		shared.e, shared.err = startEstate(ctx, t)
	})
	if shared.err != nil {
		t.Fatalf("no estate on a node for this test: %v", shared.err)
	}
	return shared.e
}

func startEstate(ctx context.Context, t *testing.T) (*estate, error) {
	dir, err := os.MkdirTemp("", "wholepath-")
	if err != nil {
		return nil, err
	}
	member, err := testenv.BuildMemberImage(ctx, dir)
	if err != nil {
		return nil, err
	}
	say := func(s string) { t.Log(s) }
	n := testenv.SharedNode(t, testenv.NodeOptions{Images: []string{member}, Say: say})
	e := &estate{n: n}
	if err := n.ImportProductImages(ctx, filepath.Join(dir, "images"), "release-gate", "release-record"); err != nil {
		return nil, err
	}
	if e.flux, err = n.StartFlux(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(testenv.FluxNamespace, 3000))
	}
	if err := n.StartFlagger(ctx, gateNS); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(gateNS, 3000))
	}
	install := filepath.Join(dir, "delivery")
	if err := productOverlay(install); err != nil {
		return nil, err
	}
	a, err := e.flux.Push(ctx, install, "delivery", "0.0.0-node", "https://github.com/JorisJonkers-dev/delivery", "main@sha1:"+strings.Repeat("0", 40))
	if err != nil {
		return nil, err
	}
	if err := e.unit(ctx, "delivery", a); err != nil {
		return nil, err
	}
	if err := e.applied(ctx, "delivery", a.Digest); err != nil {
		return nil, err
	}
	for _, service := range []string{"release-gate", "release-record"} {
		if err := n.WaitAvailable(ctx, gateNS, service); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(gateNS, 3000))
		}
	}
	// notification-controller prompts the release record on every event
	// of a unit or a source, as a platform team wires it.
	if _, err := n.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata: {name: release-record, namespace: %[1]s}
spec:
  type: generic
  address: http://release-record.%[2]s.svc.cluster.local:8080/flux
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata: {name: release-record, namespace: %[1]s}
spec:
  providerRef: {name: release-record}
  eventSeverity: info
  eventSources:
    - {kind: Kustomization, name: "*"}
    - {kind: OCIRepository, name: "*"}
`, testenv.FluxNamespace, gateNS))); err != nil {
		return nil, err
	}
	return e, nil
}

// The release record's cluster and environment on the node.
const (
	recordCluster = "node"
	recordEnv     = "test"
)

// productOverlay lays out the install a platform team keeps: deploy/'s
// namespace, release-gate and release-record folders as they are, and an
// overlay naming the images the node has, the cluster and environment, and
// a short look interval.
func productOverlay(dir string) error {
	for _, part := range []string{"namespace", "release-gate", "release-record"} {
		src := filepath.Join("..", "..", "..", "deploy", part)
		if err := copyFolder(src, filepath.Join(dir, part)); err != nil {
			return err
		}
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources: [namespace, release-gate, release-record]
images:
  - name: ghcr.io/jorisjonkers-dev/delivery/release-gate
    newName: %[2]s
    newTag: %[4]s
  - name: ghcr.io/jorisjonkers-dev/delivery/release-record
    newName: %[3]s
    newTag: %[4]s
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: release-record, namespace: %[1]s}
      spec:
        template:
          spec:
            containers:
              - name: release-record
                env:
                  - {name: CLUSTER_NAME, value: %[5]s}
                  - {name: ENVIRONMENT, value: %[6]s}
                  - {name: INTERVAL, value: 5s}
`, gateNS, strings.TrimSuffix(testenv.ProductImage("release-gate"), ":"+testenv.ProductTag),
		strings.TrimSuffix(testenv.ProductImage("release-record"), ":"+testenv.ProductTag), testenv.ProductTag, recordCluster, recordEnv)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600)
}

// copyFolder copies the YAML files of src into dst.
func copyFolder(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		raw, err := os.ReadFile(path) //nolint:gosec // the repository's own manifests
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o600)
	})
}

// unit points a Project's OCIRepository and Kustomization, both
// project-<project>, at an artifact, pinned by digest as deploy-kit's pin
// files are, the release named on the unit as the Reporter reads it; a
// second call moves the pin.
func (e *estate) unit(ctx context.Context, project string, a testenv.Artifact) error {
	_, err := e.n.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-%[1]s, namespace: %[2]s}
spec:
  interval: 10m
  url: %[3]s
  insecure: true
  ref: {digest: %[4]s}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: project-%[1]s
  namespace: %[2]s
  annotations: {%[5]s: example-org/%[1]s, %[6]s: %[7]q, %[8]s: %[4]q}
spec:
  interval: 10m
  prune: true
  wait: true
  timeout: 3m
  path: ./
  sourceRef: {kind: OCIRepository, name: project-%[1]s}
`, project, testenv.FluxNamespace, a.URL(e.flux), a.Digest,
		reporter.AnnotationRepository, reporter.AnnotationVersion, a.Tag, reporter.AnnotationDigest)))
	return err
}

// applied waits until Flux's unit of project says it applied revision.
func (e *estate) applied(ctx context.Context, project, revision string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	last := ""
	for {
		var k kustomizev1.Kustomization
		if err := e.n.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + project}, &k); err == nil {
			ready := apimeta.FindStatusCondition(k.Status.Conditions, meta.ReadyCondition)
			if ready != nil && ready.Status == metav1.ConditionTrue && k.Status.LastAppliedRevision == revision {
				return nil
			}
			if ready != nil {
				last = ready.Reason + ": " + ready.Message
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Flux never applied %s of %s (%s)\n%s", revision, project, last, e.n.ContainerLogs(testenv.FluxNamespace, 3000))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// app is one test's Application in a namespace of its own.
type app struct {
	t  *testing.T
	e  *estate
	ns string
}

func newApp(t *testing.T) *app {
	t.Helper()
	e := theEstate(t)
	a := &app{t: t, e: e, ns: e.n.Namespace(t)}
	return a
}

// release pushes r's render as the Project's artifact and moves the pin.
func (a *app) release(r release) testenv.Artifact {
	a.t.Helper()
	art := a.push(r)
	a.pin(art)
	return art
}

// initialized delivers the Application's first release: Flux applies it,
// Flagger initializes both Canaries, and the gate records it as serving.
func (a *app) initialized(r release) testenv.Artifact {
	a.t.Helper()
	art := a.release(r)
	if err := a.e.applied(context.Background(), a.ns, art.Digest); err != nil {
		a.t.Fatal(err)
	}
	for _, m := range members {
		a.phase(m.process, flaggerv1.CanaryPhaseInitialized, 3*time.Minute)
	}
	a.serving(r.revision, 2*time.Minute)
	return art
}

// push pushes r's render as the Project's artifact, tagged with its
// version, as the release workflow does.
func (a *app) push(r release) testenv.Artifact {
	a.t.Helper()
	dir := a.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.yaml"), []byte(r.render(a.ns)), 0o600); err != nil {
		a.t.Fatal(err)
	}
	art, err := a.e.flux.Push(context.Background(), dir, a.ns+"/auth", r.version, "https://github.com/example-org/auth", "main@sha1:"+r.commit())
	if err != nil {
		a.t.Fatal(err)
	}
	return art
}

// pin moves the Project's pin to art, as a merge to the estate repository
// does.
func (a *app) pin(art testenv.Artifact) {
	a.t.Helper()
	if err := a.e.unit(context.Background(), a.ns, art); err != nil {
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
			a.t.Fatalf("waited %s for %s; last: %s\ngate and Flagger:\n%s\nthe Application's pods:\n%s", deadline, what, last,
				tail(a.e.n.ContainerLogs(gateNS, 4000)), tail(a.e.n.ContainerLogs(a.ns, 2000)))
		}
		time.Sleep(500 * time.Millisecond)
	}
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
	if err := a.e.n.Client.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: process}, &c); err != nil {
		return &flaggerv1.Canary{}
	}
	return &c
}

// phase waits until process's Canary is in phase.
func (a *app) phase(process string, phase flaggerv1.CanaryPhase, deadline time.Duration) {
	a.t.Helper()
	a.waitFor(fmt.Sprintf("Canary %s to be %s", process, phase), deadline, func() (bool, string) {
		c := a.canary(process)
		return c.Status.Phase == phase, fmt.Sprintf("%q, iterations %d, failed checks %d", c.Status.Phase, c.Status.Iterations, c.Status.FailedChecks)
	})
}

// serving waits until the gate's record says revision serves.
func (a *app) serving(revision string, deadline time.Duration) {
	a.t.Helper()
	a.waitFor("the gate's record to say "+releasemodel.RevisionTag(revision)+" serves", deadline, func() (bool, string) {
		cm, err := a.e.n.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), releasemodel.RecordConfigMap(a.ns, "auth"), metav1.GetOptions{})
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
	d, err := a.e.n.Kube.AppsV1().Deployments(a.ns).Get(context.Background(), process+"-primary", metav1.GetOptions{})
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

// answers are the gate's logged answers to one webhook of this
// Application's process: each its outcome and reason.
func (a *app) answers(webhook, process string) []string {
	var out []string
	for _, line := range strings.Split(a.e.n.PodLogs(gateNS, "release-gate"), "\n") {
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
