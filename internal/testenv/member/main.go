// Command member is the program the test node's Applications run: a
// member's copy that serves HTTP, fails when its release says so, runs a
// migration, and fetches a URL for a test that checks what a pod can
// reach. No image of a real application can be pulled here, so the
// releases the tests deliver are made of this one small binary.
//
//	member serve      serve :8080 (/healthz, /readyz, /ready, and every other path);
//	                  FAIL=1 answers 503 to every path but the probes
//	member migrate    a migration: prints its arguments and exits 0, or 1
//	                  when FAIL=1
//	member get URL    exits 0 when URL answers 200, 1 otherwise
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
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
		os.Exit(serve(failing))
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

func serve(failing bool) int {
	release := os.Getenv("RELEASE")
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/ready", ok)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		if failing {
			http.Error(w, "release "+release+" fails", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "release", release)
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		return 1
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
