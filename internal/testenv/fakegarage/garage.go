package fakegarage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Garage is a running double. Its methods arrange and inspect its state.
type Garage struct {
	// URL is the admin API's base address, http://127.0.0.1:<port>.
	URL string
	// Token is the admin token it accepts as a bearer token.
	Token string

	drift  func(error)
	router routers.Router
	srv    *httptest.Server

	mu       sync.Mutex
	keys     map[string]*key
	buckets  map[string]*bucket
	aliases  map[string]string
	requests map[string]int
	writes   int
}

// Option changes how New builds the double.
type Option func(*Garage)

// OnDrift hands every disagreement with the published document to report
// instead of failing the test; the double's own tests use it.
func OnDrift(report func(error)) Option { return func(g *Garage) { g.drift = report } }

// New starts a double for this test, empty like a Garage built from nothing,
// and stops it when the test ends. Without Garage's document beside the
// repository the test fails, naming the file.
func New(t testing.TB, opts ...Option) *Garage {
	t.Helper()
	path, err := DocumentPath()
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := LoadDocument(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route Garage's admin API document: %v", err)
	}
	g := &Garage{
		Token:  "admin-" + randomHex(16),
		router: router,
		drift:  func(err error) { t.Errorf("garage double: drift from Garage's admin API document: %v", err) },
	}
	g.reset()
	for _, o := range opts {
		o(g)
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	t.Cleanup(g.srv.Close)
	return g
}

func (g *Garage) reset() {
	g.keys = map[string]*key{}
	g.buckets = map[string]*bucket{}
	g.aliases = map[string]string{}
	g.requests = map[string]int{}
	g.writes = 0
}

// Rebuild drops every key, bucket, alias and grant: Garage rebuilt from
// nothing. The request counts start again too.
func (g *Garage) Rebuild() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reset()
}

// Writes is how many requests that change state (every POST) Garage received
// since it started or was rebuilt, answered or refused.
func (g *Garage) Writes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// Requests is how many requests of one operation (GetKeyInfo, ...) Garage
// received.
func (g *Garage) Requests(operation string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests[operation]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
