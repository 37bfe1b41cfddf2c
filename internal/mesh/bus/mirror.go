package bus

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Mirror is a bucket's documents as one watch of it delivers them, each
// decoded once, when it changes: a reader that looks often reads memory,
// not the bucket again, and decodes nothing that did not change.
type Mirror[K comparable, T any] struct {
	mu    sync.Mutex
	docs  map[K]T
	keys  map[string]K
	err   error
	wake  chan struct{}
	parse func(key string, raw []byte) (K, T, error)
}

// Follow watches kv until ctx ends and answers once its initial values are
// in. parse names and decodes a key's document; one it refuses is handed
// to skipped and left out (a key it held before is dropped).
func Follow[K comparable, T any](ctx context.Context, kv jetstream.KeyValue, parse func(key string, raw []byte) (K, T, error), skipped func(key string, err error)) (*Mirror[K, T], error) {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", kv.Bucket(), err)
	}
	m := &Mirror[K, T]{docs: map[K]T{}, keys: map[string]K{}, wake: make(chan struct{}, 1), parse: parse}
	take := func(e jetstream.KeyValueEntry) {
		// Decoded before the lock, so a reader never waits on a decode.
		put := e.Operation() == jetstream.KeyValuePut
		var k K
		var doc T
		var err error
		if put {
			if k, doc, err = m.parse(e.Key(), e.Value()); err != nil {
				skipped(e.Key(), err)
				put = false
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if old, ok := m.keys[e.Key()]; ok {
			delete(m.docs, old)
			delete(m.keys, e.Key())
		}
		if put {
			m.docs[k], m.keys[e.Key()] = doc, k
		}
	}
	for initial := true; initial; {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watch %s: it ended", kv.Bucket())
			}
			if e == nil {
				initial = false
				continue
			}
			take(e)
		}
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					m.mu.Lock()
					m.err = fmt.Errorf("the watch of %s ended", kv.Bucket())
					m.mu.Unlock()
					m.signal()
					return
				}
				if e != nil {
					take(e)
					m.signal()
				}
			}
		}
	}()
	return m, nil
}

func (m *Mirror[K, T]) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Changed has a value after a change since it was last taken.
func (m *Mirror[K, T]) Changed() <-chan struct{} { return m.wake }

// Docs is a copy of the documents as they stand, or why the watch ended.
func (m *Mirror[K, T]) Docs() (map[K]T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	return maps.Clone(m.docs), nil
}

// Places is a parse of want or have keys for Follow: the key's place and
// its decoded document.
func Places[T any](kind Kind, decode func([]byte) (T, error)) func(string, []byte) (Place, T, error) {
	return func(key string, raw []byte) (Place, T, error) {
		var doc T
		k, err := ParseKey(key)
		if err == nil && k.Kind != kind {
			err = fmt.Errorf("not a %s key", kind)
		}
		if err == nil {
			doc, err = decode(raw)
		}
		return Place{Node: k.Node, Module: k.Module}, doc, err
	}
}
