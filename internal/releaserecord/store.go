package releaserecord

import (
	"context"
	"errors"
)

// Store keeps the records: one ConfigMap each in the service's namespace.
type Store interface {
	// Get reads a release's record: a zero Stored when there is none, an
	// error wrapping ErrUnreadable when it does not decode.
	Get(ctx context.Context, releaseID string) (Stored, error)
	// List reads the records of one app, env and cluster; a record that does
	// not decode is left out.
	List(ctx context.Context, app, env, cluster string) ([]Stored, error)
	// Put writes a record over the version read (Version "" creates it),
	// returning what it wrote; ErrConflict when the record moved since.
	Put(ctx context.Context, s Stored) (Stored, error)
	// Drift says a drift on the record, as a ReleaseDrift Kubernetes Event.
	Drift(ctx context.Context, s Stored, d Drift) error
}

// Stored is a record as the store holds it: Version is its resourceVersion.
type Stored struct {
	Record  Record
	Version string
}

// ErrConflict marks a write over a record that moved since it was read, by
// another replica or another fact: the fact is read and reduced again.
var ErrConflict = errors.New("the record moved since it was read")
