package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// member is a small HTTP server on loopback standing in for a member's new
// copy behind its Canary service, which is where the gate sends its own
// traffic. It answers every path 200, or 503 on failPath while told to fail.
type member struct {
	process string
	// host is the Canary service's cluster name; addr where it listens.
	host, addr string
	requests   atomic.Int64
	mu         sync.Mutex
	failPath   string
}

// members are the sample Application's members, serving until stop.
type members struct {
	byProcess map[string]*member
	order     []*member
	stopAll   context.CancelFunc
	done      sync.WaitGroup
}

// canaryPort is the Canary's spec.service.port in examples/demo.
const canaryPort = "8080"

// startMembers serves auth-api and auth-ui on their own loopback addresses at
// the Canary service port, so each Canary service name maps to one address.
func startMembers(ctx context.Context) (*members, error) {
	ctx, cancel := context.WithCancel(ctx)
	ms := &members{byProcess: map[string]*member{}, stopAll: cancel}
	for i, process := range []string{"auth-api", "auth-ui"} {
		m := &member{
			process: process,
			host:    process + "-canary." + namespace + ".svc.cluster.local",
			addr:    net.JoinHostPort(fmt.Sprintf("127.0.10.%d", i+1), canaryPort),
		}
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", m.addr)
		if err != nil {
			ms.stop()
			return nil, fmt.Errorf("serve member %s on %s (the Canary service's port): %w", process, m.addr, err)
		}
		ms.byProcess[process] = m
		ms.order = append(ms.order, m)
		ms.done.Add(1)
		go func() {
			defer ms.done.Done()
			cfg := server.Config{Routes: m.routes, Logger: slog.New(slog.DiscardHandler)}
			if err := server.Serve(ctx, ln, cfg); err != nil && !errors.Is(err, context.Canceled) {
				slog.Error("member stopped", slog.String("process", process), slog.String("error", err.Error()))
			}
		}()
	}
	return ms, nil
}

func (ms *members) stop() {
	ms.stopAll()
	ms.done.Wait()
}

func (ms *members) all() []*member { return ms.order }

func (ms *members) get(process string) *member { return ms.byProcess[process] }

// hostsFile maps each Canary service's name to its member, as the cluster's
// DNS maps it to the service.
func (ms *members) hostsFile() string {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for _, m := range ms.order {
		host, _, _ := net.SplitHostPort(m.addr)
		fmt.Fprintf(&b, "%s %s\n", host, m.host)
	}
	return b.String()
}

func (m *member) routes(mux *http.ServeMux) {
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m.requests.Add(1)
		m.mu.Lock()
		fail := m.failPath != "" && r.URL.Path == m.failPath
		m.mu.Unlock()
		if fail {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, m.process+" answers\n")
	})
}

// failOn makes path answer 503 until called again with "".
func (m *member) failOn(path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failPath = path
}
