package testenv

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// StatementLog is a pgx tracer that records every statement a connection
// sends, alone or in a batch, so a test can tell what a job asked of
// PostgreSQL independently of the job's own counting.
type StatementLog struct {
	History[string]
}

var (
	_ pgx.QueryTracer = (*StatementLog)(nil)
	_ pgx.BatchTracer = (*StatementLog)(nil)
)

// TraceQueryStart records a statement sent alone.
func (l *StatementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.Add(data.SQL)
	return ctx
}

// TraceQueryEnd is part of pgx.QueryTracer.
func (l *StatementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart is part of pgx.BatchTracer.
func (l *StatementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records a statement sent in a batch.
func (l *StatementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	l.Add(data.SQL)
}

// TraceBatchEnd is part of pgx.BatchTracer.
func (l *StatementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// History keeps what a test observed, in the order it happened; many
// goroutines may add to it at once.
type History[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends item.
func (h *History[T]) Add(item T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = append(h.items, item)
}

// Reset forgets everything added so far.
func (h *History[T]) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = nil
}

// All returns what was added since the last Reset, in order.
func (h *History[T]) All() []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]T(nil), h.items...)
}
