package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Loop runs a pass at once, then again after each change to any of its
// Stores (changes that come during a pass make one more), each value on
// Wake, and once Wait has passed with nothing new, since some judgements
// turn with time alone.
type Loop struct {
	Stores []jetstream.KeyValue
	// Only are watched for some of their keys alone.
	Only []Watched
	// Wake, when set, asks for a pass at once: the bus is back.
	Wake <-chan struct{}
	// Wait is asked after each pass how long to wait with nothing new.
	Wait func() time.Duration
}

// Watched is the keys of a bucket a pattern matches.
type Watched struct {
	Store jetstream.KeyValue
	Keys  string
}

// Run passes until ctx ends, and returns its error.
func (l Loop) Run(ctx context.Context, pass func(context.Context)) error {
	changed := make(chan struct{}, 1)
	watched := l.Only
	for _, kv := range l.Stores {
		watched = append(watched, Watched{Store: kv, Keys: jetstream.AllKeys})
	}
	for _, o := range watched {
		w, err := o.Store.Watch(ctx, o.Keys, jetstream.UpdatesOnly())
		if err != nil {
			return fmt.Errorf("watch %s in %s: %w", o.Keys, o.Store.Bucket(), err)
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
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		pass(ctx)
		timer.Reset(l.Wait())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-l.Wake:
		case <-timer.C:
		}
	}
}
