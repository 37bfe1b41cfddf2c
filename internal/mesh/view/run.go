package view

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
)

// View watches the wants, the haves and source.main, and says each event
// of the picture once.
type View struct {
	JS         jetstream.JetStream
	Bus        *bus.Bus
	Sources    jetstream.KeyValue
	Teller     *dedup.Teller
	StuckAfter time.Duration
	// OnlineWindow is the assigner's: a node with no have this recent is
	// offline, and a revision is delivered without it.
	OnlineWindow time.Duration
	Now          func() time.Time
	Logger       *slog.Logger

	// seen is each place's have as the view last read it, and when that
	// have was first written, for an agent that does not say when its have
	// last changed: it writes an unchanged have again as its heartbeat,
	// which is no progress.
	mu   sync.Mutex
	seen map[bus.Place]bus.Have
}

// progressed is the haves, each that does not say since when it says what
// it says given the time the view first read it so.
func (v *View) progressed(haves map[bus.Place]bus.Have) map[bus.Place]bus.Have {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[bus.Place]bus.Have{}
	}
	out := make(map[bus.Place]bus.Have, len(haves))
	for p, h := range haves {
		if h.Since.IsZero() {
			s, ok := v.seen[p]
			if !ok || !s.Says(h) {
				s = h
				v.seen[p] = s
			}
			h.Since = s.At
		}
		out[p] = h
	}
	for p := range v.seen {
		if _, ok := haves[p]; !ok {
			delete(v.seen, p) // a have deleted is forgotten
		}
	}
	return out
}

// Open makes the view's buckets and its events stream where they are not,
// over an open bus.
func Open(ctx context.Context, js jetstream.JetStream, b *bus.Bus, replicas int, logger *slog.Logger) (*View, error) {
	sources, err := Sources(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	teller, err := dedup.Open(ctx, js, replicas, logger)
	if err != nil {
		return nil, err
	}
	return &View{JS: js, Bus: b, Sources: sources, Teller: teller, StuckAfter: DefaultStuckAfter, OnlineWindow: DefaultOnlineWindow,
		Now: time.Now, Logger: logger}, nil
}

// Look reads source.main, the registrations, every want and every have,
// and judges them. A document that does not decode is logged and left out.
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
	skipped := func(bucket string) func(string, error) {
		return func(key string, err error) {
			v.Logger.Warn("document skipped", slog.String("bucket", bucket), slog.String("key", key), slog.String("error", err.Error()))
		}
	}
	wants, err := bus.ReadPlaces(ctx, v.Bus.Wants, bus.KindWant, bus.DecodeWant, skipped(bus.WantsBucket))
	if err != nil {
		return Picture{}, err
	}
	haves, err := bus.ReadPlaces(ctx, v.Bus.Haves, bus.KindHave, bus.DecodeHave, skipped(bus.HavesBucket))
	if err != nil {
		return Picture{}, err
	}
	entries, err := bus.ReadAll(ctx, v.Bus.Modules)
	if err != nil {
		return Picture{}, err
	}
	var regs []bus.Registration
	for key, raw := range entries {
		r, err := bus.DecodeRegistration(raw)
		if err != nil {
			skipped(bus.ModulesBucket)(key, err)
			continue
		}
		regs = append(regs, r)
	}
	return Judge(Input{Source: src, Registrations: regs, Wants: wants, Haves: v.progressed(haves), Now: v.Now(),
		StuckAfter: v.StuckAfter, OnlineWindow: v.OnlineWindow}), nil
}

// Tell says each event of the picture that was not said before, the
// revision delivered first, and answers those it said now.
func (v *View) Tell(ctx context.Context, p Picture) ([]Event, error) {
	var told []Event
	var failed error
	for _, e := range firstDelivered(Events(p)) {
		ok, err := v.Teller.Tell(ctx, e, e)
		if err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		if ok {
			told = append(told, e)
		}
	}
	return told, failed
}

// firstDelivered is events with the delivered one first.
func firstDelivered(events []Event) []Event {
	slices.SortStableFunc(events, func(a, b Event) int {
		return cmp.Compare(boolInt(b.What == KindDelivered), boolInt(a.What == KindDelivered))
	})
	return events
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tellers is how many places' events the running view says at once.
const tellers = 16

// Run follows the registrations, the wants, the haves and source.main,
// one watch each, decoding only what changed, and judges from memory on
// every change and every tick (a place turns stuck with time alone),
// until ctx ends. A revision delivered is said at once; the places' events
// are said by a few tellers beside, so a backlog of them never holds it
// back. What was said before is read once at the start.
func (v *View) Run(ctx context.Context, tick time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := v.Teller.Load(ctx); err != nil {
		return err
	}
	f, err := v.follow(ctx)
	if err != nil {
		return err
	}
	queue := make(chan Event, 1<<16)
	var mu sync.Mutex
	queued := map[string]bool{}
	var wg sync.WaitGroup
	defer func() {
		close(queue)
		wg.Wait()
	}()
	for range tellers {
		wg.Go(func() {
			for e := range queue {
				if _, err := v.Teller.Tell(ctx, e, e); err != nil && ctx.Err() == nil {
					v.Logger.Error("event not said", slog.String("id", e.ID()), slog.String("error", err.Error()))
				}
				mu.Lock()
				delete(queued, e.ID())
				mu.Unlock()
			}
		})
	}
	// told is, by place, what the place last said that is known said: a
	// look asks the teller only of the places that changed since.
	type saying struct {
		state  State
		digest string
	}
	told := map[Place]saying{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.regs.Changed():
		case <-f.wants.Changed():
		case <-f.haves.Changed():
		case <-f.sources.Changed():
		case <-timer.C:
		}
		p, err := f.picture(v)
		if err != nil {
			return err
		}
		if p.Delivered {
			if e := deliveredEvent(p); !v.Teller.Known(e) {
				if _, err := v.Teller.Tell(ctx, e, e); err != nil && ctx.Err() == nil {
					v.Logger.Error("event not said", slog.String("id", e.ID()), slog.String("error", err.Error()))
				}
			}
		}
		for _, c := range p.Cells {
			now := saying{c.State, c.Want.Digest}
			if told[c.Place] == now {
				continue
			}
			e := cellEvent(c)
			if v.Teller.Known(e) {
				told[c.Place] = now
				continue
			}
			mu.Lock()
			if !queued[e.ID()] {
				select {
				case queue <- e:
					queued[e.ID()] = true
				default: // full: the next look offers it again
				}
			}
			mu.Unlock()
		}
		if len(told) > len(p.Cells) { // a want deleted is forgotten
			wanted := make(map[Place]bool, len(p.Cells))
			for _, c := range p.Cells {
				wanted[c.Place] = true
			}
			for pl := range told {
				if !wanted[pl] {
					delete(told, pl)
				}
			}
		}
		timer.Reset(tick)
	}
}

// followed is the view's buckets as their watches deliver them.
type followed struct {
	regs    *bus.Mirror[string, bus.Registration]
	wants   *bus.Mirror[bus.Place, bus.Want]
	haves   *bus.Mirror[bus.Place, bus.Have]
	sources *bus.Mirror[string, Source]
}

func (v *View) follow(ctx context.Context) (*followed, error) {
	skipped := func(bucket string) func(string, error) {
		return func(key string, err error) {
			v.Logger.Warn("document skipped", slog.String("bucket", bucket), slog.String("key", key), slog.String("error", err.Error()))
		}
	}
	var f followed
	var err error
	if f.regs, err = bus.Follow(ctx, v.Bus.Modules, func(key string, raw []byte) (string, bus.Registration, error) {
		r, err := bus.DecodeRegistration(raw)
		return key, r, err
	}, skipped(bus.ModulesBucket)); err != nil {
		return nil, err
	}
	if f.wants, err = bus.Follow(ctx, v.Bus.Wants, bus.Places(bus.KindWant, bus.DecodeWant), skipped(bus.WantsBucket)); err != nil {
		return nil, err
	}
	if f.haves, err = bus.Follow(ctx, v.Bus.Haves, bus.Places(bus.KindHave, bus.DecodeHave), skipped(bus.HavesBucket)); err != nil {
		return nil, err
	}
	if f.sources, err = bus.Follow(ctx, v.Sources, func(key string, raw []byte) (string, Source, error) {
		if key != SourceKey {
			return key, Source{}, errors.New("not " + SourceKey)
		}
		src, err := DecodeSource(raw)
		return key, src, err
	}, skipped(SourcesBucket)); err != nil {
		return nil, err
	}
	return &f, nil
}

// picture judges what the watches have delivered.
func (f *followed) picture(v *View) (Picture, error) {
	regs, err := f.regs.Docs()
	if err != nil {
		return Picture{}, err
	}
	wants, err := f.wants.Docs()
	if err != nil {
		return Picture{}, err
	}
	haves, err := f.haves.Docs()
	if err != nil {
		return Picture{}, err
	}
	sources, err := f.sources.Docs()
	if err != nil {
		return Picture{}, err
	}
	return Judge(Input{Source: sources[SourceKey], Registrations: slices.Collect(maps.Values(regs)), Wants: wants,
		Haves: v.progressed(haves), Now: v.Now(), StuckAfter: v.StuckAfter, OnlineWindow: v.OnlineWindow}), nil
}
