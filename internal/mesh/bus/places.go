package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Place is one module on one node: what a want or a have is of.
type Place struct{ Node, Module string }

// ReadAll is every live key of a bucket and its value, read as one watch's
// initial values: one request for the whole bucket, not one per key.
func ReadAll(ctx context.Context, kv jetstream.KeyValue) (map[string][]byte, error) {
	return ReadKeys(ctx, kv, jetstream.AllKeys)
}

// ReadKeys is ReadAll of the keys a pattern matches: a node's agent may
// watch its own keys of a bucket and no other.
func ReadKeys(ctx context.Context, kv jetstream.KeyValue, keys string) (map[string][]byte, error) {
	w, err := kv.Watch(ctx, keys, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", kv.Bucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read %s: the watch ended", kv.Bucket())
			}
			if e == nil {
				return out, nil // the initial values are all in
			}
			out[e.Key()] = e.Value()
		}
	}
}

// ReadPlaces reads every want or have of a bucket by its place; a key or
// document that does not decode is handed to skipped and left out.
func ReadPlaces[T any](ctx context.Context, kv jetstream.KeyValue, kind Kind, decode func([]byte) (T, error), skipped func(key string, err error)) (map[Place]T, error) {
	return ReadPlacesOf(ctx, kv, jetstream.AllKeys, kind, decode, skipped)
}

// ReadPlacesOf is ReadPlaces of the keys a pattern matches (NodeKeys).
func ReadPlacesOf[T any](ctx context.Context, kv jetstream.KeyValue, keys string, kind Kind, decode func([]byte) (T, error), skipped func(key string, err error)) (map[Place]T, error) {
	entries, err := ReadKeys(ctx, kv, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[Place]T, len(entries))
	for key, raw := range entries {
		k, err := ParseKey(key)
		if err == nil && k.Kind != kind {
			err = fmt.Errorf("not a %s key", kind)
		}
		var doc T
		if err == nil {
			doc, err = decode(raw)
		}
		if err != nil {
			skipped(key, err)
			continue
		}
		out[Place{Node: k.Node, Module: k.Module}] = doc
	}
	return out, nil
}
