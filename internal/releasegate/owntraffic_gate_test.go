package releasegate_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/hits"
)

// testRequestTimeout stands in for owntraffic.DefaultRequestTimeout so a slow
// member costs the tests little; the rule is the same.
const testRequestTimeout = 400 * time.Millisecond

// canaryServices maps Canary service names to loopback servers: the dial seam
// of the gate's sender in tests. A name it does not know is refused, and
// every dial is counted, so a test can prove no request was made.
type canaryServices struct {
	mu     sync.Mutex
	addr   map[string]string
	dialed map[string]int
}

func newCanaryServices() *canaryServices {
	return &canaryServices{addr: map[string]string{}, dialed: map[string]int{}}
}

func serviceName(ns, process string) string { return process + "-canary." + ns + ".svc.cluster.local" }

func (s *canaryServices) route(ns, process, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr[serviceName(ns, process)] = addr
}

func (s *canaryServices) dials(ns, process string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialed[serviceName(ns, process)]
}

func (s *canaryServices) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.dialed[host]++
	target, ok := s.addr[host]
	s.mu.Unlock()
	if !ok || !strings.HasSuffix(host, ".svc.cluster.local") {
		return nil, fmt.Errorf("no route to %s in this test", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, target)
}

// copyServer stands in for a member's new copy behind its Canary service.
type copyServer struct {
	srv  *httptest.Server
	hits *hits.Counter
	// mu guards auth.
	mu   sync.Mutex
	auth int
}

func newCopyServer(t testing.TB, handler http.HandlerFunc) *copyServer {
	t.Helper()
	c := &copyServer{hits: &hits.Counter{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// auth first: a test that sees the hit counted then reads it.
		c.mu.Lock()
		if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
			c.auth++
		}
		c.mu.Unlock()
		c.hits.Add(r.URL.Path)
		handler(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *copyServer) count(path string) int { return c.hits.Count(path) }

func (c *copyServer) total() int { return c.hits.Total() }

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// serveWithOwnTraffic is serve with the gate's sender reaching services through
// the dial seam; the sender is set before the gate serves.
func serveWithOwnTraffic(t testing.TB, cfg *rest.Config, flaggerNS string, services *canaryServices, opts ...owntraffic.Option) *running {
	t.Helper()
	return serveWith(t, cfg, flaggerNS, owntraffic.New(append([]owntraffic.Option{owntraffic.WithDial(services.dial), owntraffic.WithRequestTimeout(testRequestTimeout)}, opts...)...))
}

// checkedInputs renders the auth inputs with checks on the members named and
// extra top-level fields.
func checkedInputs(a *app, checked map[string]bool, extra string) string {
	var ms []string
	for _, m := range a.members {
		checks := ""
		if checked[m.process] {
			checks = `,"checks":["error-rate","latency"]`
		}
		ms = append(ms, fmt.Sprintf(`{"process":%q,"readiness":{"path":"/ready","port":8080}%s}`, m.process, checks))
	}
	return `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080","members":[` +
		strings.Join(ms, ",") + `]` + extra + `}`
}

const thresholds = `,"errorRate":0.05,"latency":"200ms"`

// byPath answers each path with its handler; any other path 200.
func byPath(handlers map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := handlers[r.URL.Path]; ok {
			h(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

func sleep(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("late"))
	}
}

func redirect(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
}

// TestChecksOwnTraffic asks /checks of a member its Canary hands paths,
// with the real API server and a loopback server standing in for the new
// copy behind its Canary service.
func TestChecksOwnTraffic(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	services := newCanaryServices()
	gate := serveWithOwnTraffic(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS, services)

	rows := []struct {
		name    string
		handler http.HandlerFunc
		// paths is what auth-api's Canary hands; `["/","/api"]` when empty.
		paths   string
		extra   string
		prepare func(a *app)
		refused bool
		status  int
		reason  string
		cause   string
		// requests is how many requests the new copy must have met.
		requests int
		check    func(t *testing.T, c *copyServer)
	}{
		{name: "every path and the readiness path answered: yes, with the figures",
			handler: byPath(nil), status: http.StatusOK, requests: 9,
			reason: "new copy auth-api: 2 pods ready, none restarted; own traffic: 0 of 9 requests failed",
			check: func(t *testing.T, c *copyServer) {
				for _, p := range []string{"/", "/api", "/ready"} {
					if c.count(p) != owntraffic.Rounds {
						t.Errorf("%s requested %d times, want %d", p, c.count(p), owntraffic.Rounds)
					}
				}
				if c.auth != 0 {
					t.Errorf("%d requests carried credentials", c.auth)
				}
			}},
		{name: "5xx over the error rate: 409 with the figures",
			handler: byPath(map[string]http.HandlerFunc{"/api": status(http.StatusBadGateway)}), status: http.StatusConflict, requests: 9,
			reason: "new copy auth-api: own traffic: failed share 33.33% over 5% (3 of 9 requests failed, p95 "},
		{name: "5xx names the first failed request",
			handler: byPath(map[string]http.HandlerFunc{"/api": status(http.StatusInternalServerError)}), status: http.StatusConflict, requests: 9,
			reason: "; first /api: 500)"},
		{name: "401 and 404 are the member answering and pass",
			handler: byPath(map[string]http.HandlerFunc{"/": status(http.StatusUnauthorized), "/api": status(http.StatusNotFound)}),
			status:  http.StatusOK, requests: 9, reason: "0 of 9 requests failed"},
		{name: "an answer slower than the latency threshold: 409 with the p95",
			handler: byPath(map[string]http.HandlerFunc{"/api": sleep(250 * time.Millisecond)}), status: http.StatusConflict, requests: 9,
			reason: "own traffic: p95 "},
		{name: "no answer within the request timeout fails the request",
			handler: byPath(map[string]http.HandlerFunc{"/api": sleep(2 * testRequestTimeout)}), status: http.StatusConflict, requests: 9,
			reason: "first /api: no answer within " + testRequestTimeout.String()},
		{name: "a 302 is an answer and is not followed",
			paths:   `["/login"]`,
			handler: byPath(map[string]http.HandlerFunc{"/login": redirect("/signed-in")}), status: http.StatusOK, requests: 6,
			reason: "0 of 6 requests failed",
			check: func(t *testing.T, c *copyServer) {
				if n := c.count("/signed-in"); n != 0 {
					t.Errorf("the redirect's target was requested %d times", n)
				}
			}},
		{name: "connection refused: no request succeeded is no",
			refused: true, status: http.StatusConflict,
			reason: "own traffic: no request succeeded (9 of 9 requests failed, p95 0s; first /: connection refused)"},
		{name: "inputs with no thresholds hold the member to the platform's",
			handler: byPath(map[string]http.HandlerFunc{"/api": status(http.StatusBadGateway)}), extra: "-", status: http.StatusConflict, requests: 9,
			reason: "own traffic: failed share 33.33% over 1% (3 of 9 requests failed"},
		{name: "inputs with no thresholds pass on the platform's",
			handler: byPath(map[string]http.HandlerFunc{"/api": sleep(250 * time.Millisecond)}), extra: "-", status: http.StatusOK, requests: 9,
			reason: "0 of 9 requests failed"},
		{name: "a member whose checks name no metric is requested all the same",
			prepare: func(a *app) { a.inputs = checkedInputs(a, nil, thresholds) },
			handler: byPath(map[string]http.HandlerFunc{"/": status(http.StatusServiceUnavailable)}), status: http.StatusConflict, requests: 9,
			reason: "first /: 503"},
		{name: "a hostile path cannot be answered, and nothing is requested",
			paths: `["/","/a/../admin"]`, handler: byPath(nil), status: http.StatusServiceUnavailable, cause: `has a \"..\" segment`},
		{name: "a path with a host cannot be answered, and nothing is requested",
			paths: `["//evil.example/"]`, handler: byPath(nil), status: http.StatusServiceUnavailable, cause: "empty segment"},
		{name: "a new copy whose pods are not all ready is not requested",
			prepare: func(a *app) { a.member("auth-api").pods[1].ready = false }, handler: byPath(nil),
			status: http.StatusConflict, reason: "pod auth-api-1 not ready (1 of 2 ready)"},
		{name: "a member its Canary hands no path is held to its pods alone",
			paths: "-", handler: byPath(nil), status: http.StatusOK, reason: "new copy auth-api: 2 pods ready, none restarted"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			a := authApp(ns)
			a.member("auth-api").paths = row.paths
			switch row.paths {
			case "":
				a.member("auth-api").paths = `["/","/api"]`
			case "-":
				a.member("auth-api").paths = ""
			}
			extra := row.extra
			switch extra {
			case "":
				extra = thresholds
			case "-":
				extra = ""
			}
			a.inputs = checkedInputs(a, map[string]bool{"auth-api": true}, extra)
			if row.prepare != nil {
				row.prepare(a)
			}
			a.apply(t, cp)
			var c *copyServer
			if row.refused {
				services.route(ns, "auth-api", refusedAddr(t))
			} else {
				c = newCopyServer(t, row.handler)
				services.route(ns, "auth-api", c.srv.Listener.Addr().String())
			}

			code, reason := gate.ask(t, flagger, "/checks", payload(ns, "auth-api", rev))
			if code != row.status || !strings.Contains(reason, row.reason) {
				t.Fatalf("/checks: %d %q, want %d containing %q\nlog:\n%s", code, reason, row.status, row.reason, gate.logs.String())
			}
			if code == http.StatusServiceUnavailable {
				if line := logLine(gate.logs.String(), ns, "cannot answer"); !strings.Contains(line, row.cause) || row.cause == "" {
					t.Fatalf("the log line %q does not name the cause %q", line, row.cause)
				}
			}
			if c != nil {
				if got := c.total(); got != row.requests {
					t.Fatalf("the new copy met %d requests, want %d", got, row.requests)
				}
				if row.check != nil {
					row.check(t, c)
				}
			}
			if row.requests == 0 && !row.refused && services.dials(ns, "auth-api") != 0 {
				t.Fatalf("the gate dialled the Canary service %d times", services.dials(ns, "auth-api"))
			}
		})
	}
}

// TestMayPromoteProtectedPath asks /may-promote with the barrier open and a
// protected path in the inputs, a loopback server standing in for the
// protectedBy member's Canary service.
func TestMayPromoteProtectedPath(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	services := newCanaryServices()
	gate := serveWithOwnTraffic(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS, services)

	rows := []struct {
		name    string
		by      string
		path    string
		handler http.HandlerFunc
		refused bool
		status  int
		reason  string
		cause   string
		// asked is whether the protected path must have been requested.
		asked bool
		check func(t *testing.T, c *copyServer)
	}{
		{name: "a protected path served to anyone holds the release",
			by: "auth-api", handler: byPath(nil), status: http.StatusConflict, asked: true,
			reason: "E_CLIENT_OPEN: auth-api serves /admin/ to anyone",
			check: func(t *testing.T, c *copyServer) {
				if c.auth != 0 {
					t.Errorf("the request carried credentials")
				}
			}},
		{name: "a 401 passes",
			by: "auth-api", handler: byPath(map[string]http.HandlerFunc{"/admin/": status(http.StatusUnauthorized)}),
			status: http.StatusOK, asked: true, reason: "barrier open: every member of auth passed " + tag + " or did not change; auth-api answers /admin/ with 401"},
		{name: "a redirect to sign in passes and is not followed",
			by: "auth-api", handler: byPath(map[string]http.HandlerFunc{"/admin/": redirect("/sign-in")}),
			status: http.StatusOK, asked: true, reason: "auth-api answers /admin/ with 302",
			check: func(t *testing.T, c *copyServer) {
				if c.count("/sign-in") != 0 {
					t.Errorf("the redirect was followed")
				}
			}},
		{name: "no answer holds the release",
			by: "auth-api", refused: true, status: http.StatusConflict, asked: true,
			reason: "auth-api did not answer /admin/ (connection refused), so it is not shown protected"},
		{name: "a protectedBy member that did not change is not asked",
			by: "auth-ui", handler: byPath(nil), status: http.StatusOK, reason: "barrier open"},
		{name: "a protectedBy that is no member cannot be answered",
			by: "auth-admin", handler: byPath(nil), status: http.StatusServiceUnavailable, cause: "protectedBy auth-admin is no member of Application auth"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			a := authApp(ns)
			path := row.path
			if path == "" {
				path = "/admin/"
			}
			a.inputs = checkedInputs(a, nil, fmt.Sprintf(`,"protectedPath":%q,"protectedBy":%q`, path, row.by))
			a.apply(t, cp)
			var c *copyServer
			if row.refused {
				services.route(ns, row.by, refusedAddr(t))
			} else {
				c = newCopyServer(t, row.handler)
				services.route(ns, row.by, c.srv.Listener.Addr().String())
			}

			code, reason := gate.ask(t, flagger, "/may-promote", payload(ns, "auth-api", rev))
			if code != row.status || !strings.Contains(reason, row.reason) {
				t.Fatalf("/may-promote: %d %q, want %d containing %q\nlog:\n%s", code, reason, row.status, row.reason, gate.logs.String())
			}
			if code == http.StatusServiceUnavailable {
				if line := logLine(gate.logs.String(), ns, "cannot answer"); !strings.Contains(line, row.cause) || row.cause == "" {
					t.Fatalf("the log line %q does not name the cause %q", line, row.cause)
				}
			}
			if asked := services.dials(ns, row.by) > 0; asked != row.asked {
				t.Fatalf("protected path asked: %v, want %v", asked, row.asked)
			}
			if c != nil {
				if want := map[bool]int{true: 1}[row.asked]; c.count(path) != want {
					t.Fatalf("%s requested %d times, want %d", path, c.count(path), want)
				}
				if row.check != nil {
					row.check(t, c)
				}
			}
		})
	}
}
