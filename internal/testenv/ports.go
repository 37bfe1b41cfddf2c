package testenv

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// freePort asks the kernel for a port free on 127.0.0.1 now, for a server the
// tests start.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}

// FreeAddress is a host:port free on 127.0.0.1 now, for a service a test or
// the demo starts; like freePort, it is free only until someone takes it.
func FreeAddress() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

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
