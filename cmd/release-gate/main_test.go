package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestRunServesFlaggerUnderItsGrant runs the binary's run whole: it reads its
// variables, reaches the API server through KUBECONFIG, is ready, answers
// Flagger and drains when its context ends.
func TestRunServesFlaggerUnderItsGrant(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	if _, err := cp.Apply(context.Background(), []byte(`apiVersion: v1
kind: Pod
metadata: {name: flagger-0, namespace: `+flaggerNS+`, labels: {app.kubernetes.io/instance: flagger}}
spec:
  serviceAccountName: flagger
  containers: [{name: flagger, image: flagger:1.41.0}]
status: {phase: Running, podIP: 127.0.0.1, podIPs: [{ip: 127.0.0.1}]}
`)); err != nil {
		t.Fatal(err)
	}
	notes := cp.Namespace(t)
	if _, err := cp.Apply(context.Background(), []byte(gatedNotes(notes))); err != nil {
		t.Fatal(err)
	}
	// The watch of Flagger's pods is granted in Flagger's namespace.
	kubeconfig := cp.GrantKubeconfig(t, "../../deploy/release-gate/rbac.yaml", "delivery-system", "release-gate",
		"delivery-system # FLAGGER_NAMESPACE", flaggerNS)
	env := map[string]string{
		"ADDR":              "127.0.0.1:0",
		"KUBECONFIG":        kubeconfig,
		"FLAGGER_NAMESPACE": flaggerNS,
	}
	addr := make(chan net.Addr, 1)
	listen := func(ctx context.Context, a string) (net.Listener, error) {
		ln, err := listenTCP(ctx, a)
		if err == nil {
			addr <- ln.Addr()
		}
		return ln, err
	}
	logs := &testenv.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard, logs, listen) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case code := <-exited:
		t.Fatalf("run exited %d before listening:\n%s", code, logs.String())
	}

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Ready once the API server answered and the watch listed Flagger's pods.
	wait.Poll{Within: 10 * time.Second, Every: 10 * time.Millisecond, Detail: logs}.Until(t, "/readyz ready", func() (bool, string) {
		code, body := get("/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	ns := cp.Namespace(t)
	body := fmt.Sprintf(`{"name":"auth-api","namespace":%q,"metadata":{"application":"auth","process":"auth-api","revision":"sha256:%s"}}`, ns, strings.Repeat("ab", 32))
	resp, err := http.Post(base+"/may-start", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// No inputs in that namespace: a question the gate cannot answer, read
	// under the gate's grant all the same.
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(logs.String(), `auth-release-gate: not found`) {
		t.Fatalf("/may-start without inputs: %d %s\n%s", resp.StatusCode, reply, logs.String())
	}

	// Between questions the rounds reconcile every gated Application under the
	// same grant: the notes Application, which serves, gets its record.
	record := notes + ".notes-release-record"
	wait.Poll{Within: 40 * time.Second, Every: 500 * time.Millisecond, Detail: logs}.Until(t, "the record "+record+" within two rounds", func() (bool, string) {
		cm, err := cp.Kube.CoreV1().ConfigMaps("delivery-system").Get(context.Background(), record, metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["record.json"], `"serving":"sha256:`+strings.Repeat("cd", 32)+`"`), fmt.Sprint(err)
	})
	if code, body := get("/releases"); code != http.StatusOK || !strings.Contains(body, `"application":"notes"`) {
		t.Fatalf("/releases: %d %s", code, body)
	}
	if code, _ := get("/metrics"); code != http.StatusForbidden {
		t.Fatalf("/metrics with no scraper configured: %d", code)
	}
	if code, _ := get("/fresh"); code != http.StatusOK {
		t.Fatalf("/fresh: %d", code)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("run exited %d after its context ended:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not drain")
	}
	if !strings.Contains(logs.String(), `"msg":"drained"`) {
		t.Fatalf("no drain in the log:\n%s", logs.String())
	}
}

// gatedNotes is a one-member Application in ns that serves its revision.
func gatedNotes(ns string) string {
	revision := "sha256:" + strings.Repeat("cd", 32)
	inputs := `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"90s","endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080","members":[{"process":"notes","readiness":{"path":"/","port":8080}}]}`
	deployment := func(name string) string {
		return fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/part-of: notes}}
spec:
  selector: {matchLabels: {app.kubernetes.io/instance: %s}}
  template:
    metadata: {labels: {app.kubernetes.io/instance: %s}}
    spec: {containers: [{name: app, image: "notes:1"}]}
`, name, ns, name, name)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: notes-release-gate, namespace: %s, labels: {app.kubernetes.io/part-of: notes, app.kubernetes.io/managed-by: deploy-kit}}
data: {releaseGate.json: %q}
---
apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: notes, namespace: %s, labels: {app.kubernetes.io/part-of: notes}}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: notes}
  service: {port: 8080}
  analysis:
    interval: 30s
    iterations: 4
    threshold: 3
    webhooks:
      - {name: may-start, type: confirm-rollout, url: "http://release-gate.delivery-system.svc.cluster.local:8080/may-start", metadata: {application: notes, process: notes, revision: %q}}
status: {phase: Initialized, lastAppliedSpec: n1, lastPromotedSpec: n1}
`, ns, inputs, ns, revision) + deployment("notes") + deployment("notes-primary")
}

func TestRunRefusesBadSettings(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		log  string
	}{
		{"a Flagger selector that does not parse", map[string]string{"FLAGGER_SELECTOR": "a in ("}, "FLAGGER_SELECTOR"},
		{"a Flagger selector that selects every pod", map[string]string{"FLAGGER_SELECTOR": " , "}, "FLAGGER_SELECTOR"},
		{"a kubeconfig that is not there", map[string]string{"KUBECONFIG": filepath.Join(os.TempDir(), "no-such-kubeconfig")}, "KUBECONFIG"},
		{"one metrics scraper variable without the others", map[string]string{"METRICS_SCRAPER_NAMESPACE": "monitoring"}, "set together or not at all"},
		{"a scraper selector that selects every pod", map[string]string{"METRICS_SCRAPER_NAMESPACE": "monitoring", "METRICS_SCRAPER_SELECTOR": " , ", "METRICS_SCRAPER_SERVICE_ACCOUNT": "prometheus"}, "METRICS_SCRAPER_SELECTOR"},
		{"a scraper selector that does not parse", map[string]string{"METRICS_SCRAPER_NAMESPACE": "monitoring", "METRICS_SCRAPER_SELECTOR": "a in (", "METRICS_SCRAPER_SERVICE_ACCOUNT": "prometheus"}, "METRICS_SCRAPER_SELECTOR"},
		{"a gate namespace that is no namespace name", map[string]string{"GATE_NAMESPACE": "Delivery_System"}, "GATE_NAMESPACE"},
		{"an own-traffic error rate that is no share", map[string]string{"OWN_TRAFFIC_ERROR_RATE": "5%"}, "OWN_TRAFFIC_ERROR_RATE"},
		{"an own-traffic error rate over 1", map[string]string{"OWN_TRAFFIC_ERROR_RATE": "1.5"}, "OWN_TRAFFIC_ERROR_RATE"},
		{"an own-traffic latency that is no duration", map[string]string{"OWN_TRAFFIC_LATENCY": "1"}, "OWN_TRAFFIC_LATENCY"},
		{"an own-traffic latency of zero", map[string]string{"OWN_TRAFFIC_LATENCY": "0s"}, "OWN_TRAFFIC_LATENCY"},
		{"a lease no longer than its renew deadline", map[string]string{"LEADER_LEASE_DURATION": "10s"}, "two replicas could act at once"},
		{"a lease duration that is no duration", map[string]string{"LEADER_LEASE_DURATION": "15"}, "LEADER_LEASE_DURATION"},
		{"a renew deadline within a retry", map[string]string{"LEADER_RENEW_DEADLINE": "2s"}, "LEADER_RENEW_DEADLINE"},
		{"an address that cannot be listened on", map[string]string{"KUBECONFIG": writeKubeconfig(t), "ADDR": "256.0.0.1:1"}, "listen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs strings.Builder
			code := run(context.Background(), nil, func(k string) string { return c.env[k] }, io.Discard, &logs, listenTCP)
			// A setting is bad before the gate listens; an address it
			// cannot listen on is a failure at run time.
			want := 2
			if c.log == "listen" {
				want = 1
			}
			if code != want || !strings.Contains(logs.String(), c.log) || strings.Count(logs.String(), "\n") != 1 {
				t.Fatalf("run = %d, log %q; want exit %d and one line containing %q", code, logs.String(), want, c.log)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig naming a server nobody runs: enough to
// build clients, which connect only when asked.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunExitsWhenServingFails(t *testing.T) {
	env := map[string]string{"KUBECONFIG": writeKubeconfig(t), "ADDR": "127.0.0.1:0"}
	closed := func(ctx context.Context, addr string) (net.Listener, error) {
		ln, err := listenTCP(ctx, addr)
		if err == nil {
			err = ln.Close()
		}
		return ln, err
	}
	var logs strings.Builder
	if code := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard, &logs, closed); code != 1 || !strings.Contains(logs.String(), `"msg":"serve"`) {
		t.Fatalf("run = %d with a closed listener, log:\n%s", code, logs.String())
	}
}

// variables are the variables the table in docs/release-gate.md names for the gate.
var variables = []string{"ADDR", "KUBECONFIG", "FLAGGER_NAMESPACE", "FLAGGER_SELECTOR", "FLAGGER_SERVICE_ACCOUNT", "GATE_NAMESPACE",
	"OWN_TRAFFIC_ERROR_RATE", "OWN_TRAFFIC_LATENCY", "METRICS_SCRAPER_NAMESPACE", "METRICS_SCRAPER_SELECTOR", "METRICS_SCRAPER_SERVICE_ACCOUNT",
	"POD_NAME", "LEADER_LEASE_DURATION", "LEADER_RENEW_DEADLINE", "LEADER_RETRY_PERIOD", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "release-gate", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, stdout, stderr, listenTCP)
	}})
}

// TestHelpNamesEveryVariableItReads starts the gate with settings that stop
// only at the cluster, the last thing it reads.
func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "missing")})
	var logs strings.Builder
	if code := run(context.Background(), nil, env.Getenv, io.Discard, &logs, listenTCP); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG: no file") {
		t.Fatalf("exit %d: %s", code, logs.String())
	}
	env.Named(t, variables)
}
