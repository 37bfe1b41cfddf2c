package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
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
const canaryPort = 8080

// startMembers serves auth-api and auth-ui each on a loopback address of its
// own at the Canary service port, so each Canary service name maps to one
// address and two demos side by side do not collide.
func startMembers(ctx context.Context) (*members, error) {
	ctx, cancel := context.WithCancel(ctx)
	ms := &members{byProcess: map[string]*member{}, stopAll: cancel}
	for _, process := range []string{"auth-api", "auth-ui"} {
		ln, err := testenv.ListenLoopback(ctx, canaryPort)
		if err != nil {
			ms.stop()
			return nil, fmt.Errorf("serve member %s at the Canary service's port: %w", process, err)
		}
		m := &member{
			process: process,
			host:    process + "-canary." + namespace + ".svc.cluster.local",
			addr:    ln.Addr().String(),
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

// hosts maps each Canary service's name to its member's address, as the
// cluster's DNS maps it to the service.
func (ms *members) hosts() map[string]string {
	hosts := map[string]string{}
	for _, m := range ms.order {
		host, _, _ := net.SplitHostPort(m.addr)
		hosts[m.host] = host
	}
	return hosts
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
