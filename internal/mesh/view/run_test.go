package view_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

type world struct {
	t    *testing.T
	js   jetstream.JetStream
	nc   *nats.Conn
	bus  *bus.Bus
	logs *testenv.LogBuffer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldAt(t, bustest.Embedded(t))
}

// newWorldAt is a world on the server at url.
func newWorldAt(t *testing.T, url string) *world {
	t.Helper()
	nc, js := bustest.Connect(t, url)
	return &world{t: t, js: js, nc: nc, bus: bustest.Open(t, url, 1), logs: &testenv.LogBuffer{}}
}

// view opens a view, as a fresh process would, at the clock now.
func (w *world) view(now time.Time) *view.View {
	w.t.Helper()
	v, err := view.Open(context.Background(), w.js, w.bus, 1, slog.New(slog.NewJSONHandler(w.logs, nil)))
	if err != nil {
		w.t.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	return v
}

func (w *world) put(kv jetstream.KeyValue, key string, doc any) {
	w.t.Helper()
	if _, err := kv.Put(context.Background(), key, bus.Encode(doc)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) tell(v *view.View) []string {
	w.t.Helper()
	p, err := v.Look(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	told, err := v.Tell(context.Background(), p)
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, e := range told {
		ids = append(ids, e.ID())
	}
	slices.Sort(ids)
	return ids
}

// published is every event the stream holds.
func (w *world) published() []view.Event {
	w.t.Helper()
	ctx := context.Background()
	s, err := w.js.Stream(ctx, dedup.EventsStream)
	if err != nil {
		w.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []view.Event
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			w.t.Fatal(err)
		}
		var e view.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func key(f func(string, string) (string, error), a, b string) string {
	k, err := f(a, b)
	if err != nil {
		panic(err)
	}
	return k
}

// TestEachEventIsPublishedOnce: a delivery's events said as it moves, each
// once, and a restarted view says none of them again.
func TestEachEventIsPublishedOnce(t *testing.T) {
	w := newWorld(t)
	v := w.view(t0.Add(time.Minute))
	sources := v.Sources
	if err := view.WriteSource(context.Background(), sources, view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2"}, At: t0}); err != nil {
		t.Fatal(err)
	}
	modKey, _ := bus.ModuleKey("web")
	w.put(w.bus.Modules, modKey, bus.Registration{Module: "web", Nodes: []string{"n1", "n2"}, Providers: []string{}})
	w.put(w.bus.Wants, key(bus.WantKey, "n1", "web"), want("f2", dB, t0))
	w.put(w.bus.Wants, key(bus.WantKey, "n2", "web"), want("f2", dB, t0))
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseApplying, bus.Unknown, t0))
	// A want that does not decode is skipped, and said so.
	if _, err := w.bus.Wants.Put(context.Background(), key(bus.WantKey, "n3", "web"), []byte(`{"fingerprint":`)); err != nil {
		t.Fatal(err)
	}
	moving := []string{"moving/n1/web/" + dB, "moving/n2/web/" + dB}
	if got := w.tell(v); !slices.Equal(got, moving) {
		t.Fatalf("said %v, want %v", got, moving)
	}
	if !strings.Contains(w.logs.String(), `"msg":"document skipped"`) {
		t.Errorf("the bad want was not said:\n%s", w.logs)
	}
	if got := w.tell(v); len(got) != 0 {
		t.Fatalf("said %v again", got)
	}
	for _, n := range []string{"n1", "n2"} {
		w.put(w.bus.Haves, key(bus.HaveKey, n, "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0.Add(time.Minute)))
	}
	done := []string{"delivered/abc123", "settled/n1/web/" + dB, "settled/n2/web/" + dB}
	if got := w.tell(v); !slices.Equal(got, done) {
		t.Fatalf("said %v, want %v", got, done)
	}
	// A restarted view says nothing it said.
	if got := w.tell(w.view(t0.Add(time.Hour))); len(got) != 0 {
		t.Fatalf("the restarted view said %v again", got)
	}
	if got := len(w.published()); got != 5 {
		t.Fatalf("the stream holds %d events, not 5: %+v", got, w.published())
	}
}

// TestAClaimLeftPendingIsPublishedOnce: a view stopped after it published an
// event but before it remembered so; the next one publishes again, and the
// stream drops the repeat.
func TestAClaimLeftPendingIsPublishedOnce(t *testing.T) {
	w := newWorld(t)
	v := w.view(t0.Add(20 * time.Minute))
	w.put(w.bus.Wants, key(bus.WantKey, "n1", "web"), want("f2", dB, t0))
	e := view.Event{What: view.KindStuck, Node: "n1", Module: "web", Fingerprint: "f2", Digest: dB, Since: t0}
	body, _ := json.Marshal(e)
	if _, err := w.js.Publish(context.Background(), "mesh.events.stuck", body, jetstream.WithMsgID(e.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Teller.Claims.Create(context.Background(), "stuck.n1.web."+strings.TrimPrefix(dB, "sha256:"), []byte("pending")); err != nil {
		t.Fatal(err)
	}
	if got := w.tell(v); len(got) != 0 {
		t.Fatalf("said %v, which was published before", got)
	}
	if got := w.published(); len(got) != 1 || got[0].What != view.KindStuck {
		t.Fatalf("the stream holds %+v", got)
	}
	if got := w.tell(v); len(got) != 0 {
		t.Fatalf("said %v again", got)
	}
}

// TestRunSaysAChangeAsItHappens: the running view sees a have settle and
// says it on mesh.events.settled.
func TestRunSaysAChangeAsItHappens(t *testing.T) {
	w := newWorld(t)
	v := w.view(t0.Add(time.Minute))
	sub, err := w.nc.SubscribeSync("mesh.events.settled")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- v.Run(ctx, time.Minute) }()
	w.put(w.bus.Wants, key(bus.WantKey, "n1", "web"), want("f2", dB, t0))
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0))
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no settled event: %v\n%s", err, w.logs)
	}
	var e view.Event
	if err := json.Unmarshal(m.Data, &e); err != nil || e.Node != "n1" || e.Module != "web" || e.Digest != dB {
		t.Fatalf("%s: %v", m.Data, err)
	}
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run ended with %v", err)
	}
}

// TestAHeartbeatIsNoProgress: a have written again unchanged but its time,
// as an agent's heartbeat is, leaves a place that does not settle stuck.
func TestAHeartbeatIsNoProgress(t *testing.T) {
	w := newWorld(t)
	now := t0.Add(time.Minute)
	v := w.view(now)
	v.StuckAfter = 10 * time.Minute
	w.put(w.bus.Wants, key(bus.WantKey, "n1", "web"), want("f2", dB, t0))
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseRunning, bus.Unhealthy, t0))
	look := func() view.State {
		p, err := v.Look(context.Background())
		if err != nil || len(p.Cells) != 1 {
			t.Fatalf("%+v %v", p, err)
		}
		return p.Cells[0].State
	}
	if got := look(); got != view.StateMoving {
		t.Fatalf("%s a minute in", got)
	}
	// Eleven minutes on, the agent has written the same have every 30 s.
	now = t0.Add(11 * time.Minute)
	v.Now = func() time.Time { return now }
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseRunning, bus.Unhealthy, now.Add(-10*time.Second)))
	if got := look(); got != view.StateStuck {
		t.Fatalf("%s after eleven minutes of heartbeats", got)
	}
	// A have that changes is progress.
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseApplying, bus.Unknown, now))
	if got := look(); got != view.StateMoving {
		t.Fatalf("%s after the have changed", got)
	}
}

// TestDeliveredWaitsForEveryRegisteredNode, on the real server: a node
// registered for the module and online holds the revision back until it
// runs it, though it has no want yet; one that never wrote a have is
// offline, and the revision is delivered without it, naming it.
func TestDeliveredWaitsForEveryRegisteredNode(t *testing.T) {
	w := newWorldAt(t, testenv.NewNATS(t).URL)
	v := w.view(t0.Add(time.Minute))
	if err := view.WriteSource(context.Background(), v.Sources, view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2"}, At: t0}); err != nil {
		t.Fatal(err)
	}
	modKey, _ := bus.ModuleKey("web")
	w.put(w.bus.Modules, modKey, bus.Registration{Module: "web", Nodes: []string{"n1", "n2", "n3", "n4"}, Providers: []string{}})
	for _, n := range []string{"n1", "n2"} {
		w.put(w.bus.Wants, key(bus.WantKey, n, "web"), want("f2", dB, t0))
		w.put(w.bus.Haves, key(bus.HaveKey, n, "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0))
	}
	// n3's agent is there; the assigner has not given it a want yet.
	w.put(w.bus.Haves, key(bus.HaveKey, "n3", "web"), have("", "", bus.PhaseRunning, bus.Unknown, t0))
	settled := []string{"settled/n1/web/" + dB, "settled/n2/web/" + dB}
	if got := w.tell(v); !slices.Equal(got, settled) {
		t.Fatalf("said %v, want %v", got, settled)
	}
	w.put(w.bus.Wants, key(bus.WantKey, "n3", "web"), want("f2", dB, t0))
	if got := w.tell(v); !slices.Equal(got, []string{"moving/n3/web/" + dB}) {
		t.Fatalf("said %v", got)
	}
	w.put(w.bus.Haves, key(bus.HaveKey, "n3", "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0))
	if got := w.tell(v); !slices.Equal(got, []string{"delivered/abc123", "settled/n3/web/" + dB}) {
		t.Fatalf("said %v", got)
	}
	for _, e := range w.published() {
		if e.What == view.KindDelivered && !slices.Equal(e.Offline, []string{"n4"}) {
			t.Fatalf("the delivered event names offline %v, not n4", e.Offline)
		}
	}
}

// TestTheDedupRecordsExpire: the record of an event said expires with the
// stream's copy of it, so the said bucket does not grow without end.
func TestTheDedupRecordsExpire(t *testing.T) {
	w := newWorld(t)
	v := w.view(t0)
	status, err := v.Teller.Claims.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if status.TTL() != dedup.Kept {
		t.Fatalf("the said bucket keeps its records %s, not %s", status.TTL(), dedup.Kept)
	}
}

// TestTheRunningViewFollowsTheBus, on the real server: the running view
// says each place as its have changes and the revision delivered once the
// last one settles; a view started again after it says nothing it said,
// only what changed since.
func TestTheRunningViewFollowsTheBus(t *testing.T) {
	w := newWorldAt(t, testenv.NewNATS(t).URL)
	// What was said is what the events stream kept: a plain subscriber of
	// the subjects would also see a repeat the stream dropped.
	v := w.view(t0)
	events, err := w.js.OrderedConsumer(context.Background(), dedup.EventsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) view.Event {
		t.Helper()
		m, err := events.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("no event %s: %v\n%s", what, err, w.logs)
		}
		var e view.Event
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	run := func() func() {
		v := w.view(t0.Add(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- v.Run(ctx, time.Hour) }()
		return func() {
			cancel()
			if err := <-ran; !errors.Is(err, context.Canceled) {
				t.Errorf("Run ended with %v", err)
			}
		}
	}
	first := run()
	if err := view.WriteSource(context.Background(), v.Sources, view.Source{Revision: "abc123", Modules: map[string]string{"web": "f2"}, At: t0}); err != nil {
		t.Fatal(err)
	}
	// n2 is online, with nothing of web yet.
	w.put(w.bus.Haves, key(bus.HaveKey, "n2", "db"), have("", "", bus.PhaseRunning, bus.Unknown, t0))
	modKey, _ := bus.ModuleKey("web")
	w.put(w.bus.Modules, modKey, bus.Registration{Module: "web", Nodes: []string{"n1", "n2"}, Providers: []string{}})
	w.put(w.bus.Haves, key(bus.HaveKey, "n1", "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0))
	w.put(w.bus.Wants, key(bus.WantKey, "n1", "web"), want("f2", dB, t0))
	// A place may be said moving first: the watches of the wants and the
	// haves deliver in no order between them.
	until := func(what string, ok func(view.Event) bool) {
		t.Helper()
		for {
			e := next(what)
			if ok(e) {
				return
			}
			if e.What != view.KindMoving {
				t.Fatalf("said %+v before %s", e, what)
			}
		}
	}
	until("n1 settled", func(e view.Event) bool { return e.What == view.KindSettled && e.Node == "n1" })
	w.put(w.bus.Haves, key(bus.HaveKey, "n2", "web"), have("f2", dB, bus.PhaseRunning, bus.Healthy, t0))
	w.put(w.bus.Wants, key(bus.WantKey, "n2", "web"), want("f2", dB, t0))
	until("delivered", func(e view.Event) bool { return e.What == view.KindDelivered && e.Revision == "abc123" })
	until("n2 settled", func(e view.Event) bool { return e.What == view.KindSettled && e.Node == "n2" })
	first()

	second := run()
	defer second()
	w.put(w.bus.Wants, key(bus.WantKey, "n3", "web"), want("f2", dB, t0))
	if e := next("n3 moving, and nothing said again"); e.What != view.KindMoving || e.Node != "n3" {
		t.Fatalf("the view started again said %+v", e)
	}
}
