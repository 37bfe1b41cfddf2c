package githubapp

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// etagServer answers every GET with one ETag, and 304 to a request that
// names it; its body is the path, or body when set.
type etagServer struct {
	calls int
	body  string
}

func (s *etagServer) RoundTrip(r *http.Request) (*http.Response, error) {
	s.calls++
	h := http.Header{}
	h.Set("ETag", `"v1"`)
	if r.Header.Get("If-None-Match") == `"v1"` {
		return &http.Response{StatusCode: http.StatusNotModified, Header: h, Body: http.NoBody, Request: r}, nil
	}
	body := s.body
	if body == "" {
		body = r.URL.Path
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1, Request: r}, nil
}

// A full cache keeps what it holds rather than make room, so a pass larger
// than the cache, read again in the same order, is answered from the cache
// for the part it holds; an entry no one asked for in unusedFor makes room.
func TestConditionalCacheIsBounded(t *testing.T) {
	const body = 1 << 20
	server := &etagServer{body: strings.Repeat("x", body)}
	c := newConditional(server)
	now := time.Now()
	c.now = func() time.Time { return now }
	const kept = maxCachedBytes / (body + len("https://api.example/r/00\x00"))
	pass := func() (fromCache int) {
		for i := range kept + 5 {
			if send(t, c, http.MethodGet, fmt.Sprintf("/r/%02d", i), "").Header.Get(FromCacheHeader) == "1" {
				fromCache++
			}
		}
		return fromCache
	}
	pass()
	if len(c.entries) != kept || c.size > maxCachedBytes {
		t.Fatalf("%d entries, %d bytes kept; want %d", len(c.entries), c.size, kept)
	}
	if n := pass(); n != kept {
		t.Fatalf("the second pass had %d answers from the cache, want the %d it holds", n, kept)
	}
	// The first entry goes unasked for unusedFor; a new answer takes its place.
	now = now.Add(unusedFor + time.Minute)
	for i := 1; i < kept; i++ {
		send(t, c, http.MethodGet, fmt.Sprintf("/r/%02d", i), "")
	}
	send(t, c, http.MethodGet, "/r/new", "")
	if _, ok := c.entries[cacheKey(&http.Request{URL: mustURL("https://api.example/r/00"), Header: http.Header{}})]; ok {
		t.Fatal("an entry unused for longer than unusedFor was kept over a new answer")
	}
	if _, ok := c.entries[cacheKey(&http.Request{URL: mustURL("https://api.example/r/new"), Header: http.Header{}})]; !ok || c.size > maxCachedBytes {
		t.Fatalf("the new answer was not kept in the room made (%d bytes)", c.size)
	}
}

// Writes, and requests that are already conditional, pass through untouched:
// the cache adds no If-None-Match of its own and answers none of them.
func TestConditionalCacheLeavesWritesAndConditionalRequests(t *testing.T) {
	seen := map[string]string{}
	server := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("If-None-Match")
		return (&etagServer{}).RoundTrip(r)
	})
	c := newConditional(server)
	do := func(method, path, ifNoneMatch string) *http.Response { return send(t, c, method, path, ifNoneMatch) }
	do(http.MethodGet, "/r/1", "") // cached, with the ETag "v1"
	if resp := do(http.MethodPut, "/r/1", ""); seen["PUT /r/1"] != "" || resp.Header.Get(FromCacheHeader) != "" {
		t.Fatalf("a PUT went with If-None-Match %q, or from the cache", seen["PUT /r/1"])
	}
	if resp := do(http.MethodGet, "/r/1", `"other"`); seen["GET /r/1"] != `"other"` || resp.Header.Get(FromCacheHeader) != "" {
		t.Fatalf("a conditional GET went with If-None-Match %q, or from the cache", seen["GET /r/1"])
	}
}

// send makes one request through c, its body read and closed.
func send(t *testing.T, c http.RoundTripper, method, path, ifNoneMatch string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "https://api.example"+path, nil)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A pass over more URLs than a thousand, read again in the same order, is
// answered from the cache whole: nothing it needs was evicted.
func TestConditionalCacheKeepsALargePass(t *testing.T) {
	server := &etagServer{}
	c := newConditional(server)
	get := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example"+path, nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const urls = 5000
	for i := range urls {
		get(fmt.Sprintf("/repos/o/r/deployments/%d/statuses", i)).Body.Close()
	}
	for i := range urls {
		path := fmt.Sprintf("/repos/o/r/deployments/%d/statuses", i)
		resp := get(path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get(FromCacheHeader) != "1" || string(body) != path {
			t.Fatalf("read %d of the second pass: %q, cached %q", i, body, resp.Header.Get(FromCacheHeader))
		}
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// largeServer answers every GET with a body of unknown length larger than the
// cache keeps, as a chunked or gzip-unzipped reply arrives.
type largeServer struct{ body string }

func (s largeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("ETag", `"big"`)
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(s.body)), ContentLength: -1, Request: r}, nil
}

// A body of unknown length too large to keep reaches the caller whole, and
// is not kept.
func TestConditionalPassesALargeBodyWhole(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", maxCachedBody/16+1024)
	c := newConditional(largeServer{body: body})
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/big", nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || len(got) != len(body) || string(got) != body {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(body), err)
	}
	if len(c.entries) != 0 {
		t.Fatal("a body over the cache's bound was kept")
	}
}
