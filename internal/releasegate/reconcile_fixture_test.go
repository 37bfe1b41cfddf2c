package releasegate_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// readRecord reads the record of ns's Application as the administrator.
func readRecord(t testing.TB, cp *testenv.ControlPlane, ns, app string) (release.Record, bool) {
	t.Helper()
	cm, err := cp.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), release.RecordConfigMap(ns, app), metav1.GetOptions{})
	if err != nil {
		return release.Record{}, false
	}
	r, err := release.DecodeRecord(ns, app, cm.Data)
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
func (e *edge) warmer() *owntraffic.Warmer {
	roots := x509.NewCertPool()
	roots.AddCert(e.srv.Certificate())
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return owntraffic.NewWarmer(owntraffic.WarmupConfig{
		Resolver: loopbackResolver{},
		Allow:    func(a netip.Addr) bool { return a.IsLoopback() },
		TLS:      &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Port:     n,
		Timeout:  2 * time.Second,
	})
}
