package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// OpenKeyValue binds to the bucket cfg names and makes it only when it does
// not exist: binding takes no more than reading the stream's info, which a
// part's own credential allows, where making or updating it does not. A
// bucket another client made in between is bound to.
func OpenKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, cfg.Bucket)
	}
	return kv, err
}

// OpenObjectStore is OpenKeyValue for an object store.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	store, err := js.ObjectStore(ctx, cfg.Bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return store, err
	}
	store, err = js.CreateObjectStore(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.ObjectStore(ctx, cfg.Bucket)
	}
	return store, err
}

// OpenStream is OpenKeyValue for a stream.
func OpenStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	stream, err := js.Stream(ctx, cfg.Name)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return stream, err
	}
	stream, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, cfg.Name)
	}
	return stream, err
}
