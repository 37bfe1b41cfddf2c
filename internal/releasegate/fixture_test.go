package releasegate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	rev     = "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca"
	tag     = "b87d7fecf08d"
	prevRev = "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
	// The tests apply the gate's RBAC file itself and run the gate as the
	// ServiceAccount the file grants, so under exactly that grant.
	gateRBAC = "../../deploy/release-gate/rbac.yaml"
	gateNS   = "delivery-system"
	gateSA   = "release-gate"
)

// app describes one gated Application's objects in the cluster: its inputs,
// its members' Canaries, Deployments and pods, its release Jobs and, where
// set, the record the gate would have written before.
type app struct {
	ns, name         string
	migration        bool
	testedAgainst    string
	nonTransactional bool
	members          []member
	jobs             []job
	// inputs replaces the rendered releaseGate.json when set.
	inputs string
	// inputsApp is the part-of label of the inputs; name when empty.
	inputsApp string
	noInputs  bool
	record    *release.Record
	// noCanaries leaves every Canary out, as Flux's apply is before it
	// reaches the custom resources.
	noCanaries bool
}

type member struct {
	process string
	// canaryApp and canaryRev are what the Canary's webhooks carry; the
	// Application and rev when empty.
	canaryApp, canaryRev string
	noCanary             bool
	phase                string
	iterations           int
	applied, promoted    string
	// transitioned is the Canary's last transition; a day ago when zero.
	transitioned time.Time
	// image of the Deployment and of the primary.
	image, primaryImage string
	noPrimary           bool
	pods                []pod
	// hosts and paths are the JSON arrays the Canary's webhooks hand in
	// metadata; none when empty.
	hosts, paths string
	// envConfig, when set, is a ConfigMap <process>-env the Deployment takes
	// its environment from, holding MODE: envConfig; the primary takes it
	// from Flagger's copy <process>-env-primary, holding MODE: primaryEnvConfig.
	envConfig, primaryEnvConfig string
	// selector, when set, is the labels the Deployment (not its primary)
	// selects its pods by instead of the render's instance label.
	selector string
	// templateRevision, when set, is the Deployment's (not its primary's)
	// pod template annotation naming its revision.
	templateRevision string
	// deleting names the pods, by index, that are bound to a node and being
	// deleted: Terminating until a kubelet confirms, which none here does.
	deleting []int
}

type pod struct {
	ready    bool
	restarts int
	// labels, when set, are the pod's labels instead of the render's.
	labels string
	// initRestarts, when set, gives the pod an init container restarted so often.
	initRestarts int
}

// job is a release Job of the Application; identity is the migration's when
// empty.
type job struct {
	name, identity              string
	suspended, complete, failed bool
}

// authApp is the auth example at revision rev: auth-api analysed and waiting at
// the barrier, auth-ui unchanged.
func authApp(ns string) *app {
	return &app{ns: ns, name: "auth", members: []member{
		{process: "auth-api", phase: "WaitingPromotion", iterations: 4, applied: "new", promoted: "old",
			image: "api:2", primaryImage: "api:1", pods: []pod{{ready: true}, {ready: true}}},
		{process: "auth-ui", phase: "Succeeded", applied: "ui", promoted: "ui", image: "ui:1", primaryImage: "ui:1"},
	}}
}

func (a *app) identity() string { return a.name + "-migration" }

func (a *app) member(process string) *member {
	for i := range a.members {
		if a.members[i].process == process {
			return &a.members[i]
		}
	}
	panic("no member " + process)
}

func (a *app) manifests() string {
	var b strings.Builder
	doc := func(format string, args ...any) { fmt.Fprintf(&b, "---\n"+format+"\n", args...) }
	inputs := a.inputs
	if inputs == "" {
		var processes []string
		for _, m := range a.members {
			processes = append(processes, m.process)
		}
		mig := ""
		if a.migration {
			tested := ""
			if a.testedAgainst != "" {
				tested = `,"testedAgainst":"` + a.testedAgainst + `"`
			}
			mig = fmt.Sprintf(`{"identity":%q,"nonTransactional":%v%s}`, a.identity(), a.nonTransactional, tested)
		}
		inputs = renderedInputs(processes, mig)
	}
	inputsApp := a.inputsApp
	if inputsApp == "" {
		inputsApp = a.name
	}
	if !a.noInputs {
		doc(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s-release-gate
  namespace: %s
  labels: {app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}
data:
  releaseGate.json: %q`, a.name, a.ns, inputsApp, inputs)
	}
	for _, m := range a.members {
		copies := []struct{ name, image, envFrom string }{{m.process, m.image, m.process + "-env"}}
		if !m.noPrimary {
			copies = append(copies, struct{ name, image, envFrom string }{m.process + "-primary", m.primaryImage, m.process + "-env-primary"})
		}
		for _, d := range copies {
			selector := "app.kubernetes.io/instance: " + d.name
			if m.selector != "" && d.name == m.process {
				selector = m.selector
			}
			annotations := ""
			if m.templateRevision != "" && d.name == m.process {
				annotations = fmt.Sprintf(", annotations: {%s: %q}", release.RevisionAnnotation, m.templateRevision)
			}
			envFrom := ""
			if m.envConfig != "" {
				envFrom = fmt.Sprintf("\n          envFrom: [{configMapRef: {name: %s}}]", d.envFrom)
			}
			// Flagger gives a primary none of its target's labels but
			// the selector's (without -include-label-prefix).
			labels := "app.kubernetes.io/part-of: " + a.name + ", app.kubernetes.io/managed-by: deploy-kit"
			if d.name != m.process {
				labels = "app.kubernetes.io/instance: " + d.name
			}
			doc(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s, labels: {%s}}
spec:
  selector: {matchLabels: {%s}}
  template:
    metadata: {labels: {%s, app.kubernetes.io/part-of: %s}%s}
    spec:
      containers:
        - name: app
          image: %s
          args: [serve]
          env: [{name: MODE, value: live}]%s`, d.name, a.ns, labels, selector, selector, a.name, annotations, d.image, envFrom)
		}
		if m.envConfig != "" {
			for name, mode := range map[string]string{m.process + "-env": m.envConfig, m.process + "-env-primary": m.primaryEnvConfig} {
				doc(`apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s}
data: {MODE: %q}`, name, a.ns, mode)
			}
		}
		for i, p := range m.pods {
			ready := "False"
			if p.ready {
				ready = "True"
			}
			podLabels := fmt.Sprintf("app.kubernetes.io/instance: %s, app.kubernetes.io/part-of: %s", m.process, a.name)
			if p.labels != "" {
				podLabels = p.labels
			}
			initSpec, initStatus := "", ""
			if slices.Contains(m.deleting, i) {
				initSpec = "\n  nodeName: node-a"
			}
			if p.initRestarts > 0 {
				initSpec += "\n  initContainers: [{name: init, image: init:1}]"
				initStatus = fmt.Sprintf(`
  initContainerStatuses: [{name: init, image: init:1, imageID: "", ready: true, restartCount: %d, state: {terminated: {exitCode: 0}}}]`, p.initRestarts)
			}
			doc(`apiVersion: v1
kind: Pod
metadata: {name: %s-%d, namespace: %s, labels: {%s}}
spec:
  containers: [{name: app, image: %s}]%s
status:
  phase: Running
  podIP: 10.1.0.%d
  podIPs: [{ip: 10.1.0.%d}]
  conditions: [{type: Ready, status: "%s"}]
  containerStatuses: [{name: app, image: %s, imageID: "", ready: %v, restartCount: %d, started: true, state: {running: {}}}]%s`,
				m.process, i, a.ns, podLabels, m.image, initSpec, i+1, i+1, ready, m.image, p.ready, p.restarts, initStatus)
		}
	}
	for _, j := range a.jobs {
		identity := j.identity
		if identity == "" {
			identity = a.identity()
		}
		b.WriteString(jobYAML(a.ns, a.name, j.name, identity, j.suspended, j.complete, j.failed, "[]"))
	}
	// Flux applies custom resources after everything else: the Canaries
	// come last, as they would from a render.
	for _, m := range a.members {
		if !m.noCanary && !a.noCanaries {
			doc("%s", a.canaryYAML(m))
		}
	}
	if a.record != nil {
		doc(`apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s}
data:
  %s: %q`, release.RecordConfigMap(a.ns, a.name), gateNS, release.RecordKey, release.EncodeRecord(*a.record)[release.RecordKey])
	}
	return b.String()
}

// canaryYAML is member m's Canary: Flagger's four webhooks to the gate, each
// carrying the Application, process and revision, and the status a test sets.
func (a *app) canaryYAML(m member) string {
	application, revision := m.canaryApp, m.canaryRev
	if application == "" {
		application = a.name
	}
	if revision == "" {
		revision = rev
	}
	extra := ""
	if m.hosts != "" {
		extra += fmt.Sprintf(", hosts: %q", m.hosts)
	}
	if m.paths != "" {
		extra += fmt.Sprintf(", paths: %q", m.paths)
	}
	hooks := ""
	for _, h := range []struct{ name, typ string }{{"may-start", "confirm-rollout"}, {"checks", "rollout"}, {"may-promote", "confirm-promotion"}, {"rollback", "rollback"}} {
		hooks += fmt.Sprintf(`
      - name: %s
        type: %s
        url: http://release-gate.delivery-system.svc.cluster.local:8080/%s
        metadata: {application: %s, process: %s, revision: "%s"%s}`, h.name, h.typ, h.name, application, m.process, revision, extra)
	}
	transitioned := m.transitioned
	if transitioned.IsZero() {
		transitioned = time.Now().Add(-24 * time.Hour)
	}
	return fmt.Sprintf(`apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %s}
  service: {port: 8080, targetPort: http, portName: http}
  analysis:
    interval: 30s
    iterations: 4
    threshold: 3
    webhooks:%s
status:
  phase: %s
  iterations: %d
  lastAppliedSpec: %q
  lastPromotedSpec: %q
  lastTransitionTime: %q
  conditions:
    - {type: Promoted, status: %q, reason: %s, message: "", lastUpdateTime: %q, lastTransitionTime: %q}`,
		m.process, a.ns, a.name, m.process, hooks, m.phase, m.iterations, m.applied, m.promoted,
		// Flagger rewrites status.lastTransitionTime on every tick of a
		// failed Canary; the Promoted condition keeps when the phase changed.
		time.Now().UTC().Format(time.RFC3339), promotedStatus(m.phase), m.phase,
		transitioned.UTC().Format(time.RFC3339), transitioned.UTC().Format(time.RFC3339))
}

func (a *app) apply(t testing.TB, cp *testenv.ControlPlane) {
	t.Helper()
	if _, err := cp.Apply(context.Background(), []byte(a.manifests())); err != nil {
		t.Fatalf("apply %s/%s: %v", a.ns, a.name, err)
	}
	for _, m := range a.members {
		for _, i := range m.deleting {
			deletePod(t, cp, a.ns, fmt.Sprintf("%s-%d", m.process, i))
		}
	}
}

// deletePod deletes a pod bound to a node and waits until the API server
// shows it Terminating: with no kubelet to confirm, it stays so.
func deletePod(t testing.TB, cp *testenv.ControlPlane, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	p, err := cp.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod %s/%s after its deletion: %v, deletion timestamp %v; want it Terminating", ns, name, err, p.GetDeletionTimestamp())
	}
}

// flaggerPod runs "Flagger" at address in namespace ns, as the gate requires.
func flaggerPod(t testing.TB, cp *testenv.ControlPlane, ns, name, address string) {
	t.Helper()
	flaggerPodSpec(t, cp, ns, name, address, "serviceAccountName: flagger")
}

// flaggerPodSpec is flaggerPod with spec lines of the test's own; a "status:"
// line among them replaces the Running phase.
func flaggerPodSpec(t testing.TB, cp *testenv.ControlPlane, ns, name, address, spec string) {
	t.Helper()
	phase := "Running"
	if before, after, ok := strings.Cut(spec, "\nstatus: {phase: "); ok {
		spec, phase = before, strings.TrimSuffix(after, "}")
	}
	_, err := cp.Apply(context.Background(), []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/instance: flagger}}
spec:
  %s
  containers: [{name: flagger, image: flagger:1.41.0}]
status:
  phase: %s
  podIP: %s
  podIPs: [{ip: %s}]
  conditions: [{type: Ready, status: "True"}]
`, name, ns, spec, phase, address, address)))
	if err != nil {
		t.Fatalf("start Flagger's pod: %v", err)
	}
	flaggerNamespaceGrant(t, cp, ns)
}

// flaggerNamespaceGrant applies the part of the gate's RBAC file that lives
// in Flagger's namespace (the lines marked FLAGGER_NAMESPACE) to ns.
func flaggerNamespaceGrant(t testing.TB, cp *testenv.ControlPlane, ns string) {
	t.Helper()
	rbac, err := os.ReadFile("../../deploy/release-gate/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, doc := range strings.Split(string(rbac), "\n---\n") {
		if strings.Contains(doc, "# FLAGGER_NAMESPACE") {
			docs = append(docs, strings.ReplaceAll(doc, "delivery-system # FLAGGER_NAMESPACE", ns))
		}
	}
	if len(docs) == 0 {
		t.Fatal("the gate's RBAC file grants nothing in Flagger's namespace")
	}
	if _, err := cp.Apply(context.Background(), []byte(strings.Join(docs, "\n---\n"))); err != nil {
		t.Fatalf("apply the gate's grant in Flagger's namespace: %v", err)
	}
}

// renderedInputs is releaseGate.json as the render writes it for processes,
// each ready at /ready on 8080, with migration (a JSON object) unless empty.
func renderedInputs(processes []string, migration string) string {
	var ms []string
	for _, p := range processes {
		ms = append(ms, fmt.Sprintf(`{"process":%q,"readiness":{"path":"/ready","port":8080}}`, p))
	}
	if migration != "" {
		migration = `,"migration":` + migration
	}
	return `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080","members":[` +
		strings.Join(ms, ",") + `]` + migration + `}`
}

// jobYAML is a release Job of Application app, labelled as the render labels
// it, complete or failed as asked, its container run with args.
func jobYAML(ns, app, name, identity string, suspended, complete, failed bool, args string) string {
	now := time.Now().UTC().Format(time.RFC3339)
	status := ""
	switch {
	case complete:
		status = fmt.Sprintf(`status:
  startTime: %q
  completionTime: %q
  succeeded: 1
  conditions:
    - {type: SuccessCriteriaMet, status: "True", lastProbeTime: %q, lastTransitionTime: %q}
    - {type: Complete, status: "True", lastProbeTime: %q, lastTransitionTime: %q}`, now, now, now, now, now, now)
	case failed:
		status = fmt.Sprintf(`status:
  startTime: %q
  failed: 1
  conditions:
    - {type: FailureTarget, status: "True", lastProbeTime: %q, lastTransitionTime: %q}
    - {type: Failed, status: "True", lastProbeTime: %q, lastTransitionTime: %q}`, now, now, now, now, now)
	}
	return fmt.Sprintf(`---
apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: %s
  labels: {app.kubernetes.io/name: %s, app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}
spec:
  suspend: %v
  backoffLimit: 0
  template:
    metadata: {labels: {app.kubernetes.io/name: %s}}
    spec:
      restartPolicy: Never
      containers: [{name: migration, image: migration:1, args: %s}]
%s
`, name, ns, identity, app, suspended, identity, args, status)
}

// running is a gate serving on a loopback listener.
type running struct {
	url  string
	logs *testenv.LogBuffer
	gate *releasegate.Gate
}

// countedGate serves a gate under its grant, answering a Flagger pod of a
// namespace of its own, and counts every API request the gate makes.
func countedGate(t testing.TB) (*testenv.ControlPlane, *running, *testenv.RequestCounter) {
	t.Helper()
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	cfg, counter := testenv.Counting(cp.Grant(t, gateRBAC, gateNS, gateSA))
	return cp, serve(t, cfg, flaggerNS), counter
}

// serve starts the gate reading through cfg, answering Flagger in flaggerNS.
func serve(t testing.TB, cfg *rest.Config, flaggerNS string) *running {
	t.Helper()
	return serveWith(t, cfg, flaggerNS, nil)
}

// serveWith is serve with the gate's own requests made by sender, when not
// nil. It returns once the gate's watch has listed Flagger's pods, or has
// been refused the list.
func serveWith(t testing.TB, cfg *rest.Config, flaggerNS string, sender releasegate.TrafficSender) *running {
	t.Helper()
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	identity := releasegate.FlaggerIdentity{Namespace: flaggerNS, Selector: "app.kubernetes.io/instance=flagger", ServiceAccount: "flagger"}
	sel, err := identity.Validate()
	if err != nil {
		t.Fatal(err)
	}
	callers := kube.WatchPods(ctx, flaggerNS, sel, logger)
	gate, err := releasegate.New(kube, callers, releasegate.Config{Flagger: identity, GateNamespace: gateNS}, logger)
	if err != nil {
		t.Fatal(err)
	}
	gate.UseTrafficSender(sender)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, ln, server.Config{Routes: gate.Routes, Ready: gate.Ready, Logger: logger, DrainTimeout: 2 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := callers.FlaggerPods()
		if err == nil || apierrors.IsForbidden(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch of Flagger's pods: %v", err)
		}
	}
	return &running{url: "http://" + ln.Addr().String(), logs: logs, gate: gate}
}

// payload is what Flagger sends for a member of the auth Application.
func payload(ns, process, revision string) string {
	return fmt.Sprintf(`{"name":%q,"namespace":%q,"phase":"Progressing","checksum":"c","metadata":{"application":"auth","process":%q,"revision":%q}}`,
		process, ns, process, revision)
}

// ask posts body to the gate's path from the loopback source address from.
func (r *running) ask(t testing.TB, from, path, body string) (int, string) {
	t.Helper()
	return r.askWith(t, from, path, body, nil)
}

func (r *running) askWith(t testing.TB, from, path, body string, header http.Header) (int, string) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, r.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// promotedStatus is the status Flagger gives a Canary's Promoted condition in
// phase.
func promotedStatus(phase string) string {
	switch phase {
	case "Initialized", "Succeeded":
		return "True"
	case "Failed":
		return "False"
	}
	return "Unknown"
}
