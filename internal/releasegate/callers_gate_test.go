package releasegate_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestOnlyFlaggerIsAnswered: a caller that is not a running Flagger pod gets
// 403, and the gate reads nothing of the cluster for it: its watch already
// holds Flagger's pods.
func TestOnlyFlaggerIsAnswered(t *testing.T) {
	cp, gate, counter := countedGate(t)
	ns := cp.Namespace(t)
	authApp(ns).apply(t, cp)

	counter.Reset()
	code, reason := gate.ask(t, "127.0.0.2", "/may-start", payload(ns, "auth-api", rev))
	if code != http.StatusForbidden || reason != "the release gate answers Flagger alone" {
		t.Fatalf("a stranger got %d %q", code, reason)
	}
	if counter.Total() != 0 {
		t.Fatalf("a refused question made the API requests %v, want none", counter.Requests())
	}
	// A forwarding header naming Flagger changes nothing.
	if code, _ := gate.askWith(t, "127.0.0.3", "/may-start", payload(ns, "auth-api", rev),
		http.Header{"X-Forwarded-For": {flagger}, "X-Real-Ip": {flagger}, "Forwarded": {"for=" + flagger}}); code != http.StatusForbidden {
		t.Fatalf("a stranger naming Flagger in X-Forwarded-For got %d", code)
	}
	// A bad body from a stranger is still 403: the body is never read.
	if code, _ := gate.ask(t, "127.0.0.2", "/checks", "{"); code != http.StatusForbidden {
		t.Fatalf("a stranger's bad body got %d, want 403", code)
	}
	// So is an oversize one, and not a byte of it is read; from Flagger the
	// same body is 413. Asked in process, as the server bounds the body, so
	// that a client still writing a body the gate leaves unread cannot race
	// the answer.
	mux := http.NewServeMux()
	gate.gate.Routes(mux)
	oversize := `{"name":"` + strings.Repeat("x", 2*server.DefaultMaxBodyBytes) + `"}`
	for _, c := range []struct {
		from string
		want int
	}{{"127.0.0.2", http.StatusForbidden}, {flagger, http.StatusRequestEntityTooLarge}} {
		body := &readCounter{r: strings.NewReader(oversize)}
		req := httptest.NewRequest(http.MethodPost, "/checks", body)
		req.RemoteAddr = net.JoinHostPort(c.from, "40000")
		rec := httptest.NewRecorder()
		req.Body = http.MaxBytesReader(rec, req.Body, server.DefaultMaxBodyBytes)
		mux.ServeHTTP(rec, req)
		if rec.Code != c.want || (c.want == http.StatusForbidden && body.n != 0) {
			t.Fatalf("an oversize body from %s: %d after reading %d bytes, want %d", c.from, rec.Code, body.n, c.want)
		}
	}

	// Flagger's pod, but on the host network, under another ServiceAccount, or
	// terminating, is not Flagger.
	for _, tc := range []struct{ name, spec string }{
		{"on the host network", "hostNetwork: true\n  serviceAccountName: flagger"},
		{"under another ServiceAccount", "serviceAccountName: default"},
		{"not running", "serviceAccountName: flagger\nstatus: {phase: Pending}"},
		{"terminating", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := cp.Namespace(t)
			if tc.spec == "" {
				terminatingFlagger(t, cp, other)
			} else {
				flaggerPodSpec(t, cp, other, "flagger-0", flagger, tc.spec)
			}
			g := serve(t, cp.Grant(t, gateRBAC, gateNS, gateSA), other)
			if code, _ := g.ask(t, flagger, "/may-start", payload(ns, "auth-api", rev)); code != http.StatusForbidden {
				t.Fatalf("Flagger's pod %s was answered: %d", tc.name, code)
			}
		})
	}

	counter.Reset()
	if code, reason := gate.ask(t, flagger, "/may-start", payload(ns, "auth-api", rev)); code != http.StatusOK {
		t.Fatalf("Flagger got %d %q", code, reason)
	}
	// One read of each kind the answer needs: the namespace's ConfigMaps
	// (the inputs among them), Canaries and Deployments, the Application's
	// Jobs, and the gate's record.
	if got := counter.Requests(); len(got) != 5 || counter.Matching("/namespaces/"+ns+"/configmaps") != 1 ||
		counter.Matching("/namespaces/"+ns+"/canaries") != 1 || counter.Matching("/namespaces/"+ns+"/jobs") != 1 ||
		counter.Matching("/namespaces/"+ns+"/deployments") != 1 ||
		counter.Matching("/namespaces/"+gateNS+"/configmaps/"+ns+".auth-release-record") != 1 {
		t.Fatalf("may-start made the API requests %v, want 5, one of each kind", got)
	}
}

// terminatingFlagger leaves Flagger's pod terminating: a finalizer holds it
// after its deletion.
func terminatingFlagger(t *testing.T, cp *testenv.ControlPlane, ns string) {
	t.Helper()
	flaggerPod(t, cp, ns, "flagger-0", flagger)
	ctx := context.Background()
	patch := []byte(`{"metadata":{"finalizers":["delivery.test/hold"]}}`)
	if _, err := cp.Kube.CoreV1().Pods(ns).Patch(ctx, "flagger-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "flagger-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cp.Kube.CoreV1().Pods(ns).Patch(ctx, "flagger-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
}
