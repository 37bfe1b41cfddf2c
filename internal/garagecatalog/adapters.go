package garagecatalog

import (
	"context"
	"errors"
)

// Garage is what the run needs of Garage's admin API. One implementation per
// API version (GarageV2) speaks it over HTTP.
type Garage interface {
	// GetKeyInfo returns the key with this id, its secret included; found is
	// false when Garage holds no such key.
	GetKeyInfo(ctx context.Context, id string) (key HeldKey, found bool, err error)
	// ListKeys lists Garage's keys.
	ListKeys(ctx context.Context) ([]KeySummary, error)
	// ImportKey gives Garage a key with this id and secret, named name. It
	// returns ErrExists when Garage holds (or has held) the id.
	ImportKey(ctx context.Context, name string, key Credentials) error
	// GetBucketInfo returns the bucket with this global alias; found is false
	// when there is none.
	GetBucketInfo(ctx context.Context, alias string) (b Bucket, found bool, err error)
	// CreateBucket creates a bucket with this global alias. It returns
	// ErrExists when the alias is taken.
	CreateBucket(ctx context.Context, alias string) (Bucket, error)
	// AllowBucketKey turns on the permissions set in perm; the others keep
	// their value.
	AllowBucketKey(ctx context.Context, bucketID, keyID string, perm Permission) error
}

// HeldKey is a key as Garage holds it: its credentials, and whether its
// expiration has passed, so that it no longer signs in.
type HeldKey struct {
	Credentials
	Expired bool
}

// KeySummary is one of Garage's keys as ListKeys names it.
type KeySummary struct {
	ID, Name string
	Expired  bool
}

// Bucket is a bucket and every key's permissions on it.
type Bucket struct {
	ID    string
	Perms map[string]Permission
}

// ErrExists is what Garage answers when asked to create what it holds.
var ErrExists = errors.New("already exists")

// Vault is what the run needs of Vault's kv v2 store. Paths are API paths,
// <mount>/data/<path>.
type Vault interface {
	// ReadDocument reads the current version's fields; found is false when
	// the path has never been written.
	ReadDocument(ctx context.Context, path string) (fields map[string]any, found bool, err error)
	// CreateDocument writes the fields as the first version, check-and-set
	// 0; created is false when a version is there already, written by
	// someone else first.
	CreateDocument(ctx context.Context, path string, fields map[string]string) (created bool, err error)
}
