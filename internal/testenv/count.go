package testenv

import (
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the API requests a client made, by verb and path
// without the object's name, so a test or benchmark can state what a
// decision cost the API server.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Counting returns a copy of cfg whose requests are counted by the returned counter.
func Counting(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	c := &RequestCounter{counts: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.mu.Lock()
			c.counts[r.Method+" "+r.URL.Path]++
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return out, c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Total is the number of requests since the last Reset.
func (c *RequestCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Matching counts the requests whose "METHOD /path" contains every fragment.
func (c *RequestCounter) Matching(fragments ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
next:
	for k, v := range c.counts {
		for _, f := range fragments {
			if !strings.Contains(k, f) {
				continue next
			}
		}
		n += v
	}
	return n
}

// Requests lists "METHOD /path" of every request counted, sorted.
func (c *RequestCounter) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.counts))
	for k := range c.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Reset forgets what was counted.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}
