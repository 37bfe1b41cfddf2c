package owntraffic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/hits"
)

// member is a real HTTP server standing in for a member's Canary service,
// counting what it was asked.
type member struct {
	srv  *httptest.Server
	hits *hits.Counter
	// mu guards headers.
	mu      sync.Mutex
	headers []http.Header
}

func newMember(t *testing.T, handler http.HandlerFunc) *member {
	t.Helper()
	return startMember(t, handler, nil)
}

func newMemberB(b *testing.B, handler http.HandlerFunc) *member {
	b.Helper()
	return startMember(b, handler, nil)
}

// startMember starts the server after configure has set it up.
func startMember(t testing.TB, handler http.HandlerFunc, configure func(*http.Server)) *member {
	t.Helper()
	m := &member{hits: &hits.Counter{}}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The headers first: a test that sees the hit counted then reads
		// them, and the counter's lock orders the two.
		m.mu.Lock()
		m.headers = append(m.headers, r.Header.Clone())
		m.mu.Unlock()
		m.hits.Add(r.URL.EscapedPath())
		handler(w, r)
	}))
	if configure != nil {
		configure(m.srv.Config)
	}
	m.srv.Start()
	t.Cleanup(m.srv.Close)
	return m
}

func (m *member) count(path string) int { return m.hits.Count(path) }

func (m *member) total() int { return m.hits.Total() }

// seenHeaders is a copy of the headers of every request so far.
func (m *member) seenHeaders() []http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.headers)
}

// base is the member's Canary service as production names it.
func (m *member) base(t *testing.T) string {
	t.Helper()
	base, err := CanaryBase("shop-api", "shop", 8080)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// clusterDial maps every *.svc.cluster.local name to target, as cluster DNS
// and the Service would; any other address is dialled as it is.
func clusterDial(target string) DialFunc {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(host, ".svc.cluster.local") {
			addr = target
		}
		return d.DialContext(ctx, network, addr)
	}
}

func (m *member) sender(opts ...Option) *Sender {
	return New(append([]Option{WithDial(clusterDial(m.srv.Listener.Addr().String()))}, opts...)...)
}

// byPath answers each path with its status; any other path 200.
func byPath(statuses map[string]int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s, ok := statuses[r.URL.Path]; ok {
			w.WriteHeader(s)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// slowHandler answers after delay unless the request ends first, so a
// server that is too slow does not hold the test up once the client left.
func slowHandler(delay time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
			_, _ = w.Write([]byte("late"))
		case <-r.Context().Done():
			// The client left: answer nothing rather than an empty 200.
			panic(http.ErrAbortHandler)
		}
	}
}
