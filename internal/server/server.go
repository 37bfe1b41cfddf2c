package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// Defaults suit services that answer small JSON questions; a service that needs
// more sets its own.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultDrainTimeout = 20 * time.Second
)

// Config describes one service's HTTP surface.
type Config struct {
	// Routes adds the service's own handlers. /healthz and /readyz are added by
	// the server and must not be registered here.
	Routes func(mux *http.ServeMux)
	// Ready reports whether the service can do its job; nil means always ready.
	Ready func(ctx context.Context) error
	// Logger receives one JSON line per request and the lifecycle lines.
	Logger *slog.Logger
	// MaxBodyBytes bounds every request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// DrainTimeout bounds how long in-flight requests may run after a stop
	// signal; 0 means DefaultDrainTimeout.
	DrainTimeout time.Duration

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// Handler returns the complete handler: health, readiness, the service's
// routes, the body limit and request logging.
func Handler(cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		Answer(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Ready != nil {
			if err := cfg.Ready(r.Context()); err != nil {
				cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.String("error", err.Error()))
				Answer(w, http.StatusServiceUnavailable, "not ready")
				return
			}
		}
		Answer(w, http.StatusOK, "ready")
	})
	if cfg.Routes != nil {
		cfg.Routes(mux)
	}
	// The bound wraps the server's own ResponseWriter, not the log's: only
	// that one closes the connection after a body cut at the bound.
	return limitBody(cfg.MaxBodyBytes, logRequests(cfg.Logger, mux))
}

// Serve answers on ln until ctx is done, then stops accepting, lets in-flight
// requests finish within the drain timeout and returns. A clean drain returns
// nil; one that ran out of time returns an error.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	cfg = cfg.withDefaults()
	srv := &http.Server{
		Handler:           Handler(cfg),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	cfg.Logger.Info("listening", slog.String("addr", ln.Addr().String()))
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	cfg.Logger.Info("draining", slog.Duration("bound", cfg.DrainTimeout))
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("drain did not finish within %s: %w", cfg.DrainTimeout, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	cfg.Logger.Info("drained")
	return nil
}

// ListenAndServe listens on addr and serves as Serve does.
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return Serve(ctx, ln, cfg)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 5 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 90 * time.Second
	}
	return c
}

// limitBody cuts every body at the limit, so no handler reads more than the
// service allows; the handler answers 413 when its read is cut (TooLarge).
// An oversize body is not refused here, before the handler: a handler that
// checks its caller first (the gate's 403) answers a stranger the same
// whatever the body.
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// TooLarge reports whether err came from reading past the body limit; a
// handler answers such a request with 413.
func TooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes),
			slog.String("remote", r.RemoteAddr),
			slog.Duration("duration", time.Since(start)),
		)
	})
}

// Answer writes status and a one-line text reason. Flagger records the body of
// a refused webhook, so every reason is one readable line.
func Answer(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(reason + "\n"))
}
