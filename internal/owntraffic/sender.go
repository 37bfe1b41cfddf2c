package owntraffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Production settings of the gate's requests to a member's Canary service.
const (
	// DefaultRequestTimeout is how long a request may wait for an answer
	// before it counts as failed.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultConcurrency bounds the requests in flight for one question. It
	// lets every request of one iteration (Rounds over MaxPaths and the
	// readiness path) run at once, so each has its whole request timeout
	// inside the budget: a copy that answers every request in time is never
	// cut by the budget and scored as unanswered.
	DefaultConcurrency = (MaxPaths + 1) * Rounds
	// DefaultBudget is how long one iteration's own traffic may take in
	// all: a copy that answers none of many paths runs out of it before
	// every wave of requests was made. A caller answering under a deadline
	// of its own sets WithBudget to fit it.
	DefaultBudget = 4 * time.Second
	// Rounds is how many times each path is requested per iteration.
	Rounds = 3
	// MaxPaths bounds the distinct paths one member's Canary may hand the
	// gate; its readiness path is requested on top of them.
	MaxPaths = 64
	// MaxFailures is how many failed requests a Traffic keeps to name.
	MaxFailures = 5
	// drainLimit bounds how much of a body is read so the connection can be
	// kept alive; an answer longer than this costs a new connection instead.
	drainLimit = 64 << 10
)

// DialFunc opens a connection to addr ("host:port") on network.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Option changes a Sender.
type Option func(*Sender)

// WithRequestTimeout replaces DefaultRequestTimeout. Tests use it to keep a
// slow server's cost low.
func WithRequestTimeout(d time.Duration) Option {
	return func(p *Sender) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// WithBudget replaces DefaultBudget.
func WithBudget(d time.Duration) Option {
	return func(p *Sender) {
		if d > 0 {
			p.budget = d
		}
	}
}

// WithConcurrency replaces DefaultConcurrency.
func WithConcurrency(n int) Option {
	return func(p *Sender) {
		if n > 0 {
			p.concurrency = n
		}
	}
}

// WithDial replaces how connections are opened. Production dials the Canary
// service's cluster name; tests map that name to a loopback server.
func WithDial(dial DialFunc) Option {
	return func(p *Sender) {
		if dial != nil {
			p.dial = dial
		}
	}
}

// Sender makes the gate's requests to members' Canary services. One Sender
// (and so one transport with its kept-alive connections) serves every
// question; it is safe for concurrent use.
type Sender struct {
	timeout     time.Duration
	budget      time.Duration
	concurrency int
	dial        DialFunc
	client      *http.Client
}

// New returns a Sender with the production settings unless opts say otherwise.
func New(opts ...Option) *Sender {
	p := &Sender{timeout: DefaultRequestTimeout, budget: DefaultBudget, concurrency: DefaultConcurrency}
	for _, o := range opts {
		o(p)
	}
	if p.dial == nil {
		p.dial = ServiceDial(&net.Dialer{Timeout: p.timeout, KeepAlive: 30 * time.Second}, net.DefaultResolver)
	}
	p.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // never a proxy from the environment
			DialContext:           p.dial,
			MaxIdleConns:          4 * p.concurrency,
			MaxIdleConnsPerHost:   p.concurrency,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   p.timeout,
			ResponseHeaderTimeout: p.timeout,
		},
		CheckRedirect: neverFollow,
	}
	return p
}

// ServiceResolver looks a service's name up; *net.Resolver is one.
type ServiceResolver interface {
	Resolver
	LookupCNAME(ctx context.Context, host string) (string, error)
}

// ServiceDial dials a Canary service by its cluster name as written, never
// as something else: the name is looked up rooted, so no search domain of
// the pod's resolver (the node's own, say, with a wildcard record) can
// answer for it, and a name that is an alias (an ExternalName Service put in
// the Canary service's place) is refused, so the gate's requests never leave
// for wherever the alias points.
func ServiceDial(dialer *net.Dialer, resolver ServiceResolver) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return dialer.DialContext(ctx, network, addr)
		}
		rooted := strings.TrimSuffix(host, ".") + "."
		canonical, err := resolver.LookupCNAME(ctx, rooted)
		if err != nil {
			return nil, fmt.Errorf("look %s up: %w", host, err)
		}
		if !strings.EqualFold(canonical, rooted) {
			return nil, fmt.Errorf("%s is an alias of %s, not a service of the cluster", host, canonical)
		}
		ips, err := resolver.LookupNetIP(ctx, "ip", rooted)
		if err != nil {
			return nil, fmt.Errorf("look %s up: %w", host, err)
		}
		var errs []error
		for _, ip := range ips {
			conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}

// neverFollow hands a redirect back as the answer: a redirect is the member
// answering, and following it would send the gate where the member says.
func neverFollow(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// CanaryBase is the base URL of a member's Canary service:
// http://<process>-canary.<namespace>.svc.cluster.local:<port>. A Canary with
// no service port, or names that are not DNS labels, give an error.
func CanaryBase(process, namespace string, port int32) (string, error) {
	service := process + "-canary"
	if errs := validation.IsDNS1123Label(service); len(errs) > 0 {
		return "", fmt.Errorf("process %q gives no service name: %v", process, errs)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", fmt.Errorf("namespace %q is not a DNS label: %v", namespace, errs)
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("service port %d is not a port", port)
	}
	return "http://" + net.JoinHostPort(service+"."+namespace+".svc.cluster.local", strconv.Itoa(int(port))), nil
}

// checkBase accepts an http(s) origin with nothing after the host.
func checkBase(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Opaque != "" || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q is not an http origin", base)
	}
	return u, nil
}

// distinctPaths checks every path and drops repeats, keeping the first order:
// a readiness path that is also a Route path is requested once per round.
func distinctPaths(paths []string) ([]string, error) {
	seen := make(map[string]bool, len(paths))
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	// The member's readiness path comes on top of what its Canary hands.
	if len(out) > MaxPaths+1 {
		return nil, fmt.Errorf("%d paths, more than %d", len(out), MaxPaths+1)
	}
	return out, nil
}

// Answer is what one request met.
type Answer struct {
	// Host is the public hostname requested (warmup only).
	Host string
	Path string
	// Status is the HTTP status, 0 when no answer came.
	Status int
	// Latency is the time to the answer's headers.
	Latency time.Duration
	// Cause says why no answer came; empty when one did.
	Cause string
}

// Failed reports whether the request counts against the member: a 5xx or no
// answer, and nothing else.
func (a Answer) Failed() bool { return RequestFailed(a.Status) }

// String names the request and what it met, e.g. "/api: 503".
func (a Answer) String() string {
	where := a.Path
	if a.Host != "" {
		where = a.Host + a.Path
	}
	if a.Status == 0 {
		return where + ": " + a.Cause
	}
	return where + ": " + strconv.Itoa(a.Status)
}

// RequestFailed is the rule for one request: status 0 (no answer) or a 5xx
// fails; a 2xx, 3xx or 4xx is the member answering and passes.
func RequestFailed(status int) bool {
	return status == 0 || status >= 500
}

// get makes one GET to target with its own timeout and no credentials, reads
// a bounded part of the body so the connection is reused, and says what it met.
func get(ctx context.Context, client *http.Client, timeout time.Duration, target string) Answer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, http.NoBody)
	if err != nil {
		return Answer{Cause: "no request: " + err.Error()}
	}
	start := time.Now()
	resp, err := client.Do(req)
	latency := time.Since(start)
	if err != nil {
		return Answer{Cause: noAnswer(err, timeout)}
	}
	if latency > timeout {
		// The answer raced the deadline and won the client's select; it
		// still did not come within the timeout.
		_ = resp.Body.Close()
		return Answer{Cause: noAnswer(context.DeadlineExceeded, timeout)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 599 {
		// Go's client hands back a 101, or any three digits a server made
		// up: no final HTTP answer, so the member did not answer.
		return Answer{Cause: fmt.Sprintf("answered %d, which is no final HTTP status", resp.StatusCode)}
	}
	return Answer{Status: resp.StatusCode, Latency: latency}
}

// noAnswer names why a request met no answer in a few words.
func noAnswer(err error, timeout time.Duration) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "no answer within " + timeout.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return "no answer: " + err.Error()
}
