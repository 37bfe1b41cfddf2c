package owntraffic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Production settings of warmup.
const (
	// WarmupPort is the port public hostnames are requested on, over https.
	WarmupPort = 443
	// WarmupRequestTimeout is how long one warmup request may take.
	WarmupRequestTimeout = 10 * time.Second
)

// Resolver looks a name up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// WarmupConfig is the seam between warmup and the network. The zero value is
// production: the system resolver, PublicAddress, the system's roots, port
// 443 and WarmupRequestTimeout. Tests set a resolver and a policy that reach
// a TLS server on loopback.
type WarmupConfig struct {
	Resolver Resolver
	// Allow decides on each resolved address; only an allowed one is dialled.
	Allow func(netip.Addr) bool
	// TLS is cloned for every connection; nil means the system's roots.
	TLS     *tls.Config
	Port    int
	Timeout time.Duration
}

// Warmer requests a served revision's paths through its public hostnames.
type Warmer struct {
	cfg WarmupConfig
}

// NewWarmer returns a Warmer; zero fields of cfg take production values.
func NewWarmer(cfg WarmupConfig) *Warmer {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Allow == nil {
		cfg.Allow = PublicAddress
	}
	if cfg.TLS == nil {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.Port == 0 {
		cfg.Port = WarmupPort
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = WarmupRequestTimeout
	}
	return &Warmer{cfg: cfg}
}

// Warmup is what one warmup met.
type Warmup struct {
	// Requests counts the requests made, the failing one included.
	Requests int
	// Unreachable are hosts with no address the policy allows; none of
	// their paths was requested. An Application whose every host is
	// unreachable is warmed without a request.
	Unreachable []string
	// Failure is the request that stopped the warmup: a 5xx, no answer, or
	// a host that did not resolve. Nil when none failed.
	Failure *Answer
}

// Failed reports whether a request stopped the warmup.
func (w Warmup) Failed() bool { return w.Failure != nil }

// Warm requests every path through every host, one after another, over https
// on the configured port with no proxy and no redirect followed. Each host is
// resolved as an absolute name to IPv4 addresses, and only an address the
// policy allows is dialled: the one checked, so a name that resolves
// differently a moment later changes nothing. The first 5xx or request with
// no answer stops it. A host or path that is not one, or ctx ending, is an
// error.
func (w *Warmer) Warm(ctx context.Context, hosts, paths []string) (Warmup, error) {
	distinct, err := distinctPaths(paths)
	if err != nil {
		return Warmup{}, err
	}
	for _, h := range hosts {
		if err := CheckHost(h); err != nil {
			return Warmup{}, err
		}
	}
	var out Warmup
	if len(distinct) == 0 {
		return out, nil
	}
	pins := &pinnedAddresses{byHost: map[string][]netip.Addr{}}
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           pins.dial(w.cfg.Timeout),
		TLSClientConfig:       w.cfg.TLS.Clone(),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   w.cfg.Timeout,
		ResponseHeaderTimeout: w.cfg.Timeout,
		MaxIdleConnsPerHost:   1,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, CheckRedirect: neverFollow}

	seen := map[string]bool{}
	for _, host := range hosts {
		if seen[host] {
			continue
		}
		seen[host] = true
		allowed, err := w.resolve(ctx, host)
		if err != nil {
			if ctx.Err() != nil {
				return Warmup{}, fmt.Errorf("warmup: %w", ctx.Err())
			}
			out.Failure = &Answer{Host: host, Path: distinct[0], Cause: err.Error()}
			return out, nil
		}
		if len(allowed) == 0 {
			out.Unreachable = append(out.Unreachable, host)
			continue
		}
		pins.set(host, allowed)
		authority := host
		if w.cfg.Port != WarmupPort {
			authority = net.JoinHostPort(host, strconv.Itoa(w.cfg.Port))
		}
		for _, path := range distinct {
			a := get(ctx, client, w.cfg.Timeout, "https://"+authority+path)
			if ctx.Err() != nil {
				return Warmup{}, fmt.Errorf("warmup: %w", ctx.Err())
			}
			a.Host, a.Path = host, path
			out.Requests++
			if a.Failed() {
				out.Failure = &a
				return out, nil
			}
		}
	}
	return out, nil
}

// resolve looks host up as an absolute name, so no search domain of the
// cluster's resolver can turn it into an internal name, and keeps the IPv4
// addresses the policy allows.
func (w *Warmer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	// A lookup is a request of the warmup too, and has its time.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	addrs, err := w.cfg.Resolver.LookupNetIP(ctx, "ip4", host+".")
	if err != nil {
		return nil, fmt.Errorf("no answer: resolving %s: %w", host, err)
	}
	var allowed []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() && w.cfg.Allow(a) {
			allowed = append(allowed, a)
		}
	}
	return allowed, nil
}

// pinnedAddresses holds, per host, the addresses already checked; the
// transport dials only those, never the name.
type pinnedAddresses struct {
	mu     sync.Mutex
	byHost map[string][]netip.Addr
}

func (p *pinnedAddresses) set(host string, addrs []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byHost[host] = addrs
}

func (p *pinnedAddresses) dial(timeout time.Duration) DialFunc {
	dialer := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", portText, err)
		}
		p.mu.Lock()
		addrs := p.byHost[host]
		p.mu.Unlock()
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no checked address", host)
		}
		var errs []error
		for _, a := range addrs {
			conn, err := dialer.DialContext(ctx, "tcp4", netip.AddrPortFrom(a, uint16(port)).String())
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}
