package testenv

import (
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/hits"
)

// RequestCounter counts the API requests a client made, by "METHOD /path"
// without the object's name, so a test or benchmark can state what a
// decision cost the API server. Count, Total, Reset and String are its
// hits.Counter's.
type RequestCounter struct {
	hits.Counter
}

// Counting returns a copy of cfg whose requests are counted by the returned counter.
func Counting(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	c := &RequestCounter{}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.Add(r.Method + " " + r.URL.Path)
			return rt.RoundTrip(r)
		})
	})
	return out, c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Matching counts the requests whose "METHOD /path" contains every fragment.
func (c *RequestCounter) Matching(fragments ...string) int {
	return c.Sum(func(key string) bool {
		for _, f := range fragments {
			if !strings.Contains(key, f) {
				return false
			}
		}
		return true
	})
}

// Requests lists "METHOD /path" of every request counted, sorted.
func (c *RequestCounter) Requests() []string { return c.Keys() }
