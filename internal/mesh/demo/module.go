package demo

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// ServeModule is the story's module: it serves ADDR until it is stopped,
// answering / with FINGERPRINT and /healthz with 200, or 503 when
// UNHEALTHY is set.
func ServeModule(getenv func(string) string) error {
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
	return srv.ListenAndServe()
}
