package releaserecord_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	cdevents "github.com/cdevents/sdk-go/pkg/api"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// memStore keeps records in memory for the service's own rules; the
// ConfigMap store is tested against the real API server.
type memStore struct {
	mu      sync.Mutex
	records map[string]rr.Stored
	puts    int
	drifts  []string
	// unreadable names releases whose record does not decode.
	unreadable map[string]bool
	// failPuts makes writes fail as an API server that refuses them.
	failPuts bool
	// moveOnce makes the next Get hand out a version that moved.
	moveOnce bool
}

func newMemStore() *memStore {
	return &memStore{records: map[string]rr.Stored{}, unreadable: map[string]bool{}}
}

func (m *memStore) Get(_ context.Context, id string) (rr.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unreadable[id] {
		return rr.Stored{}, fmt.Errorf("%w: the test says so", rr.ErrUnreadable)
	}
	s := m.records[id]
	if m.moveOnce && s.Record.Exists() {
		m.moveOnce = false
		s.Version = "stale"
	}
	return s, nil
}

func (m *memStore) List(_ context.Context, app, env, cluster string) ([]rr.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []rr.Stored
	for _, s := range m.records {
		if s.Record.App == app && s.Record.Env == env && s.Record.Cluster == cluster {
			out = append(out, s)
		}
	}
	return out, nil
}

func (m *memStore) Put(_ context.Context, s rr.Stored) (rr.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPuts {
		return rr.Stored{}, errors.New("forbidden")
	}
	if cur := m.records[s.Record.ReleaseID]; cur.Version != s.Version {
		return rr.Stored{}, rr.ErrConflict
	}
	m.puts++
	s.Version = strconv.Itoa(m.puts)
	m.records[s.Record.ReleaseID] = s
	return s, nil
}

func (m *memStore) Drift(_ context.Context, s rr.Stored, d rr.Drift) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drifts = append(m.drifts, s.Record.ReleaseID+": "+d.Message)
	return nil
}

func (m *memStore) record(id string) rr.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records[id].Record
}

func (m *memStore) writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

type harness struct {
	t     *testing.T
	store *memStore
	recv  *cdeventstest.Receiver
	svc   *rr.Service
	logs  *testenv.LogBuffer
	clock time.Time
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, store: newMemStore(), recv: cdeventstest.Start(t), logs: &testenv.LogBuffer{}, clock: t0}
	sink, err := rr.NewCloudEventsSink(h.recv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h.svc = &rr.Service{Store: h.store, Sink: sink, Logger: slog.New(slog.NewJSONHandler(h.logs, nil)),
		Now: func() time.Time { h.clock = h.clock.Add(time.Minute); return h.clock }}
	return h
}

func (h *harness) take(id string, p rr.Phase, change ...func(*rr.Fact)) rr.Outcome {
	h.t.Helper()
	out, err := h.try(id, p, change...)
	if err != nil {
		h.t.Fatalf("%s %s: %v", id, p, err)
	}
	return out
}

func (h *harness) try(id string, p rr.Phase, change ...func(*rr.Fact)) (rr.Outcome, error) {
	f := rr.Fact{Phase: p, Release: rr.Release{ID: mustID(h.t, id)}}
	for _, c := range change {
		c(&f)
	}
	return h.svc.Take(context.Background(), f)
}

func rollbackOf(target string) func(*rr.Fact) {
	return func(f *rr.Fact) { f.Release.Kind, f.Release.RollbackOf = rr.KindRollback, target }
}

const (
	idA = "docs@2.1.0:prod-eu/prod"
	idB = "docs@2.2.0:prod-eu/prod"
	idC = "docs@2.1.1:prod-eu/prod"
)

// TestAReleaseWalked: events go out in the order lived, before the record
// is written; a repeat sends and writes nothing.
func TestAReleaseWalked(t *testing.T) {
	h := newHarness(t)
	if out := h.take(idA, rr.PhaseMerged); out.Effect != rr.EffectApplied || out.State != rr.StateMerged || len(out.Events) != 0 {
		t.Fatalf("merged: %+v", out)
	}
	h.take(idA, rr.PhaseProgressing, hash("h1"))
	writes := h.store.writes()
	if out := h.take(idA, rr.PhasePaused, hash("h1")); out.Effect != rr.EffectIgnored || h.store.writes() != writes {
		t.Fatalf("a repeat: %+v, %d writes", out, h.store.writes()-writes)
	}
	out := h.take(idA, rr.PhaseHealthy, hash("h1"))
	if out.State != rr.StateHealthy || !slices.Equal(out.Events, []string{"deployed"}) || !out.Recorded {
		t.Fatalf("healthy: %+v", out)
	}
	if got := h.recv.Types(); !slices.Equal(got, []string{"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.deployed.0.3.0"}) {
		t.Fatalf("events %v", got)
	}
	if r := h.store.record(idA); !slices.Equal(r.EmittedLive, []string{"deployed", "deploying"}) || len(r.EmittedShadow) != 0 {
		t.Fatalf("record %+v", r)
	}
	if h.store.writes() != writes+1 {
		t.Fatalf("%d writes for one change", h.store.writes()-writes)
	}
	// Progressing after healthy: ignored, and said.
	if out := h.take(idA, rr.PhaseProgressing, hash("h1")); out.Effect != rr.EffectIgnored || !strings.Contains(out.Why, "ignored") {
		t.Fatalf("progressing after healthy: %+v", out)
	}
	// Drift: one ReleaseDrift per change, no event.
	h.take(idA, rr.PhaseHealthy, hash("h2"))
	h.take(idA, rr.PhaseHealthy, hash("h2"))
	if len(h.store.drifts) != 1 || !strings.Contains(h.store.drifts[0], "h1 to h2") || len(h.recv.Events()) != 2 {
		t.Fatalf("drifts %v, events %v", h.store.drifts, h.recv.Types())
	}
}

// TestAFailedForwardWritesNothing: the sink refuses, the fact fails as a
// forward, the record stands; the retry sends the same event.
func TestAFailedForwardWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.take(idA, rr.PhaseMerged)
	writes := h.store.writes()
	h.recv.Refuse(1)
	if _, err := h.try(idA, rr.PhaseProgressing); !errors.Is(err, rr.ErrForward) {
		t.Fatalf("a refused forward: %v", err)
	}
	if h.store.writes() != writes || h.store.record(idA).State != rr.StateMerged {
		t.Fatal("a failed forward wrote the record")
	}
	h.take(idA, rr.PhaseProgressing)
	got := h.recv.Events()
	if len(got) != 1 || got[0].CDEvent.GetId() != rr.EventID(idA, rr.Event{Type: rr.EventDeploying}) {
		t.Fatalf("after the retry: %v", h.recv.Types())
	}
}

// TestShadowThenEmit: shadow logs and keeps its own set; flipped to emit,
// the history goes out once.
func TestShadowThenEmit(t *testing.T) {
	h := newHarness(t)
	emit := h.svc.Sink
	h.svc.Sink = rr.ShadowSink{Logger: h.svc.Logger}
	h.take(idA, rr.PhaseMerged)
	h.take(idA, rr.PhaseDegraded, abort, message("analysis failed"))
	if n := strings.Count(h.logs.String(), `"msg":"shadow-event"`); n != 2 || len(h.recv.Events()) != 0 {
		t.Fatalf("%d shadow-event lines, %d sent", n, len(h.recv.Events()))
	}
	if r := h.store.record(idA); !slices.Equal(r.EmittedShadow, []string{"deploying", "failed.aborted"}) || len(r.EmittedLive) != 0 {
		t.Fatalf("record %+v", r)
	}
	h.svc.Sink = emit
	out := h.take(idA, rr.PhaseDegraded, abort)
	if !slices.Equal(out.Events, []string{"deploying", "failed.aborted"}) || len(h.recv.Events()) != 2 {
		t.Fatalf("the history: %+v %v", out, h.recv.Types())
	}
	if out := h.take(idA, rr.PhaseDegraded, abort); len(out.Events) != 0 || len(h.recv.Events()) != 2 {
		t.Fatalf("sent twice: %+v", out)
	}
}

// TestSupersedeUpgradeAndRollback: a newer release supersedes the older,
// whose later facts send nothing; it is an upgrade; a rollback of it marks
// it rolled back with one rolled-back event.
func TestSupersedeUpgradeAndRollback(t *testing.T) {
	h := newHarness(t)
	h.take(idA, rr.PhaseMerged)
	h.take(idA, rr.PhaseHealthy)
	h.take(idB, rr.PhaseMerged)
	if r := h.store.record(idA); r.State != rr.StateSuperseded || r.SupersededBy != idB || r.HealthyAt.IsZero() {
		t.Fatalf("A: %+v", r)
	}
	sent := len(h.recv.Events())
	if out := h.take(idA, rr.PhaseDegraded); out.Effect != rr.EffectIgnored || len(h.recv.Events()) != sent {
		t.Fatalf("a superseded release's fact: %+v", out)
	}
	h.take(idB, rr.PhaseHealthy)
	h.take(idC, rr.PhaseMerged, rollbackOf(idB))
	out := h.take(idC, rr.PhaseHealthy)
	if !slices.Equal(out.Events, []string{"deploying", "rolledback"}) {
		t.Fatalf("rollback: %+v", out)
	}
	if r := h.store.record(idB); r.State != rr.StateRolledBack || r.RolledBackBy != idC || r.HealthyAt.IsZero() {
		t.Fatalf("B: %+v", r)
	}
	want := []string{"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.deployed.0.3.0",
		"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.upgraded.0.3.0",
		"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.rolledback.0.3.0"}
	if got := h.recv.Types(); !slices.Equal(got, want) {
		t.Fatalf("events %v", got)
	}
	// Another cluster's release of the same app is another service.
	h.take("docs@3.0.0:prod-us/prod", rr.PhaseMerged)
	if r := h.store.record(idC); r.State != rr.StateHealthy {
		t.Fatalf("C superseded from another cluster: %+v", r)
	}
}

func TestConflictReadsAndReducesAgain(t *testing.T) {
	h := newHarness(t)
	h.take(idA, rr.PhaseMerged)
	h.store.moveOnce = true
	out := h.take(idA, rr.PhaseProgressing)
	if out.State != rr.StateProgressing || h.store.record(idA).State != rr.StateProgressing || !slices.Equal(out.Events, []string{"deploying"}) {
		t.Fatalf("%+v", out)
	}
	// Sent on the first try; the second, reducing again, knows it went.
	if got := h.recv.Events(); len(got) != 1 || !slices.Equal(h.store.record(idA).EmittedLive, []string{"deploying"}) {
		t.Fatalf("%v", h.recv.Types())
	}
}

// racingSink stands for the other replica: on the first event this one
// sends, before it writes, the other takes its fact and writes first.
type racingSink struct {
	rr.Sink
	once  sync.Once
	other func()
}

func (s *racingSink) Send(ctx context.Context, ev cdevents.CDEventV04) error {
	s.once.Do(s.other)
	return s.Sink.Send(ctx, ev)
}

// TestAConflictKeepsEveryEventSent: one replica sends failed.aborted while
// the other writes the release healthy; its write conflicts, and the write
// it retries admits failed.aborted, so the figures read from the record
// count the change failure the sink was told of.
func TestAConflictKeepsEveryEventSent(t *testing.T) {
	h := newHarness(t)
	h.take(idA, rr.PhaseMerged)
	h.take(idA, rr.PhaseProgressing)
	other := &rr.Service{Store: h.store, Sink: h.svc.Sink, Logger: h.svc.Logger, Now: h.svc.Now}
	h.svc.Sink = &racingSink{Sink: h.svc.Sink, other: func() {
		if _, err := other.Take(context.Background(), rr.Fact{Phase: rr.PhaseHealthy, Release: rr.Release{ID: mustID(t, idA)}}); err != nil {
			t.Error(err)
		}
	}}
	out := h.take(idA, rr.PhaseDegraded, abort, message("analysis failed"))
	r := h.store.record(idA)
	if !slices.Equal(out.Events, []string{"failed.aborted"}) || r.State != rr.StateHealthy ||
		!slices.Equal(r.EmittedLive, []string{"deployed", "deploying", "failed.aborted"}) || !strings.HasPrefix(r.Drift, "degraded after it was healthy") {
		t.Fatalf("%+v\n%+v", out, r)
	}
}

func TestUnwritableRecordsGoStateless(t *testing.T) {
	h := newHarness(t)
	h.take(idA, rr.PhaseMerged)
	h.store.failPuts = true
	for _, p := range []rr.Phase{rr.PhaseProgressing, rr.PhaseHealthy} {
		if out := h.take(idA, p); out.Recorded || out.Effect != rr.EffectApplied {
			t.Fatalf("%s: %+v", p, out)
		}
	}
	if n := strings.Count(h.logs.String(), "going on stateless"); n != 1 {
		t.Fatalf("%d stateless lines:\n%s", n, h.logs)
	}
	h.store.failPuts = false
	h.take(idA, rr.PhaseHealthy)
	if !strings.Contains(h.logs.String(), "records written again") || h.store.record(idA).State != rr.StateHealthy {
		t.Fatalf("not recovered:\n%s", h.logs)
	}
}

func TestUnreadableRecordIsNeverOverwritten(t *testing.T) {
	h := newHarness(t)
	h.store.unreadable[idA] = true
	if _, err := h.try(idA, rr.PhaseHealthy); !errors.Is(err, rr.ErrUnreadable) {
		t.Fatalf("%v", err)
	}
	if h.store.writes() != 0 || len(h.recv.Events()) != 0 || !strings.Contains(h.logs.String(), "record unreadable") {
		t.Fatalf("%d writes, %d events, logs %s", h.store.writes(), len(h.recv.Events()), h.logs)
	}
}

func TestTakeInFlight(t *testing.T) {
	h := newHarness(t)
	sync := rr.Fact{Phase: rr.PhaseSyncFailed, Message: "ComparisonError"}
	out, err := h.svc.TakeInFlight(context.Background(), "docs", "prod-eu", "prod", "", sync)
	if err != nil || out.Effect != rr.EffectIgnored {
		t.Fatalf("none in flight: %+v %v", out, err)
	}
	h.take(idA, rr.PhaseMerged)
	out, err = h.svc.TakeInFlight(context.Background(), "docs", "prod-eu", "prod", "", sync)
	if err != nil || out.ReleaseID != idA || out.State != rr.StateSyncFailed || !slices.Equal(out.Events, []string{"deploying", "failed.sync-failed"}) {
		t.Fatalf("%+v %v", out, err)
	}
}
