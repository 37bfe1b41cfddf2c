package releaserecord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Effect says whether a fact changed anything.
type Effect string

// A fact is applied when it moved a record or sent an event, else ignored.
const (
	EffectApplied Effect = "applied"
	EffectIgnored Effect = "ignored"
)

// Outcome is what one fact did, as the answer and the log say it.
type Outcome struct {
	Effect    Effect   `json:"effect"`
	Why       string   `json:"why"`
	ReleaseID string   `json:"releaseId,omitempty"`
	State     State    `json:"state,omitempty"`
	Events    []string `json:"events"`
	// Recorded is false when the record could not be written: the events
	// went out, and the service went on without its state.
	Recorded bool `json:"recorded"`
}

// ErrForward marks events the sink did not take: nothing was written, and
// the fact is answered 502 so its sender tries again.
var ErrForward = errors.New("the events could not be forwarded")

// maxAttempts bounds how often one fact is read and reduced again after a
// write conflict.
const maxAttempts = 8

// Service takes facts: it reads the record, reduces, sends what is owed
// and writes the record, in that order.
type Service struct {
	Store  Store
	Sink   Sink
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// locks serialises the facts of one service (app, env and cluster)
	// within this replica; replicas meet as write conflicts.
	locks sync.Map
	// stateless is set while the records cannot be read or written, so
	// that is logged once.
	mu        sync.Mutex
	stateless bool
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Service) lock(id ReleaseID) func() {
	m, _ := s.locks.LoadOrStore(id.App()+"/"+id.Cluster+"/"+id.Env, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Take applies one fact about the release f.Release.ID names. An attempt
// whose write met a conflict may have sent events already: the next attempt
// marks them sent whatever it reduces, so the record admits every event
// that went out.
func (s *Service) Take(ctx context.Context, f Fact) (Outcome, error) {
	defer s.lock(f.Release.ID)()
	var sent []Event
	for attempt := 1; ; attempt++ {
		out, err := s.take(ctx, f, &sent)
		if !errors.Is(err, ErrConflict) || attempt == maxAttempts {
			return out, err
		}
	}
}

// TakeInFlight applies a fact that names a service but no release (an
// Argo CD sync failure) to the release of it in flight, preferring one at
// revision; with none in flight it is ignored.
func (s *Service) TakeInFlight(ctx context.Context, app, cluster, env, revision string, f Fact) (Outcome, error) {
	stored, err := s.Store.List(ctx, app, env, cluster)
	if err != nil {
		return Outcome{}, fmt.Errorf("list the releases of %s in %s/%s: %w", app, cluster, env, err)
	}
	records := make([]Record, len(stored))
	for i, st := range stored {
		records[i] = st.Record
	}
	rec, ok := InFlight(records, revision)
	if !ok {
		return Outcome{Effect: EffectIgnored, Why: "no release of " + app + " in flight", Events: []string{}}, nil
	}
	f.Release.ID, _ = ParseReleaseID(rec.ReleaseID)
	return s.Take(ctx, f)
}

// take is one attempt at a fact: sent holds the events earlier attempts
// sent, and gains those this one sends.
func (s *Service) take(ctx context.Context, f Fact, sent *[]Event) (Outcome, error) {
	now := s.now()
	id := f.Release.ID.String()
	cur, err := s.Store.Get(ctx, id)
	stateless := false
	switch {
	case errors.Is(err, ErrUnreadable):
		s.Logger.LogAttrs(ctx, slog.LevelError, "record unreadable", slog.String("releaseId", id),
			slog.String("record", RecordName(id)), slog.String("error", err.Error()))
		return Outcome{}, err
	case err != nil:
		// Without the record the fact is reduced against the release it
		// names: deterministic ids keep the repeats this sends harmless.
		s.degrade(ctx, "read", err)
		stateless = true
		cur = Stored{Record: NewRecord(f.Release, now)}
	}
	before := cur.Record
	var group []Stored
	firstFact := !before.Exists()
	turning := f.Phase == PhaseHealthy && before.Exists() && before.State != StateHealthy
	if !stateless && (firstFact || turning) {
		if group, err = s.Store.List(ctx, f.Release.ID.App(), f.Release.ID.Env, f.Release.ID.Cluster); err != nil {
			s.degrade(ctx, "list", err)
		}
	}
	records := make([]Record, 0, len(group))
	for _, g := range group {
		if g.Record.ReleaseID != id && !g.Record.HealthyAt.IsZero() {
			f.HealthyBefore = true
		}
		records = append(records, g.Record)
	}
	if firstFact {
		// The record the fact would start, held to those recorded: a
		// release first seen after a newer one starts superseded by it.
		f.Newer = NewerThan(Reduce(before, f, now).Record, records)
	}
	res := Reduce(before, f, now)
	mode := s.Sink.Mode()
	rec := MarkSent(res.Record, mode, *sent)
	var owed []Event
	for _, e := range Owed(rec, mode, res.Events) {
		if !slices.Contains(*sent, e) {
			owed = append(owed, e)
		}
	}
	for _, e := range owed {
		ev, err := CDEvent(rec, e, now)
		if err != nil {
			return Outcome{}, err
		}
		if err := s.Sink.Send(ctx, ev); err != nil {
			return Outcome{}, fmt.Errorf("%w: %w", ErrForward, err)
		}
		*sent = append(*sent, e)
	}
	rec = MarkSent(rec, mode, owed)
	out := Outcome{Effect: EffectIgnored, Why: res.Why, ReleaseID: id, State: rec.State, Events: keysOf(*sent), Recorded: !stateless}
	if res.Changed || len(*sent) > 0 {
		out.Effect = EffectApplied
	}
	if !rec.Exists() {
		out.State = ""
	}
	if stateless || equal(rec, before) {
		return out, nil
	}
	written, err := s.Store.Put(ctx, Stored{Record: rec, Version: cur.Version})
	switch {
	case errors.Is(err, ErrConflict):
		return out, err
	case err != nil:
		s.degrade(ctx, "write", err)
		out.Recorded = false
		return out, nil
	}
	s.recovered(ctx)
	if res.Drift != nil {
		if err := s.Store.Drift(ctx, written, *res.Drift); err != nil {
			s.Logger.LogAttrs(ctx, slog.LevelWarn, "drift event not written", slog.String("releaseId", id), slog.String("error", err.Error()))
		}
	}
	s.neighbours(ctx, rec, before, group, now)
	return out, nil
}

// neighbours applies what a fact does to the other releases of its service:
// a release's first fact, or its turning healthy, supersedes the live ones
// it is Newer than; a rollback turning healthy marks the release it undoes.
func (s *Service) neighbours(ctx context.Context, rec, before Record, group []Stored, now time.Time) {
	supersede := rec.State != StateSuperseded && (!before.Exists() || (rec.State == StateHealthy && before.State != StateHealthy))
	for _, g := range group {
		if g.Record.ReleaseID == rec.ReleaseID || !SameService(g.Record, rec) {
			continue
		}
		var step func(Record) Result
		switch {
		case rec.Kind == KindRollback && rec.State == StateHealthy && g.Record.ReleaseID == rec.RollbackOf:
			step = func(r Record) Result { return MarkRolledBack(r, rec, now) }
		case supersede && Newer(rec, g.Record):
			step = func(r Record) Result { return Supersede(r, rec.ReleaseID, now) }
		default:
			continue
		}
		s.update(ctx, g, step)
	}
}

// update writes step's change to one record, reading it again after a
// conflict.
func (s *Service) update(ctx context.Context, st Stored, step func(Record) Result) {
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		res := step(st.Record)
		if !res.Changed {
			return
		}
		_, err := s.Store.Put(ctx, Stored{Record: res.Record, Version: st.Version})
		if err == nil {
			s.Logger.LogAttrs(ctx, slog.LevelInfo, "release "+string(res.Record.State), slog.String("releaseId", res.Record.ReleaseID), slog.String("why", res.Why))
			return
		}
		if !errors.Is(err, ErrConflict) {
			s.degrade(ctx, "write", err)
			return
		}
		if st, err = s.Store.Get(ctx, st.Record.ReleaseID); err != nil || !st.Record.Exists() {
			return
		}
	}
}

// degrade logs, once until the records can be written again, that the
// service goes on without them.
func (s *Service) degrade(ctx context.Context, what string, err error) {
	s.mu.Lock()
	first := !s.stateless
	s.stateless = true
	s.mu.Unlock()
	if first {
		s.Logger.LogAttrs(ctx, slog.LevelError, "records unavailable; going on stateless", slog.String("failed", what), slog.String("error", err.Error()))
	}
}

func (s *Service) recovered(ctx context.Context) {
	s.mu.Lock()
	was := s.stateless
	s.stateless = false
	s.mu.Unlock()
	if was {
		s.Logger.LogAttrs(ctx, slog.LevelInfo, "records written again")
	}
}
