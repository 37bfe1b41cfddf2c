package releasehistory

import (
	"context"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// DefaultMaxAge is how long one read of the records answers, by default:
// a dashboard polling every second costs the API server one list per five.
const DefaultMaxAge = 5 * time.Second

// readTimeout bounds one read: 10,000 records are 20 pages.
const readTimeout = 20 * time.Second

// Snapshot is one read of the records, newest first.
type Snapshot struct {
	ReadAt     time.Time
	Records    []rr.Record
	Unreadable int
}

// Cache answers every reader from one read for MaxAge, and runs one read
// at a time, as the gate's /releases does: a caller that finds the read
// stale while another runs waits for that read rather than start its own.
// A failed read answers for as long, so callers asking often of an API
// server that fails cost it one read per MaxAge, not one each.
type Cache struct {
	Records Records
	MaxAge  time.Duration
	Now     func() time.Time

	// lock is a one-slot channel rather than a mutex, so a caller that
	// gives up while waiting for the read in flight stops waiting.
	lock chan struct{}
	snap Snapshot
	err  error
	done bool
}

// NewCache reads through recs, answering each read for maxAge.
func NewCache(recs Records, maxAge time.Duration, now func() time.Time) *Cache {
	return &Cache{Records: recs, MaxAge: maxAge, Now: now, lock: make(chan struct{}, 1)}
}

// Read answers the last read while it is younger than MaxAge, else reads.
// The Snapshot's records are shared: a caller must not change them.
func (c *Cache) Read(ctx context.Context) (Snapshot, error) {
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	}
	defer func() { <-c.lock }()
	now := c.Now()
	if c.done && now.Sub(c.snap.ReadAt) < c.MaxAge && !now.Before(c.snap.ReadAt) {
		return c.snap, c.err
	}
	// The read outlives a caller that gives up, so those waiting behind it
	// are answered.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	recs, unreadable, err := c.Records.Records(rctx)
	NewestFirst(recs)
	c.snap, c.err, c.done = Snapshot{ReadAt: now.UTC(), Records: recs, Unreadable: unreadable}, err, true
	return c.snap, c.err
}
