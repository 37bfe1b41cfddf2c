package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// Bus is the mesh's buckets on one JetStream, opened or made as they should
// be. Ops counts the operations it sent to the server (reads, writes,
// watches), so a figure can say how many a want cost.
type Bus struct {
	JS jetstream.JetStream

	Modules, Builds, Holds, Grants, Wants, Haves, Seals jetstream.KeyValue

	replicas int
	ops      atomic.Int64

	mu       sync.Mutex
	composed map[string]jetstream.KeyValue    // by node
	objects  map[string]jetstream.ObjectStore // by node
}

// Options shape the buckets Open makes.
type Options struct {
	// Replicas is each bucket's replica count in a cluster; 0 is 1.
	Replicas int
}

// Open makes the buckets that do not exist yet and opens them all; a bucket
// that exists is opened as it is.
func Open(ctx context.Context, js jetstream.JetStream, opts Options) (*Bus, error) {
	b := &Bus{JS: js, replicas: max(opts.Replicas, 1), composed: map[string]jetstream.KeyValue{}, objects: map[string]jetstream.ObjectStore{}}
	for _, kv := range []struct {
		into        *jetstream.KeyValue
		name, about string
	}{
		{&b.Modules, ModulesBucket, "each module's registration: nodes, providers, data, step"},
		{&b.Builds, BuildsBucket, "each build of a module, done or failed"},
		{&b.Holds, HoldsBucket, "fingerprints no node is to be given"},
		{&b.Grants, GrantsBucket, "the credential and grant of a module at a fingerprint exist"},
		{&b.Wants, WantsBucket, "what each node is to run of each module"},
		{&b.Haves, HavesBucket, "what each node runs of each module, and its health"},
		{&b.Seals, SealsBucket, "the operator's seal on each want a put or a hand owns"},
	} {
		store, err := b.keyValue(ctx, kv.name, kv.about)
		if err != nil {
			return nil, err
		}
		*kv.into = store
	}
	return b, nil
}

func (b *Bus) keyValue(ctx context.Context, name, about string) (jetstream.KeyValue, error) {
	b.ops.Add(1)
	store, err := OpenKeyValue(ctx, b.JS, jetstream.KeyValueConfig{Bucket: name, Description: about, Replicas: b.replicas})
	if err != nil {
		return nil, fmt.Errorf("open the bucket %s: %w", name, err)
	}
	return store, nil
}

// Ops is how many operations the bus has sent to the server so far.
func (b *Bus) Ops() int64 { return b.ops.Load() }

// CountOps adds n operations made on the bus's buckets directly (a watch, a
// batch of publishes) to Ops.
func (b *Bus) CountOps(n int) { b.ops.Add(int64(n)) }

// Composed is node's composition bucket, made when it does not exist.
func (b *Bus) Composed(ctx context.Context, node string) (jetstream.KeyValue, error) {
	name, err := ComposedBucket(node)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	store, ok := b.composed[node]
	b.mu.Unlock()
	if ok {
		return store, nil
	}
	store, err = b.keyValue(ctx, name, "the signed compositions for node "+node)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.composed[node] = store
	b.mu.Unlock()
	return store, nil
}

// Objects is node's object store, which holds its envelopes over
// InlineLimit, made when it does not exist. It is named as node's
// composition bucket (its stream is OBJ_ where the bucket's is KV_): an
// object store's chunks are on subjects named by a random id, so only a
// store of its own, granted whole, keeps a node's large compositions from
// every other node.
func (b *Bus) Objects(ctx context.Context, node string) (jetstream.ObjectStore, error) {
	return b.objectStore(ctx, node, true)
}

// objectStore is node's object store, bound, and made when create says so
// and it does not exist. A reader only binds: an entry naming an object is
// written after its store, and a store a reader found missing is one its
// credential could not make anyway.
func (b *Bus) objectStore(ctx context.Context, node string, create bool) (jetstream.ObjectStore, error) {
	name, err := ComposedBucket(node)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	store, ok := b.objects[node]
	b.mu.Unlock()
	if ok {
		return store, nil
	}
	b.ops.Add(1)
	if create {
		store, err = OpenObjectStore(ctx, b.JS, jetstream.ObjectStoreConfig{
			Bucket: name, Description: "the signed compositions over 64 KiB for node " + node, Replicas: b.replicas,
		})
	} else {
		store, err = b.JS.ObjectStore(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("open the object store %s: %w", name, err)
	}
	b.mu.Lock()
	b.objects[node] = store
	b.mu.Unlock()
	return store, nil
}

// Digest is the digest a want names for an envelope: sha256: and the hex
// SHA-256 of its exact bytes.
func Digest(envelope []byte) string {
	sum := sha256.Sum256(envelope)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WriteComposition stores node's signed composition of module at
// fingerprint. An envelope over InlineLimit is put in node's object store
// first, under the key's name, and the key written after, pointing at it:
// the object store has no compare-and-swap, so a reader that finds the key
// always finds its object.
func (b *Bus) WriteComposition(ctx context.Context, node, module, fingerprint string, envelope []byte) (Composed, error) {
	key, err := CompositionKey(module, fingerprint)
	if err != nil {
		return Composed{}, err
	}
	store, err := b.Composed(ctx, node)
	if err != nil {
		return Composed{}, err
	}
	entry := Composed{Module: module, Fingerprint: fingerprint, Node: node, Digest: Digest(envelope), Size: len(envelope)}
	if len(envelope) <= InlineLimit {
		entry.Envelope = envelope
	} else {
		objects, err := b.Objects(ctx, node)
		if err != nil {
			return Composed{}, err
		}
		entry.Object = key
		b.ops.Add(1)
		if _, err := objects.PutBytes(ctx, entry.Object, envelope); err != nil {
			return Composed{}, fmt.Errorf("put the composition object %s: %w", entry.Object, err)
		}
	}
	b.ops.Add(1)
	if _, err := store.Put(ctx, key, Encode(entry)); err != nil {
		return Composed{}, fmt.Errorf("write %s in %s: %w", key, store.Bucket(), err)
	}
	return entry, nil
}

// ReadComposition reads node's entry of module at fingerprint and its
// envelope; an envelope whose bytes do not match the entry's digest is
// refused.
func (b *Bus) ReadComposition(ctx context.Context, node, module, fingerprint string) (Composed, []byte, error) {
	entry, envelope, _, err := b.ReadCompositionAt(ctx, node, module, fingerprint)
	return entry, envelope, err
}

// ReadCompositionAt is ReadComposition with the entry's revision in the
// bucket, which orders node's compositions as they were written.
func (b *Bus) ReadCompositionAt(ctx context.Context, node, module, fingerprint string) (Composed, []byte, uint64, error) {
	key, err := CompositionKey(module, fingerprint)
	if err != nil {
		return Composed{}, nil, 0, err
	}
	store, err := b.Composed(ctx, node)
	if err != nil {
		return Composed{}, nil, 0, err
	}
	b.ops.Add(1)
	got, err := store.Get(ctx, key)
	if err != nil {
		return Composed{}, nil, 0, fmt.Errorf("read %s in %s: %w", key, store.Bucket(), err)
	}
	entry, err := DecodeComposed(got.Value())
	if err == nil && entry.Node != node {
		err = fmt.Errorf("%s in %s is an entry for node %q", key, store.Bucket(), entry.Node)
	}
	if err != nil {
		return Composed{}, nil, got.Revision(), err
	}
	envelope, err := b.Envelope(ctx, entry)
	return entry, envelope, got.Revision(), err
}

// CompositionRevision is the revision of node's entry of module at
// fingerprint while it still names digest; 0 when the entry is gone, does
// not decode or was written again since, as it then no longer says when
// that composition was written.
func (b *Bus) CompositionRevision(ctx context.Context, node, module, fingerprint, digest string) (uint64, error) {
	key, err := CompositionKey(module, fingerprint)
	if err != nil {
		return 0, err
	}
	store, err := b.Composed(ctx, node)
	if err != nil {
		return 0, err
	}
	b.ops.Add(1)
	got, err := store.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read %s in %s: %w", key, store.Bucket(), err)
	}
	if entry, err := DecodeComposed(got.Value()); err != nil || entry.Digest != digest {
		return 0, nil //nolint:nilerr // an entry that does not decode says no revision, as one written again since
	}
	return got.Revision(), nil
}

// Held says whether module's fingerprint is held.
func (b *Bus) Held(ctx context.Context, module, fingerprint string) (bool, error) {
	key, err := HoldKey(module, fingerprint)
	if err != nil {
		return false, err
	}
	b.ops.Add(1)
	_, err = b.Holds.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s in %s: %w", key, HoldsBucket, err)
	}
	return true, nil
}

// Envelope is the envelope an entry holds or names in its node's object
// store, checked against its digest.
func (b *Bus) Envelope(ctx context.Context, entry Composed) ([]byte, error) {
	envelope := entry.Envelope
	if entry.Object != "" {
		objects, err := b.objectStore(ctx, entry.Node, false)
		if err != nil {
			return nil, err
		}
		b.ops.Add(1)
		if envelope, err = objects.GetBytes(ctx, entry.Object); err != nil {
			return nil, fmt.Errorf("read the composition object %s: %w", entry.Object, err)
		}
	}
	if Digest(envelope) != entry.Digest {
		return nil, fmt.Errorf("composition of %q at %q for %q: the envelope's digest is %s, its entry says %s",
			entry.Module, entry.Fingerprint, entry.Node, Digest(envelope), entry.Digest)
	}
	return envelope, nil
}

// ErrConflict marks a compare-and-swap that kept losing to other writers.
var ErrConflict = errors.New("the key kept changing under the write")

// swapAttempts bounds how often Swap re-reads and decides again.
const swapAttempts = 16

// Decide is handed a key's current value (nil when the key has none) and
// says what to write instead, or write false to leave it.
type Decide func(current []byte) (next []byte, write bool, err error)

// Swap writes a key from what it holds: it reads the key, asks decide, and
// writes under compare-and-swap on the revision it read; a conflict re-reads
// and decides again. It answers whether it wrote and the key's revision.
func (b *Bus) Swap(ctx context.Context, store jetstream.KeyValue, key string, decide Decide) (bool, uint64, error) {
	for range swapAttempts {
		b.ops.Add(1)
		var current []byte
		var revision uint64
		got, err := store.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, 0, fmt.Errorf("read %s in %s: %w", key, store.Bucket(), err)
		default:
			current, revision = got.Value(), got.Revision()
		}
		next, write, err := decide(current)
		if err != nil || !write {
			return false, revision, err
		}
		if current != nil && bytes.Equal(next, current) {
			return false, revision, nil
		}
		b.ops.Add(1)
		if current == nil {
			// Create also takes a key whose last entry is a delete marker.
			revision, err = store.Create(ctx, key, next)
		} else {
			revision, err = store.Update(ctx, key, next, revision)
		}
		if IsConflict(err) {
			continue
		}
		if err != nil {
			return false, 0, fmt.Errorf("write %s in %s: %w", key, store.Bucket(), err)
		}
		return true, revision, nil
	}
	return false, 0, fmt.Errorf("write %s in %s: %w", key, store.Bucket(), ErrConflict)
}

// IsConflict is whether err is a compare-and-swap that lost: the key's
// revision was not the one the write expected.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) &&
		(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
