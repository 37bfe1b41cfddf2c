package owntraffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestProductionSettings(t *testing.T) {
	p := New()
	if p.timeout != 2*time.Second || DefaultRequestTimeout != 2*time.Second {
		t.Errorf("request timeout %v, want 2s", p.timeout)
	}
	if p.concurrency != DefaultConcurrency || Rounds != 3 {
		t.Errorf("concurrency %d, rounds %d", p.concurrency, Rounds)
	}
	if p.budget != DefaultBudget {
		t.Errorf("budget %v, want DefaultBudget", p.budget)
	}
	tr := p.client.Transport.(*http.Transport)
	if tr.Proxy != nil {
		t.Error("the transport reads a proxy")
	}
	if p.client.CheckRedirect == nil || p.client.Jar != nil {
		t.Error("the client follows redirects or keeps cookies")
	}
	if tr.DisableKeepAlives || tr.MaxIdleConnsPerHost < DefaultConcurrency {
		t.Errorf("keep-alive off or too few idle connections: %d", tr.MaxIdleConnsPerHost)
	}
	// Options that say nothing leave the production values.
	q := New(WithRequestTimeout(0), WithConcurrency(0), WithDial(nil), WithBudget(0))
	if q.timeout != DefaultRequestTimeout || q.concurrency != DefaultConcurrency || q.dial == nil || q.budget != DefaultBudget {
		t.Errorf("empty options changed the sender: %v %d", q.timeout, q.concurrency)
	}
}

func TestProductionDialReachesTheBaseItNames(t *testing.T) {
	m := newMember(t, byPath(nil))
	traffic, err := New().OwnTraffic(t.Context(), m.srv.URL, []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != 3 || traffic.Failed != 0 || m.count("/") != 3 {
		t.Errorf("traffic %+v, hits %v", traffic, m.hits)
	}
}

func TestOwnTrafficRequestsEveryPathOncePerRound(t *testing.T) {
	m := newMember(t, byPath(nil))
	paths := []string{"/api/health/readiness", "/", "/orders", "/"}
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/health/readiness", "/", "/orders"} {
		if got := m.count(p); got != 3 {
			t.Errorf("%s requested %d times, want 3", p, got)
		}
	}
	if traffic.Requests != 9 || traffic.Answered != 9 || traffic.Failed != 0 || traffic.P95 <= 0 {
		t.Errorf("traffic %+v", traffic)
	}
	for _, h := range m.seenHeaders() {
		if h.Get("Authorization") != "" || h.Get("Cookie") != "" {
			t.Errorf("request carried credentials: %v", h)
		}
	}
	if v := Judge(traffic, Thresholds{ErrorRate: 0, Latency: time.Second}); !v.Pass {
		t.Errorf("verdict %+v", v)
	}
}

func TestOwnTrafficFailsOn5xx(t *testing.T) {
	m := newMember(t, byPath(map[string]int{"/broken": http.StatusServiceUnavailable, "/error": http.StatusInternalServerError}))
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), []string{"/", "/broken", "/error"})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != 9 || traffic.Failed != 6 || traffic.Answered != 9 {
		t.Errorf("traffic %+v", traffic)
	}
	for _, f := range traffic.Failures {
		if (f.Path != "/broken" || f.Status != 503) && (f.Path != "/error" || f.Status != 500) {
			t.Errorf("failure %v", f)
		}
	}
	v := Judge(traffic, Thresholds{ErrorRate: 0.5, Latency: time.Second})
	if v.Pass || !strings.Contains(v.Reason, "failed share 66.67% over 50%") || !strings.Contains(v.Reason, "6 of 9 requests failed") {
		t.Errorf("verdict %+v", v)
	}
}

func TestOwnTrafficPassesAnswersThatAreNot5xx(t *testing.T) {
	target := newMember(t, byPath(nil))
	m := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/private":
			w.WriteHeader(http.StatusUnauthorized)
		case "/gone":
			http.NotFound(w, r)
		case "/sign-in":
			http.Redirect(w, r, "/signed-in", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, target.srv.URL+"/landing", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), []string{"/private", "/gone", "/sign-in", "/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != 12 || traffic.Failed != 0 || traffic.Answered != 12 {
		t.Errorf("traffic %+v", traffic)
	}
	if m.count("/signed-in") != 0 || target.total() != 0 {
		t.Errorf("a redirect was followed: member %v, target %v", m.hits, target.hits)
	}
	if v := Judge(traffic, Thresholds{ErrorRate: 0, Latency: time.Second}); !v.Pass {
		t.Errorf("verdict %+v", v)
	}
}

func TestOwnTrafficFailsWithoutAnAnswerInTime(t *testing.T) {
	slow := slowHandler(2 * time.Second)
	m := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			slow(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	start := time.Now()
	traffic, err := m.sender(WithRequestTimeout(100*time.Millisecond)).OwnTraffic(t.Context(), m.base(t), []string{"/", "/slow"})
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %v: the requests did not run concurrently under their timeout", elapsed)
	}
	if traffic.Requests != 6 || traffic.Failed != 3 || traffic.Answered != 3 {
		t.Errorf("traffic %+v", traffic)
	}
	if traffic.P95 >= 100*time.Millisecond {
		t.Errorf("p95 %v counts the requests with no answer", traffic.P95)
	}
	if len(traffic.Failures) != 3 || traffic.Failures[0].String() != "/slow: no answer within 100ms" {
		t.Errorf("failures %v", traffic.Failures)
	}
}

// A copy that answers none of more paths than fit in the budget's waves
// gets figures, not an error: the requests the budget cut count as
// unanswered, made or not.
func TestOwnTrafficCutByItsBudgetCountsTheRestUnanswered(t *testing.T) {
	m := newMember(t, slowHandler(2*time.Second))
	paths := []string{"/a", "/b", "/c", "/d"}
	p := m.sender(WithRequestTimeout(100*time.Millisecond), WithConcurrency(2), WithBudget(250*time.Millisecond))
	start := time.Now()
	traffic, err := p.OwnTraffic(t.Context(), m.base(t), paths)
	if err != nil {
		t.Fatalf("a budget that ran out is the copy's doing, not an error: %v", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %v, past the budget", elapsed)
	}
	if traffic.Requests != 12 || traffic.Failed != 12 || traffic.Answered != 0 {
		t.Errorf("traffic %+v, want all 12 requests unanswered", traffic)
	}
	if last := traffic.Failures[len(traffic.Failures)-1]; last.Cause == "" {
		t.Errorf("a cut request names no cause: %+v", last)
	}
	// The asker leaving is still an error: the figures would be partial.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.OwnTraffic(gone, m.base(t), paths); err == nil {
		t.Fatal("traffic for an asker that left returned figures")
	}
}

// A copy that answers every request in time passes at the production
// settings, however many paths it is handed: no request is cut by the
// budget for waiting on a slot.
func TestOwnTrafficAtTheMostPathsCutsNothingAnsweredInTime(t *testing.T) {
	m := newMember(t, slowHandler(700*time.Millisecond))
	paths := make([]string, MaxPaths+1)
	for i := range paths {
		paths[i] = fmt.Sprintf("/p%d", i)
	}
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != Rounds*len(paths) || traffic.Failed != 0 {
		t.Fatalf("traffic %+v, want all %d answered", traffic, Rounds*len(paths))
	}
}

// A status that is no final HTTP answer (below 200 or above 599), which Go's
// client hands back as a server wrote it, is the member not answering.
func TestOwnTrafficFailsOnAStatusThatIsNoAnswer(t *testing.T) {
	for _, status := range []string{"099", "101", "600"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					for {
						if _, err := c.Read(buf); err != nil {
							return
						}
						if _, err := c.Write([]byte("HTTP/1.1 " + status + " Odd\r\nContent-Length: 0\r\n\r\n")); err != nil {
							return
						}
					}
				}()
			}
		}()
		p := New(WithDial(clusterDial(l.Addr().String())))
		base, _ := CanaryBase("shop-api", "shop", 8080)
		traffic, err := p.OwnTraffic(t.Context(), base, []string{"/"})
		if err != nil {
			t.Fatal(err)
		}
		if traffic.Failed != traffic.Requests || traffic.Answered != 0 || !strings.Contains(traffic.Failures[0].Cause, "no final HTTP status") {
			t.Errorf("status %s: traffic %+v", status, traffic)
		}
	}
}

func TestOwnTrafficFailsOnConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := New(WithDial(clusterDial(addr)))
	base, _ := CanaryBase("shop-api", "shop", 8080)
	traffic, err := p.OwnTraffic(t.Context(), base, []string{"/", "/health"})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != 6 || traffic.Failed != 6 || traffic.Answered != 0 || traffic.P95 != 0 {
		t.Errorf("traffic %+v", traffic)
	}
	if traffic.Failures[0].Cause != "connection refused" {
		t.Errorf("cause %q", traffic.Failures[0].Cause)
	}
	v := Judge(traffic, Thresholds{ErrorRate: 1, Latency: time.Hour})
	if v.Pass || !strings.HasPrefix(v.Reason, "own traffic: no request succeeded (6 of 6 requests failed") {
		t.Errorf("verdict %+v", v)
	}
}

func TestOwnTrafficAroundTheThresholds(t *testing.T) {
	// Ten paths, one of them failing: 3 of 30 requests fail, a share of
	// exactly 10%.
	paths := []string{"/broken", "/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i"}
	m := newMember(t, byPath(map[string]int{"/broken": http.StatusBadGateway}))
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Requests != 30 || traffic.Failed != 3 {
		t.Fatalf("traffic %+v", traffic)
	}
	cases := []struct {
		th   Thresholds
		pass bool
	}{
		{Thresholds{ErrorRate: 0.1, Latency: time.Second}, true},
		{Thresholds{ErrorRate: 0.099, Latency: time.Second}, false},
		{Thresholds{ErrorRate: 0.1, Latency: traffic.P95}, true},
		{Thresholds{ErrorRate: 0.1, Latency: traffic.P95 - 1}, false},
	}
	for _, c := range cases {
		if v := Judge(traffic, c.th); v.Pass != c.pass {
			t.Errorf("Judge(%+v) = %+v, want pass=%v", c.th, v, c.pass)
		}
	}
}

func TestOwnTrafficLatencyOverTheThreshold(t *testing.T) {
	slow := slowHandler(60 * time.Millisecond)
	m := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			slow(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), []string{"/", "/report"})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Failed != 0 || traffic.P95 < 60*time.Millisecond {
		t.Fatalf("traffic %+v", traffic)
	}
	if v := Judge(traffic, Thresholds{ErrorRate: 0, Latency: 50 * time.Millisecond}); v.Pass || !strings.Contains(v.Reason, "over 50ms") {
		t.Errorf("verdict %+v", v)
	}
	if v := Judge(traffic, Thresholds{ErrorRate: 0, Latency: time.Second}); !v.Pass {
		t.Errorf("verdict %+v", v)
	}
}

func TestOwnTrafficRefusesHostilePathsBeforeAnyRequest(t *testing.T) {
	m := newMember(t, byPath(nil))
	p := m.sender()
	for _, hostile := range []string{
		"//evil.example.com/", "/a/../admin", "http://evil.example.com/", "/a?x=1", "/a#top",
		"/a b", "/a\x00", "/a\r\nHost: evil", "/%2e%2e/admin", "", "relative",
	} {
		if _, err := p.OwnTraffic(t.Context(), m.base(t), []string{"/", hostile}); err == nil {
			t.Errorf("OwnTraffic accepted %q", hostile)
		}
		if _, err := p.Protected(t.Context(), m.base(t), "shop-api", hostile); err == nil {
			t.Errorf("Protected accepted %q", hostile)
		}
	}
	for _, base := range []string{"http://shop:8080/x", "ftp://shop", "http://user@shop"} {
		if _, err := p.OwnTraffic(t.Context(), base, []string{"/"}); err == nil {
			t.Errorf("OwnTraffic accepted base %q", base)
		}
		if _, err := p.Protected(t.Context(), base, "shop-api", "/"); err == nil {
			t.Errorf("Protected accepted base %q", base)
		}
	}
	// A Canary's MaxPaths and the readiness path are the most one question asks.
	tooMany := make([]string, MaxPaths+2)
	for i := range tooMany {
		tooMany[i] = "/p" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	if _, err := p.OwnTraffic(t.Context(), m.base(t), tooMany); err == nil {
		t.Error("OwnTraffic accepted more than MaxPaths+1 paths")
	}
	if n := m.total(); n != 0 {
		t.Errorf("%d requests reached the member", n)
	}
}

func TestOwnTrafficRunsConcurrentlyWithinTheBound(t *testing.T) {
	var inFlight, most atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	m := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		if n == 30 {
			once.Do(func() { close(all) })
		}
		// Hold every request until all 30 are in flight, or give up.
		select {
		case <-all:
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
	})
	paths := []string{"/0", "/1", "/2", "/3", "/4", "/5", "/6", "/7", "/8", "/9"}
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), paths)
	if err != nil {
		t.Fatal(err)
	}
	if most.Load() != 30 || traffic.Failed != 0 {
		t.Errorf("at most %d requests in flight, want all 30; traffic %+v", most.Load(), traffic)
	}

	// Under a bound of 4, held requests pile up to 4 and no more.
	var bounded, boundedMost atomic.Int32
	hold := slowHandler(20 * time.Millisecond)
	b := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		n := bounded.Add(1)
		defer bounded.Add(-1)
		for {
			old := boundedMost.Load()
			if n <= old || boundedMost.CompareAndSwap(old, n) {
				break
			}
		}
		hold(w, r)
	})
	if _, err := b.sender(WithConcurrency(4)).OwnTraffic(t.Context(), b.base(t), paths); err != nil {
		t.Fatal(err)
	}
	if got := boundedMost.Load(); got != 4 {
		t.Errorf("at most %d requests in flight under a bound of 4, want 4", got)
	}
}

func TestOwnTrafficKeepsConnectionsAlive(t *testing.T) {
	var opened atomic.Int32
	m := startMember(t, byPath(nil), func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
	})
	p := m.sender(WithConcurrency(1))
	for range 2 {
		if _, err := p.OwnTraffic(t.Context(), m.base(t), []string{"/", "/a", "/b"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := opened.Load(); got != 1 {
		t.Errorf("%d connections opened for 18 requests one at a time, want 1", got)
	}
}

func TestOwnTrafficReadsNoProxyFromTheEnvironment(t *testing.T) {
	proxy := newMember(t, byPath(map[string]int{"/": http.StatusBadGateway}))
	t.Setenv("HTTP_PROXY", proxy.srv.URL)
	t.Setenv("http_proxy", proxy.srv.URL)
	t.Setenv("NO_PROXY", "")
	m := newMember(t, byPath(nil))
	traffic, err := m.sender().OwnTraffic(t.Context(), m.base(t), []string{"/"})
	if err != nil {
		t.Fatal(err)
	}
	if proxy.total() != 0 || m.count("/") != 3 || traffic.Failed != 0 {
		t.Errorf("proxy hits %v, member hits %v", proxy.hits, m.hits)
	}
}

func TestOwnTrafficEndsWithTheCallersContext(t *testing.T) {
	m := newMember(t, slowHandler(5*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.sender(WithConcurrency(2)).OwnTraffic(ctx, m.base(t), []string{"/a", "/b", "/c"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the caller's deadline", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("took %v after the caller left", elapsed)
	}
	if n := m.total(); n > 2 {
		t.Errorf("%d requests started after the bound of 2 and the caller's end", n)
	}

	done, stop := context.WithCancel(t.Context())
	stop()
	if _, err := m.sender().Protected(done, m.base(t), "shop-api", "/"); !errors.Is(err, context.Canceled) {
		t.Errorf("Protected err %v, want cancelled", err)
	}
}

func TestNoAnswerCauses(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, "no answer within 2s"},
		{&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, "cancelled"},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.New("EOF")}, "no answer: EOF"},
		{errors.New("reset"), "no answer: reset"},
	}
	for _, c := range cases {
		if got := noAnswer(c.err, 2*time.Second); got != c.want {
			t.Errorf("noAnswer(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestAnswerString(t *testing.T) {
	for a, want := range map[Answer]string{
		{Path: "/a", Status: 503}:                           "/a: 503",
		{Path: "/a", Cause: "connection refused"}:           "/a: connection refused",
		{Host: "shop.example.com", Path: "/a", Status: 502}: "shop.example.com/a: 502",
	} {
		if got := a.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", a, got, want)
		}
	}
}
