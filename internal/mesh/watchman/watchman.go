package watchman

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
)

// Watchman looks at the wants and haves on every change and every tick,
// says each new stall once, and keeps its gauges.
type Watchman struct {
	Bus        *bus.Bus
	Teller     *dedup.Teller
	StallAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger

	owed, stalled *prometheus.GaugeVec
}

// New is a watchman over an open bus, its gauges registered on reg.
func New(b *bus.Bus, teller *dedup.Teller, reg prometheus.Registerer, logger *slog.Logger) (*Watchman, error) {
	w := &Watchman{Bus: b, Teller: teller, StallAfter: DefaultStallAfter, Now: time.Now, Logger: logger,
		owed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mesh_pulses_owed",
			Help: "Wants a node's agent has not answered with a have of their fingerprint, by node."}, []string{"node"}),
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mesh_stalls",
			Help: "Wants unanswered for longer than STALL_AFTER, by node."}, []string{"node"}),
	}
	for _, c := range []prometheus.Collector{w.owed, w.stalled} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the watchman's gauges: %w", err)
		}
	}
	return w, nil
}

// Pass reads the wants and haves, sets the gauges and says the new stalls;
// it answers the stalls it said now.
func (w *Watchman) Pass(ctx context.Context) ([]Stall, error) {
	wants, err := bus.ReadPlaces(ctx, w.Bus.Wants, bus.KindWant, bus.DecodeWant, w.skipped(bus.WantsBucket))
	if err != nil {
		return nil, err
	}
	haves, err := bus.ReadPlaces(ctx, w.Bus.Haves, bus.KindHave, bus.DecodeHave, w.skipped(bus.HavesBucket))
	if err != nil {
		return nil, err
	}
	return w.pass(ctx, wants, haves)
}

func (w *Watchman) skipped(bucket string) func(string, error) {
	return func(key string, err error) {
		w.Logger.Warn("document skipped", slog.String("bucket", bucket), slog.String("key", key), slog.String("error", err.Error()))
	}
}

// pass sets the gauges from wants and haves and says the new stalls.
func (w *Watchman) pass(ctx context.Context, wants map[bus.Place]bus.Want, haves map[bus.Place]bus.Have) ([]Stall, error) {
	pulses := Owed(wants, haves, w.Now(), w.StallAfter)
	owed, stalled := map[string]float64{}, map[string]float64{}
	var told []Stall
	var failed error
	for _, p := range pulses {
		owed[p.Node]++
		if !p.Stalled {
			continue
		}
		stalled[p.Node]++
		s := StallOf(p)
		ok, err := w.Teller.Tell(ctx, s, s)
		if err != nil {
			failed = errors.Join(failed, err)
		} else if ok {
			told = append(told, s)
		}
	}
	// Set whole each pass, so a node that caught up reads 0, not its last.
	w.owed.Reset()
	w.stalled.Reset()
	for node, n := range owed {
		w.owed.WithLabelValues(node).Set(n)
		w.stalled.WithLabelValues(node).Set(stalled[node])
	}
	return told, failed
}

// Run follows the wants and the haves, one watch each, decoding only what
// changed, and passes from memory on every change and every tick (a pulse
// turns a stall with time alone), until ctx ends. What was said before is
// read once at the start.
func (w *Watchman) Run(ctx context.Context, tick time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := w.Teller.Load(ctx); err != nil {
		return err
	}
	wants, err := bus.Follow(ctx, w.Bus.Wants, bus.Places(bus.KindWant, bus.DecodeWant), w.skipped(bus.WantsBucket))
	if err != nil {
		return err
	}
	haves, err := bus.Follow(ctx, w.Bus.Haves, bus.Places(bus.KindHave, bus.DecodeHave), w.skipped(bus.HavesBucket))
	if err != nil {
		return err
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wants.Changed():
		case <-haves.Changed():
		case <-timer.C:
		}
		ws, err := wants.Docs()
		if err != nil {
			return err
		}
		hs, err := haves.Docs()
		if err != nil {
			return err
		}
		if _, err := w.pass(ctx, ws, hs); err != nil && ctx.Err() == nil {
			w.Logger.Error("pass failed", slog.String("error", err.Error()))
		}
		timer.Reset(tick)
	}
}
