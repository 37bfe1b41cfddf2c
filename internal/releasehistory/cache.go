package releasehistory

import (
	"context"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/sharedread"
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

// Cache answers every reader from one read of the records for MaxAge, one
// read at a time, as the gate's /releases does.
type Cache struct{ shared *sharedread.Cache[Snapshot] }

// NewCache reads through recs, answering each read for maxAge.
func NewCache(recs Records, maxAge time.Duration, now func() time.Time) *Cache {
	read := func(ctx context.Context, now time.Time) (Snapshot, error) {
		got, unreadable, err := recs.Records(ctx)
		NewestFirst(got)
		return Snapshot{ReadAt: now.UTC(), Records: got, Unreadable: unreadable}, err
	}
	return &Cache{shared: sharedread.New(read, maxAge, readTimeout, now)}
}

// Read answers the last read while it is younger than MaxAge, else reads.
// The Snapshot's records are shared: a caller must not change them.
func (c *Cache) Read(ctx context.Context) (Snapshot, error) { return c.shared.Get(ctx) }
