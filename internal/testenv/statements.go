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
	mu  sync.Mutex
	sql []string
}

var (
	_ pgx.QueryTracer = (*StatementLog)(nil)
	_ pgx.BatchTracer = (*StatementLog)(nil)
)

// TraceQueryStart records a statement sent alone.
func (l *StatementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.add(data.SQL)
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
	l.add(data.SQL)
}

// TraceBatchEnd is part of pgx.BatchTracer.
func (l *StatementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (l *StatementLog) add(sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, sql)
}

// Reset forgets what was recorded.
func (l *StatementLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = nil
}

// All returns the statements recorded since the last Reset, in the order sent.
func (l *StatementLog) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.sql...)
}
