// Package sharedread answers every caller of a read from one read for a
// while, so a page or a dashboard polled by many costs the server behind it
// one read per MaxAge, not one per caller.
package sharedread

import (
	"context"
	"time"
)

// Cache holds the last read. One read runs at a time: a caller that finds
// the answer stale while a read runs waits for that read rather than start
// its own. A read that failed answers for as long as one that did not, so
// callers asking often of a server that fails cost it one read per MaxAge.
type Cache[T any] struct {
	read    func(ctx context.Context, now time.Time) (T, error)
	maxAge  time.Duration
	timeout time.Duration
	now     func() time.Time

	// lock is a one-slot channel rather than a mutex, so a caller that
	// gives up while waiting for the read in flight stops waiting.
	lock  chan struct{}
	value T
	err   error
	at    time.Time // when the last read began; zero before the first
}

// New reads through read, handing it the time the read starts; each read
// answers for maxAge and is cut off after timeout.
func New[T any](read func(ctx context.Context, now time.Time) (T, error), maxAge, timeout time.Duration, now func() time.Time) *Cache[T] {
	if now == nil {
		now = time.Now
	}
	return &Cache[T]{read: read, maxAge: maxAge, timeout: timeout, now: now, lock: make(chan struct{}, 1)}
}

// Get answers the last read while it is younger than MaxAge, else reads. A
// clock that went back counts the last read as stale. What it answers is
// shared by every caller: a caller must not change it.
func (c *Cache[T]) Get(ctx context.Context) (T, error) {
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	defer func() { <-c.lock }()
	now := c.now()
	if !c.at.IsZero() && now.Sub(c.at) < c.maxAge && !now.Before(c.at) {
		return c.value, c.err
	}
	// The read outlives a caller that gives up, so those waiting behind it
	// are answered.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	c.value, c.err = c.read(rctx, now)
	c.at = now
	return c.value, c.err
}
