// Package dedup publishes the mesh's events exactly once. An event is
// claimed in the mesh_said bucket before it is published on
// mesh.events.<kind> with its id as the message id, and marked done after:
// two publishers, or one restarted between publishing and remembering,
// publish it once, as the stream deduplicates a repeat of an id. The view and
// the watchman publish through it. The bucket keeps its stored name.
package dedup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// The bucket of what was published, and the stream the events are kept in.
const (
	Bucket         = "mesh_said"
	EventsStream   = "mesh_events"
	EventsSubjects = "mesh.events.>"
)

// Kept is how long an event's record and the event itself are kept: the
// record expires with the stream's own copy, so the bucket does not grow
// without end. A place unchanged for longer may be published once more.
const Kept = 30 * 24 * time.Hour

// finishWithin bounds marking an event published once its context ended.
const finishWithin = 5 * time.Second

// The values a key of the bucket holds: claimed and about to be published,
// or published and acknowledged (stored as "said", a value kept as written).
const (
	pending = "pending"
	done    = "said"
)

// Event is one thing to say once.
type Event interface {
	// Kind names its subject, mesh.events.<kind>.
	Kind() string
	// Names are what make it once, each encoded into its key: the key is
	// <kind>.<name>.<name>…
	Names() []string
	// Attrs are its log line's fields.
	Attrs() []slog.Attr
}

// ID is an event's id: its kind and names, joined by slashes.
func ID(e Event) string { return strings.Join(append([]string{e.Kind()}, e.Names()...), "/") }

// Key is an event's key in the bucket. A digest's name is its hex
// alone, so the key stays within the bus's 64 bytes a name.
func Key(e Event) (string, error) {
	tokens := []string{e.Kind()}
	for _, n := range e.Names() {
		t, err := bus.EncodeName(strings.TrimPrefix(n, "sha256:"))
		if err != nil {
			return "", fmt.Errorf("event %s: %w", ID(e), err)
		}
		tokens = append(tokens, t)
	}
	return strings.Join(tokens, "."), nil
}

// Teller says events once.
type Teller struct {
	JS     jetstream.JetStream
	Claims jetstream.KeyValue
	Logger *slog.Logger

	// known is every key this teller knows published, and since when, so an
	// event published before costs no round trip; Load fills it from the bucket
	// at once. Keys older than Kept are swept, as the bucket expires them.
	mu      sync.Mutex
	known   map[string]time.Time
	sweepAt int
}

// Load reads every record of an event published into memory, in one watch of
// the bucket: a restarted teller then says nothing again without asking
// the bus event by event.
func (t *Teller) Load(ctx context.Context) error {
	entries, err := bus.ReadAll(ctx, t.Claims)
	if err != nil {
		return err
	}
	for key, value := range entries {
		if string(value) == done {
			t.remember(key)
		}
	}
	return nil
}

// Known is whether e is known published, without asking the bus.
func (t *Teller) Known(e Event) bool {
	key, err := Key(e)
	if err != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.known[key]
	return ok
}

func (t *Teller) remember(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.known == nil {
		t.known, t.sweepAt = map[string]time.Time{}, 1<<16
	}
	t.known[key] = now
	if len(t.known) < t.sweepAt {
		return
	}
	for k, at := range t.known {
		if now.Sub(at) > Kept {
			delete(t.known, k)
		}
	}
	t.sweepAt = max(2*len(t.known), 1<<16)
}

// Open makes the bucket and the events stream where they are not.
func Open(ctx context.Context, js jetstream.JetStream, replicas int, logger *slog.Logger) (*Teller, error) {
	kv, err := bus.OpenKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "each event the mesh said, by its id", Replicas: max(replicas, 1), TTL: Kept,
	})
	if err != nil {
		return nil, fmt.Errorf("open the bucket %s: %w", Bucket, err)
	}
	if _, err := bus.OpenStream(ctx, js, jetstream.StreamConfig{
		Name: EventsStream, Subjects: []string{EventsSubjects}, Duplicates: time.Hour,
		MaxAge: Kept, Replicas: max(replicas, 1),
	}); err != nil {
		return nil, fmt.Errorf("open the stream %s: %w", EventsStream, err)
	}
	return &Teller{JS: js, Claims: kv, Logger: logger}, nil
}

// Tell publishes e with body unless it was published before; it answers
// whether it published it now. A claim left pending is published again, and the stream
// drops the repeat.
func (t *Teller) Tell(ctx context.Context, e Event, body any) (bool, error) {
	key, err := Key(e)
	if err != nil {
		return false, err
	}
	if t.Known(e) {
		return false, nil
	}
	revision, err := t.Claims.Create(ctx, key, []byte(pending))
	if bus.IsConflict(err) {
		entry, gerr := t.Claims.Get(ctx, key)
		if gerr != nil {
			return false, fmt.Errorf("read %s: %w", key, gerr)
		}
		if string(entry.Value()) == done {
			t.remember(key)
			return false, nil
		}
		revision, err = entry.Revision(), nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", key, err)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	ack, err := t.JS.Publish(ctx, "mesh.events."+e.Kind(), raw, jetstream.WithMsgID(ID(e)))
	if err != nil {
		return false, fmt.Errorf("publish %s: %w", ID(e), err)
	}
	// Once published, the record is finished even if ctx ends now: a teller
	// stopped between the two would leave the claim pending, and the next
	// one would publish the event again (the stream drops it, a plain
	// subscriber of the subject does not).
	finish, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishWithin)
	defer cancel()
	if _, err := t.Claims.Update(finish, key, []byte(done), revision); err != nil && !bus.IsConflict(err) {
		return false, fmt.Errorf("remember %s: %w", key, err)
	}
	t.remember(key)
	if ack.Duplicate {
		return false, nil
	}
	t.Logger.LogAttrs(ctx, slog.LevelInfo, "mesh event", append([]slog.Attr{slog.String("kind", e.Kind())}, e.Attrs()...)...)
	return true, nil
}
