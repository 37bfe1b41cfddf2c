package releasegate_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// tended is a gated Application for the rounds: its inputs, its members'
// Canaries and Deployments, its migration Jobs and, where set, the record the
// gate would have written before.
type tended struct {
	ns, name string
	// inputs replaces the rendered inputs when set.
	inputs           string
	migration        bool
	testedAgainst    string
	nonTransactional bool
	members          []tendedMember
	jobs             []tendedJob
	record           *releasegate.Record
}

type tendedMember struct {
	process, phase    string
	applied, promoted string
	image, primary    string
	// revision the Canary carries; rev when empty.
	revision     string
	hosts, paths string
	transitioned time.Time
}

type tendedJob struct {
	name                        string
	suspended, complete, failed bool
}

func (a *tended) identity() string { return a.name + "-migration" }

func (a *tended) manifests() string {
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
	doc(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s-release-gate
  namespace: %s
  labels: {app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}
data:
  releaseGate.json: %q`, a.name, a.ns, a.name, inputs)
	for _, m := range a.members {
		revision := m.revision
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
		for _, h := range []struct{ name, typ string }{{"may-start", "confirm-rollout"}, {"checks", "rollout"}, {"may-promote", "confirm-promotion"}} {
			hooks += fmt.Sprintf(`
      - name: %s
        type: %s
        url: http://release-gate.delivery-system.svc.cluster.local:8080/%s
        metadata: {application: %s, process: %s, revision: "%s"%s}`, h.name, h.typ, h.name, a.name, m.process, revision, extra)
		}
		transitioned := m.transitioned
		if transitioned.IsZero() {
			transitioned = time.Now().Add(-24 * time.Hour)
		}
		doc(`apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %s}
  service: {port: 8080}
  analysis:
    interval: 30s
    iterations: 4
    threshold: 3
    webhooks:%s
status: {phase: %s, lastAppliedSpec: %q, lastPromotedSpec: %q, lastTransitionTime: %q}`,
			m.process, a.ns, a.name, m.process, hooks, m.phase, m.applied, m.promoted, transitioned.UTC().Format(time.RFC3339))
		for _, d := range [][2]string{{m.process, m.image}, {m.process + "-primary", m.primary}} {
			doc(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/part-of: %s, app.kubernetes.io/managed-by: deploy-kit}}
spec:
  selector: {matchLabels: {app.kubernetes.io/instance: %s}}
  template:
    metadata: {labels: {app.kubernetes.io/instance: %s, app.kubernetes.io/part-of: %s}}
    spec:
      containers: [{name: app, image: %s}]`, d[0], a.ns, a.name, d[0], d[0], a.name, d[1])
		}
	}
	for _, j := range a.jobs {
		b.WriteString(jobYAML(a.ns, a.name, j.name, a.identity(), j.suspended, j.complete, j.failed, "[]"))
	}
	if a.record != nil {
		doc(`apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s}
data:
  %s: %q`, releasegate.RecordConfigMap(a.ns, a.name), gateNS, releasegate.RecordKey, releasegate.EncodeRecord(*a.record)[releasegate.RecordKey])
	}
	return b.String()
}

func (a *tended) apply(t testing.TB, cp *testenv.ControlPlane) {
	t.Helper()
	if _, err := cp.Apply(context.Background(), []byte(a.manifests())); err != nil {
		t.Fatalf("apply %s/%s: %v", a.ns, a.name, err)
	}
}

// readRecord reads the record of ns's Application as the administrator.
func readRecord(t testing.TB, cp *testenv.ControlPlane, ns, app string) (releasegate.Record, bool) {
	t.Helper()
	cm, err := cp.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), releasegate.RecordConfigMap(ns, app), metav1.GetOptions{})
	if err != nil {
		return releasegate.Record{}, false
	}
	r, err := releasegate.DecodeRecord(ns, app, cm.Data)
	if err != nil {
		t.Fatalf("record of %s/%s: %v", ns, app, err)
	}
	return r, true
}

// suspended reads whether a Job is suspended, as the administrator.
func suspended(t testing.TB, cp *testenv.ControlPlane, ns, name string) bool {
	t.Helper()
	j, err := cp.Kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j.Spec.Suspend != nil && *j.Spec.Suspend
}

// edge is a TLS server on loopback standing in for the edge public hostnames
// reach; its certificate names *.example.com.
type edge struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newEdge(t testing.TB) *edge {
	t.Helper()
	e := &edge{hits: map[string]int{}}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		e.mu.Lock()
		e.hits[host+r.URL.Path]++
		e.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/broken") {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *edge) hit(hostPath string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits[hostPath]
}

// loopbackResolver resolves every name under example.com to loopback, but
// those under private.example.com to a private address.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	switch {
	case network != "ip4" || !strings.HasSuffix(host, ".example.com."):
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	case strings.HasSuffix(host, ".private.example.com."):
		return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// warmer reaches the edge through the warmup seam: a resolver and an address
// policy that admit loopback, and the edge's certificate as the root.
func (e *edge) warmer() *probe.Warmer {
	roots := x509.NewCertPool()
	roots.AddCert(e.srv.Certificate())
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return probe.NewWarmer(probe.WarmupConfig{
		Resolver: loopbackResolver{},
		Allow:    func(a netip.Addr) bool { return a.IsLoopback() },
		TLS:      &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Port:     n,
		Timeout:  2 * time.Second,
	})
}
