package demo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// ServeModule is the story's module: it serves ADDR until ctx ends (the
// agent's SIGTERM), answering / with FINGERPRINT and /healthz with 200, or
// 503 when UNHEALTHY is set. It ends at once when stopped, as a module
// should, rather than wait out the agent's grace for its SIGKILL.
func ServeModule(ctx context.Context, getenv func(string) string) error {
	addr := getenv("ADDR")
	if addr == "" {
		return errors.New("ADDR: required")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, getenv("FINGERPRINT")) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if getenv("UNHEALTHY") != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stopped := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stopped()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
