package owntraffic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/hits"
)

// edge is a real TLS server on loopback standing in for the edge a public
// hostname reaches; its certificate names *.example.com.
type edge struct {
	*member
	port int
	tls  *tls.Config
}

func newEdge(t *testing.T, handler http.HandlerFunc) *edge {
	t.Helper()
	m := &member{hits: &hits.Counter{}}
	m.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(r.Host + r.URL.EscapedPath())
		handler(w, r)
	}))
	t.Cleanup(m.srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(m.srv.Certificate())
	_, port, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return &edge{member: m, port: n, tls: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
}

// hit counts requests to host+path; the Host header carries the port.
func (e *edge) hit(host, path string) int {
	return e.count(net.JoinHostPort(host, strconv.Itoa(e.port)) + path)
}

// fakeResolver answers names from a table and records every question.
type fakeResolver struct {
	mu        sync.Mutex
	addresses map[string][]string
	asked     []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, network+" "+host)
	texts, ok := r.addresses[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(texts))
	for i, s := range texts {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

func loopbackOnly(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }

func (e *edge) warmer(r Resolver, allow func(netip.Addr) bool) *Warmer {
	return NewWarmer(WarmupConfig{Resolver: r, Allow: allow, TLS: e.tls, Port: e.port, Timeout: 200 * time.Millisecond})
}

func TestWarmupProductionSettings(t *testing.T) {
	w := NewWarmer(WarmupConfig{})
	if w.cfg.Port != 443 || w.cfg.Timeout != 10*time.Second || w.cfg.Resolver != net.DefaultResolver {
		t.Errorf("production warmup: port %d, timeout %v, resolver %v", w.cfg.Port, w.cfg.Timeout, w.cfg.Resolver)
	}
	if w.cfg.TLS.InsecureSkipVerify || w.cfg.TLS.RootCAs != nil || w.cfg.TLS.MinVersion != tls.VersionTLS12 {
		t.Error("production warmup does not verify against the system's roots")
	}
	if w.cfg.Allow(netip.MustParseAddr("127.0.0.1")) || !w.cfg.Allow(netip.MustParseAddr("8.8.8.8")) {
		t.Error("production warmup does not use the public address policy")
	}
}

func TestWarmupRequestsEveryPathThroughEveryHost(t *testing.T) {
	e := newEdge(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/private":
			w.WriteHeader(http.StatusUnauthorized)
		case "/gone":
			http.NotFound(w, r)
		case "/sign-in":
			http.Redirect(w, r, "/login", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	r := &fakeResolver{addresses: map[string][]string{
		"shop.example.com.": {"127.0.0.1"},
		"api.example.com.":  {"::ffff:127.0.0.1"},
	}}
	hosts := []string{"shop.example.com", "api.example.com", "shop.example.com"}
	paths := []string{"/", "/private", "/gone", "/sign-in", "/"}
	got, err := e.warmer(r, loopbackOnly).Warm(t.Context(), hosts, paths)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed() || got.Requests != 8 || len(got.Unreachable) != 0 {
		t.Errorf("warmup %+v", got)
	}
	for _, h := range []string{"shop.example.com", "api.example.com"} {
		for _, p := range []string{"/", "/private", "/gone", "/sign-in"} {
			if n := e.hit(h, p); n != 1 {
				t.Errorf("%s%s requested %d times, want once", h, p, n)
			}
		}
		if n := e.hit(h, "/login"); n != 0 {
			t.Errorf("the redirect on %s was followed", h)
		}
	}
	// Each host is resolved once, as an absolute name, for IPv4 alone.
	want := "ip4 shop.example.com.|ip4 api.example.com."
	if strings.Join(r.asked, "|") != want {
		t.Errorf("resolver asked %q, want %q", r.asked, want)
	}
}

func TestWarmupStopsAtTheFirstFailure(t *testing.T) {
	slow := slowHandler(2 * time.Second)
	e := newEdge(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/slow":
			slow(w, r)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	r := &fakeResolver{addresses: map[string][]string{
		"shop.example.com.": {"127.0.0.1"}, "www.example.com.": {"127.0.0.1"},
	}}
	hosts := []string{"shop.example.com", "www.example.com"}

	got, err := e.warmer(r, loopbackOnly).Warm(t.Context(), hosts, []string{"/", "/broken", "/after"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 2 || got.Failure == nil || got.Failure.String() != "shop.example.com/broken: 502" {
		t.Errorf("warmup %+v (failure %v)", got, got.Failure)
	}
	if e.hit("shop.example.com", "/after") != 0 || e.hit("www.example.com", "/") != 0 {
		t.Errorf("warmup went on after a 502: %v", e.hits)
	}

	got, err = e.warmer(r, loopbackOnly).Warm(t.Context(), hosts, []string{"/slow", "/after"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 1 || got.Failure == nil || got.Failure.String() != "shop.example.com/slow: no answer within 200ms" {
		t.Errorf("warmup %+v (failure %v)", got, got.Failure)
	}
}

func TestWarmupDialsOnlyAnAddressThePolicyAllows(t *testing.T) {
	e := newEdge(t, byPath(nil))
	r := &fakeResolver{addresses: map[string][]string{
		"shop.example.com.":     {"127.0.0.1"},
		"internal.example.com.": {"10.0.0.1", "169.254.169.254"},
		"v6.example.com.":       {"::1"},
	}}
	hosts := []string{"shop.example.com", "internal.example.com", "v6.example.com"}

	// The production policy refuses loopback: nothing is requested.
	prod := NewWarmer(WarmupConfig{Resolver: r, TLS: e.tls, Port: e.port, Timeout: 200 * time.Millisecond})
	got, err := prod.Warm(t.Context(), hosts, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed() || got.Requests != 0 || strings.Join(got.Unreachable, ",") != strings.Join(hosts, ",") {
		t.Errorf("warmup under the production policy %+v", got)
	}
	if e.total() != 0 {
		t.Errorf("a refused address was dialled: %v", e.hits)
	}

	// A policy that allows everything still dials IPv4 alone.
	got, err = e.warmer(r, func(netip.Addr) bool { return true }).Warm(t.Context(), []string{"v6.example.com"}, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 0 || len(got.Unreachable) != 1 {
		t.Errorf("an IPv6 address was dialled: %+v", got)
	}
}

func TestWarmupDialsTheAddressItChecked(t *testing.T) {
	e := newEdge(t, byPath(nil))
	// 127.0.0.2 is loopback too but nothing listens there: the warmer tries
	// the checked addresses in order and never the name, which resolves
	// nowhere outside this resolver.
	r := &fakeResolver{addresses: map[string][]string{"shop.example.com.": {"10.0.0.9", "127.0.0.2", "127.0.0.1"}}}
	allow := func(a netip.Addr) bool { return a.IsLoopback() }
	got, err := e.warmer(r, allow).Warm(t.Context(), []string{"shop.example.com"}, []string{"/a", "/b"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed() || got.Requests != 2 || e.hit("shop.example.com", "/a") != 1 {
		t.Errorf("warmup %+v, hits %v", got, e.hits)
	}
	if len(r.asked) != 1 {
		t.Errorf("the name was resolved %d times; each dial must use the address checked once", len(r.asked))
	}
}

func TestWarmupFailsOnAnUnresolvedHost(t *testing.T) {
	e := newEdge(t, byPath(nil))
	r := &fakeResolver{addresses: map[string][]string{}}
	got, err := e.warmer(r, loopbackOnly).Warm(t.Context(), []string{"gone.example.com"}, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failure == nil || got.Failure.Status != 0 || !strings.Contains(got.Failure.Cause, "resolving gone.example.com") {
		t.Errorf("warmup %+v (failure %v)", got, got.Failure)
	}
}

// hangingResolver answers no lookup until its context ends.
type hangingResolver struct{}

func (hangingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A lookup that hangs has the warmup's time per request, as a request has,
// not the whole round's.
func TestWarmupBoundsALookupThatHangs(t *testing.T) {
	e := newEdge(t, byPath(nil))
	done := make(chan Warmup, 1)
	go func() {
		got, _ := e.warmer(hangingResolver{}, loopbackOnly).Warm(context.Background(), []string{"slow.example.com"}, []string{"/"})
		done <- got
	}()
	select {
	case got := <-done:
		if got.Failure == nil || !strings.Contains(got.Failure.Cause, "resolving slow.example.com") {
			t.Errorf("warmup %+v (failure %v)", got, got.Failure)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the warmup waited on the lookup past its timeout")
	}
}

func TestWarmupRefusesABadCertificate(t *testing.T) {
	e := newEdge(t, byPath(nil))
	r := &fakeResolver{addresses: map[string][]string{"shop.example.org.": {"127.0.0.1"}}}
	// The certificate names *.example.com, not shop.example.org.
	got, err := e.warmer(r, loopbackOnly).Warm(t.Context(), []string{"shop.example.org"}, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failure == nil || !strings.Contains(got.Failure.Cause, "certificate") {
		t.Errorf("warmup %+v (failure %v)", got, got.Failure)
	}
}

func TestWarmupRefusesHostileInputBeforeAnyRequest(t *testing.T) {
	e := newEdge(t, byPath(nil))
	r := &fakeResolver{addresses: map[string][]string{"shop.example.com.": {"127.0.0.1"}}}
	w := e.warmer(r, loopbackOnly)
	for _, host := range []string{"127.0.0.1", "shop.example.com:8443", "localhost", "*.example.com", "evil.com/x", ""} {
		if _, err := w.Warm(t.Context(), []string{"shop.example.com", host}, []string{"/"}); err == nil {
			t.Errorf("Warm accepted host %q", host)
		}
	}
	for _, path := range []string{"//x", "/../x", "/?x", "https://evil.com/"} {
		if _, err := w.Warm(t.Context(), []string{"shop.example.com"}, []string{"/", path}); err == nil {
			t.Errorf("Warm accepted path %q", path)
		}
	}
	if len(r.asked) != 0 || e.total() != 0 {
		t.Errorf("hostile input reached the resolver %v or the edge %v", r.asked, e.hits)
	}
	// Nothing to request is a warmup without a request.
	got, err := w.Warm(t.Context(), []string{"shop.example.com"}, nil)
	if err != nil || got.Requests != 0 || got.Failed() {
		t.Errorf("warmup without paths %+v, %v", got, err)
	}
}

func TestWarmupReadsNoProxyFromTheEnvironment(t *testing.T) {
	proxy := newMember(t, byPath(map[string]int{"/": http.StatusBadGateway}))
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		t.Setenv(v, proxy.srv.URL)
	}
	t.Setenv("NO_PROXY", "")
	e := newEdge(t, byPath(nil))
	r := &fakeResolver{addresses: map[string][]string{"shop.example.com.": {"127.0.0.1"}}}
	got, err := e.warmer(r, loopbackOnly).Warm(t.Context(), []string{"shop.example.com"}, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed() || proxy.total() != 0 || e.hit("shop.example.com", "/") != 1 {
		t.Errorf("warmup %+v, proxy hits %v", got, proxy.hits)
	}
}

func TestWarmupEndsWithTheCallersContext(t *testing.T) {
	e := newEdge(t, slowHandler(5*time.Second))
	r := &fakeResolver{addresses: map[string][]string{"shop.example.com.": {"127.0.0.1"}}}
	w := NewWarmer(WarmupConfig{Resolver: r, Allow: loopbackOnly, TLS: e.tls, Port: e.port})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Warm(ctx, []string{"shop.example.com"}, []string{"/"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the caller's deadline", err)
	}
	done, stop := context.WithCancel(t.Context())
	stop()
	if _, err := w.Warm(done, []string{"shop.example.com"}, []string{"/"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want cancelled", err)
	}
}

func TestPinnedDialRefusesWhatWasNotChecked(t *testing.T) {
	dial := (&pinnedAddresses{byHost: map[string][]netip.Addr{}}).dial(time.Second)
	for _, addr := range []string{"shop.example.com:443", "no-port", "shop.example.com:99999"} {
		if conn, err := dial(t.Context(), "tcp", addr); err == nil {
			_ = conn.Close()
			t.Errorf("dialled %q", addr)
		}
	}
}
