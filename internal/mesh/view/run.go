package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// The values a said-key holds: claimed and about to be published, or
// published and acknowledged.
const (
	saidPending = "pending"
	saidDone    = "said"
)

// View watches the wants, the haves and source.main, and says each event
// of the picture once.
type View struct {
	JS         jetstream.JetStream
	Bus        *bus.Bus
	Sources    jetstream.KeyValue
	Said       jetstream.KeyValue
	StuckAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Open makes the view's buckets and its events stream where they are not,
// over an open bus.
func Open(ctx context.Context, js jetstream.JetStream, b *bus.Bus, replicas int, logger *slog.Logger) (*View, error) {
	sources, err := Sources(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	said, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: SaidBucket, Description: "each event the view said, by its id", Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("open the bucket %s: %w", SaidBucket, err)
	}
	// The stream drops a second publish of one event id within the window:
	// two views, or one restarted between publishing and remembering, say
	// an event once.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: EventsStream, Subjects: []string{EventsSubjects}, Duplicates: time.Hour,
		MaxAge: 30 * 24 * time.Hour, Replicas: max(replicas, 1),
	}); err != nil {
		return nil, fmt.Errorf("open the stream %s: %w", EventsStream, err)
	}
	return &View{JS: js, Bus: b, Sources: sources, Said: said, StuckAfter: DefaultStuckAfter, Now: time.Now, Logger: logger}, nil
}

// Look reads source.main, every want and every have, and judges them. A
// document that does not decode is logged and left out.
func (v *View) Look(ctx context.Context) (Picture, error) {
	var src Source
	switch entry, err := v.Sources.Get(ctx, SourceKey); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return Picture{}, fmt.Errorf("read %s: %w", SourceKey, err)
	default:
		if src, err = DecodeSource(entry.Value()); err != nil {
			v.Logger.Warn("document skipped", slog.String("key", SourceKey), slog.String("error", err.Error()))
		}
	}
	wants, err := readPlaces(ctx, v, v.Bus.Wants, bus.KindWant, bus.DecodeWant)
	if err != nil {
		return Picture{}, err
	}
	haves, err := readPlaces(ctx, v, v.Bus.Haves, bus.KindHave, bus.DecodeHave)
	if err != nil {
		return Picture{}, err
	}
	return Judge(src, wants, haves, v.Now(), v.StuckAfter), nil
}

// readPlaces reads every key of a want or have bucket by node and module.
func readPlaces[T any](ctx context.Context, v *View, kv jetstream.KeyValue, kind bus.Kind, decode func([]byte) (T, error)) (map[Place]T, error) {
	entries, err := ReadAll(ctx, kv)
	if err != nil {
		return nil, err
	}
	out := make(map[Place]T, len(entries))
	for key, raw := range entries {
		k, err := bus.ParseKey(key)
		if err == nil && k.Kind != kind {
			err = fmt.Errorf("not a %s key", kind)
		}
		var doc T
		if err == nil {
			doc, err = decode(raw)
		}
		if err != nil {
			v.Logger.Warn("document skipped", slog.String("bucket", kv.Bucket()), slog.String("key", key), slog.String("error", err.Error()))
			continue
		}
		out[Place{Node: k.Node, Module: k.Module}] = doc
	}
	return out, nil
}

// ReadAll is every live key of a bucket and its value, read as one watch's
// initial values: one request for the whole bucket, not one per key.
func ReadAll(ctx context.Context, kv jetstream.KeyValue) (map[string][]byte, error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
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

// Tell says each event of the picture that was not said before, and
// answers those it said now.
func (v *View) Tell(ctx context.Context, p Picture) ([]Event, error) {
	var said []Event
	var failed error
	for _, e := range Events(p) {
		ok, err := v.tell(ctx, e)
		if err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		if ok {
			said = append(said, e)
		}
	}
	return said, failed
}

// tell claims the event's key, publishes it and marks it said. A claim
// left pending (a view stopped between the two) is published again: the
// stream drops the repeat by the event's id.
func (v *View) tell(ctx context.Context, e Event) (bool, error) {
	key, err := saidKey(e)
	if err != nil {
		return false, err
	}
	revision, err := v.Said.Create(ctx, key, []byte(saidPending))
	if bus.IsConflict(err) {
		entry, gerr := v.Said.Get(ctx, key)
		if gerr != nil {
			return false, fmt.Errorf("read %s: %w", key, gerr)
		}
		if string(entry.Value()) == saidDone {
			return false, nil
		}
		revision, err = entry.Revision(), nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", key, err)
	}
	body, err := json.Marshal(e)
	if err != nil {
		return false, err
	}
	ack, err := v.JS.Publish(ctx, "mesh.events."+string(e.Kind), body, jetstream.WithMsgID(e.ID()))
	if err != nil {
		return false, fmt.Errorf("publish %s: %w", e.ID(), err)
	}
	if _, err := v.Said.Update(ctx, key, []byte(saidDone), revision); err != nil && !bus.IsConflict(err) {
		return false, fmt.Errorf("remember %s: %w", key, err)
	}
	if ack.Duplicate {
		return false, nil
	}
	v.Logger.LogAttrs(ctx, slog.LevelInfo, "mesh event", slog.String("kind", string(e.Kind)), slog.String("revision", e.Revision),
		slog.String("node", e.Node), slog.String("module", e.Module), slog.String("fingerprint", e.Fingerprint),
		slog.String("digest", e.Digest), slog.Time("since", e.Since))
	return true, nil
}

// saidKey is an event's id as a key the bucket allows: each name encoded.
func saidKey(e Event) (string, error) {
	names := []string{e.Revision}
	if e.Kind != KindDelivered {
		// A digest is sha256:<64 hex>: its hex alone keeps the key within
		// the bus's 64 bytes a name.
		names = []string{e.Node, e.Module, strings.TrimPrefix(e.Digest, "sha256:")}
	}
	tokens := []string{string(e.Kind)}
	for _, n := range names {
		t, err := bus.EncodeName(n)
		if err != nil {
			return "", fmt.Errorf("event %s: %w", e.ID(), err)
		}
		tokens = append(tokens, t)
	}
	return strings.Join(tokens, "."), nil
}

// Run looks and tells on every change of a want, a have or source.main, and
// every tick (a place turns stuck with time alone), until ctx ends.
func (v *View) Run(ctx context.Context, tick time.Duration) error {
	changed := make(chan struct{}, 1)
	for _, kv := range []jetstream.KeyValue{v.Bus.Wants, v.Bus.Haves, v.Sources} {
		w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			return fmt.Errorf("watch %s: %w", kv.Bucket(), err)
		}
		go func() {
			defer func() { _ = w.Stop() }()
			for range w.Updates() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		p, err := v.Look(ctx)
		if err == nil {
			_, err = v.Tell(ctx, p)
		}
		if err != nil && ctx.Err() == nil {
			v.Logger.Error("look failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-ticker.C:
		}
	}
}
