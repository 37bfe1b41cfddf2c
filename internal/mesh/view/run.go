package view

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/said"
)

// View watches the wants, the haves and source.main, and says each event
// of the picture once.
type View struct {
	JS         jetstream.JetStream
	Bus        *bus.Bus
	Sources    jetstream.KeyValue
	Teller     *said.Teller
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
	return out
}

// Open makes the view's buckets and its events stream where they are not,
// over an open bus.
func Open(ctx context.Context, js jetstream.JetStream, b *bus.Bus, replicas int, logger *slog.Logger) (*View, error) {
	sources, err := Sources(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	teller, err := said.Open(ctx, js, replicas, logger)
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

// Tell says each event of the picture that was not said before, and
// answers those it said now.
func (v *View) Tell(ctx context.Context, p Picture) ([]Event, error) {
	var told []Event
	var failed error
	for _, e := range Events(p) {
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

// Run looks and tells on every change of a registration, a want, a have or source.main, and
// every tick (a place turns stuck with time alone), until ctx ends.
func (v *View) Run(ctx context.Context, tick time.Duration) error {
	return bus.EveryChange(ctx, tick, func(ctx context.Context) {
		p, err := v.Look(ctx)
		if err == nil {
			_, err = v.Tell(ctx, p)
		}
		if err != nil && ctx.Err() == nil {
			v.Logger.Error("look failed", slog.String("error", err.Error()))
		}
	}, v.Bus.Modules, v.Bus.Wants, v.Bus.Haves, v.Sources)
}
