package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"

	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

type running struct {
	url  string
	done chan error
	stop context.CancelFunc
	logs *testenv.LogBuffer
}

func start(t *testing.T, cfg server.Config) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{url: "http://" + ln.Addr().String(), done: make(chan error, 1), stop: cancel, logs: logs}
	go func() { r.done <- server.Serve(ctx, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestHealthAndReadiness(t *testing.T) {
	notReady := errors.New("api server unreachable")
	var mu sync.Mutex
	r := start(t, server.Config{Ready: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return notReady
	}})

	if code, _ := get(t, r.url+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz = %d, want 200", code)
	}
	if code, body := get(t, r.url+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready" {
		t.Fatalf("readyz = %d %q, want 503 not ready", code, body)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	if code, _ := get(t, r.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz = %d, want 200 once ready", code)
	}
	if !strings.Contains(r.logs.String(), `"error":"api server unreachable"`) {
		t.Fatalf("the readiness failure was not logged: %s", r.logs)
	}
}

func TestRoutesAndRequestLog(t *testing.T) {
	r := start(t, server.Config{Routes: func(mux *http.ServeMux) {
		mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			server.Answer(w, http.StatusConflict, string(b))
		})
	}})
	resp, err := http.Post(r.url+"/echo", "text/plain", strings.NewReader("waits on auth-api"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || strings.TrimSpace(string(body)) != "waits on auth-api" {
		t.Fatalf("echo = %d %q", resp.StatusCode, body)
	}
	if code, _ := get(t, r.url+"/echo"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /echo = %d, want 405", code)
	}
	logs := r.logs.String()
	for _, want := range []string{`"msg":"request"`, `"method":"POST"`, `"path":"/echo"`, `"status":409`, `"remote":"127.0.0.1:`} {
		if !strings.Contains(logs, want) {
			t.Errorf("request log lacks %s: %s", want, logs)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	var readErr error
	r := start(t, server.Config{MaxBodyBytes: 16, Routes: func(mux *http.ServeMux) {
		mux.HandleFunc("POST /in", func(w http.ResponseWriter, r *http.Request) {
			_, readErr = io.ReadAll(r.Body)
			if server.TooLarge(readErr) {
				server.Answer(w, http.StatusRequestEntityTooLarge, "too large")
				return
			}
			server.Answer(w, http.StatusOK, "read")
		})
		mux.HandleFunc("POST /refuse", func(w http.ResponseWriter, _ *http.Request) {
			server.Answer(w, http.StatusForbidden, "not you")
		})
	}})
	var closed bool
	postTo := func(path string, body io.Reader, length int64) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, r.url+path, body)
		req.ContentLength = length
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		closed = resp.Close
		return resp.StatusCode
	}
	post := func(body io.Reader, length int64) int { return postTo("/in", body, length) }
	if code := post(strings.NewReader("sixteen bytes..."), 16); code != http.StatusOK {
		t.Fatalf("a body at the limit = %d, want 200", code)
	}
	if code := post(strings.NewReader(strings.Repeat("x", 17)), 17); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a declared oversize body = %d, want 413", code)
	}
	if !closed {
		t.Fatal("a 413 kept the connection open for the rest of the body")
	}
	// A chunked body declares no length: it is cut while being read.
	if code := post(io.MultiReader(strings.NewReader(strings.Repeat("x", 64))), -1); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an undeclared oversize body = %d, want 413", code)
	}
	if !server.TooLarge(readErr) {
		t.Fatalf("the handler read past the limit: %v", readErr)
	} // A handler that refuses before reading answers as it chooses: the bound
	// does not speak first.
	if code := postTo("/refuse", strings.NewReader(strings.Repeat("x", 17)), 17); code != http.StatusForbidden {
		t.Fatalf("a declared oversize body to a handler that refuses unread = %d, want 403", code)
	}
}

// The drain lets a request that is under way finish, refuses new connections,
// and returns nil.
func TestDrainFinishesInFlight(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	r := start(t, server.Config{DrainTimeout: 5 * time.Second, Routes: func(mux *http.ServeMux) {
		mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			server.Answer(w, http.StatusOK, "finished")
		})
	}})

	result := make(chan string, 1)
	go func() {
		code, body := get(t, r.url+"/slow")
		result <- http.StatusText(code) + " " + body
	}()
	<-entered
	r.stop()

	// New connections are refused once the listener is closed.
	wait.Poll{Within: 2 * time.Second, Every: 10 * time.Millisecond}.For(t, "new connections refused while draining", func() bool {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(r.url, "http://"), 100*time.Millisecond)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	select {
	case err := <-r.done:
		t.Fatalf("Serve returned %v before the in-flight request finished", err)
	default:
	}
	close(release)
	if got := <-result; got != "OK finished" {
		t.Fatalf("in-flight request = %q, want OK finished", got)
	}
	if err := <-r.done; err != nil {
		t.Fatalf("Serve = %v, want nil after a clean drain", err)
	}
	r.done <- nil // for the cleanup
}

// A request that outlives the drain bound makes Serve report the failed drain.
func TestDrainBound(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	r := start(t, server.Config{DrainTimeout: 100 * time.Millisecond, Routes: func(mux *http.ServeMux) {
		mux.HandleFunc("GET /stuck", func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
		})
	}})
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, r.url+"/stuck", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	start := time.Now()
	r.stop()
	err := <-r.done
	r.done <- nil
	if err == nil || !strings.Contains(err.Error(), "drain did not finish") {
		t.Fatalf("Serve = %v, want a drain error", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("the drain took %s, past its 100ms bound", waited)
	}
}

func TestListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = server.ListenAndServe(context.Background(), ln.Addr().String(), server.Config{})
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("ListenAndServe on a taken port = %v", err)
	}
}
