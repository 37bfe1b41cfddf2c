// Command member is the program the test node's Applications run: a
// member's copy that serves HTTP, fails when its release says so, runs a
// migration, and fetches a URL for a test that checks what a pod can
// reach. No image of a real application can be pulled here, so the
// releases the tests deliver are made of this one small binary.
//
//	member serve      serve :8080 (/healthz, /readyz, /ready, and every other path);
//	                  FAIL=1 answers 503 to every path but the probes, on a
//	                  new copy only: a pod of Flagger's <name>-primary never
//	                  fails, as a release is promoted only once it passed;
//	                  :8081 takes PUT /failing (true or false) from the test
//	                  on the node, which alone reaches a pod's address;
//	                  CRASH_STARTS=N exits 1 at each of the container's first
//	                  N starts, counted in STATE_DIR (an emptyDir the pod
//	                  keeps across restarts)
//	member migrate    a migration: prints its arguments and exits 0, or 1
//	                  when FAIL=1
//	member get URL    exits 0 when URL answers 200, 1 otherwise
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: member serve|migrate|get URL")
		os.Exit(2)
	}
	failing := os.Getenv("FAIL") == "1"
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		if crashes(os.Getenv("CRASH_STARTS"), os.Getenv("STATE_DIR")) {
			os.Exit(1)
		}
		os.Exit(serve(failing && !strings.Contains(host, "-primary-")))
	case "migrate":
		fmt.Println("migrate", strings.Join(os.Args[2:], " "))
		if failing {
			fmt.Fprintln(os.Stderr, "the migration fails, as its release says")
			os.Exit(1)
		}
	case "get":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: member get URL")
			os.Exit(2)
		}
		os.Exit(get(os.Args[2]))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// crashes counts this start in dir and says whether it is one of the
// first limit starts, which exit at once: the kubelet restarts the
// container, and its pod's restart count climbs as a crashing copy's does.
func crashes(limit, dir string) bool {
	n, err := strconv.Atoi(limit)
	if err != nil || n <= 0 || dir == "" {
		return false
	}
	file := filepath.Join(dir, "starts")
	raw, _ := os.ReadFile(file) //nolint:gosec // the pod's own emptyDir
	starts, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	starts++
	if err := os.WriteFile(file, []byte(strconv.Itoa(starts)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "count the start:", err)
		return false
	}
	if starts <= n {
		fmt.Fprintf(os.Stderr, "start %d of the %d this copy crashes on\n", starts, n)
		return true
	}
	return false
}

func serve(failing bool) int {
	release := os.Getenv("RELEASE")
	var fails atomic.Bool
	fails.Store(failing)
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/ready", ok)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		if fails.Load() {
			http.Error(w, "release "+release+" fails", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "release", release)
	})
	control := http.NewServeMux()
	control.HandleFunc("PUT /failing", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16))
		v, err := strconv.ParseBool(strings.TrimSpace(string(body)))
		if err != nil {
			http.Error(w, "want true or false", http.StatusBadRequest)
			return
		}
		fails.Store(v)
		_, _ = fmt.Fprintln(w, "failing", v)
	})
	servers := []*http.Server{
		{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		{Addr: ":8081", Handler: control, ReadHeaderTimeout: 5 * time.Second},
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.ListenAndServe() }()
	}
	select {
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shut)
	}
	return 0
}

func get(url string) int {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url) //nolint:noctx // a one-shot check with the client's timeout
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = resp.Body.Close()
	fmt.Println(url, resp.Status)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
