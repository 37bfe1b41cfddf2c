package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
)

// freePort asks the kernel for a port free on 127.0.0.1 now, for a server the
// tests start.
func freePort() (int, error) { return freePortOn("127.0.0.1") }

// freePortOn is freePort on another of this machine's addresses.
func freePortOn(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}

// FreeAddress is a host:port free now at a loopback address of its own,
// for a service a test starts. Not 127.0.0.1: a module or a
// replica that a test restarts leaves its port free between its runs, and a
// server another test starts there at that moment took it once, so the
// health check asked NATS. At an address of its own, only a server
// listening on every address could take it.
func FreeAddress() (string, error) { return FreeLoopback(context.Background(), 0) }

// Getenv reads a service's variables from vars, as a test hands them to the
// binary's run.
func Getenv(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// onFreePort starts a server, trying again up to twice: a free port is only
// free until someone takes it, and a start that loses that race is tried on
// another.
func onFreePort[T any](start func() (T, error)) (T, error) {
	var (
		server T
		err    error
	)
	for range 3 {
		if server, err = start(); err == nil {
			return server, nil
		}
	}
	return server, err
}

// ListenLoopback listens on port at a loopback address of its own, picked at
// random in 127.16.0.0-127.254.255.255, for a server that must sit at a fixed
// port (a webhook URL names 8080, and so does a Canary service): each run
// takes its own address, so two runs side by side never collide.
// 127.0.0.x stays free for the fixed callers (Flagger, the scraper).
func ListenLoopback(ctx context.Context, port int) (net.Listener, error) {
	var lc net.ListenConfig
	var err error
	for range 20 {
		addr := net.JoinHostPort(randomLoopback().String(), strconv.Itoa(port))
		var ln net.Listener
		if ln, err = lc.Listen(ctx, "tcp", addr); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("listen on a loopback address at port %d: %w", port, err)
}

// FreeLoopback is ListenLoopback for a server started by another process: the
// address was free a moment ago, and with 15 million to pick from, another
// run taking it in between is not a case worth more than an error. Port 0
// takes the port the kernel picks there.
func FreeLoopback(ctx context.Context, port int) (string, error) {
	ln, err := ListenLoopback(ctx, port)
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomLoopback() netip.Addr {
	//nolint:gosec // an address that keeps runs apart, not a secret
	return netip.AddrFrom4([4]byte{127, byte(16 + rand.IntN(239)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}
