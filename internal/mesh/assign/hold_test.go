package assign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// TestAHoldItsWatchHasNotDeliveredIsNotPassedOver: the state holds web's
// build f2 done and no hold, as when the builds' watch delivered before
// the holds'; a hold the bus took already is read again before the write,
// and f2 is not wanted. Without the hold it is.
func TestAHoldItsWatchHasNotDeliveredIsNotPassedOver(t *testing.T) {
	ctx := context.Background()
	b := bustest.Open(t, bustest.Embedded(t), 1)
	a := &Assigner{Bus: b, Now: func() time.Time { return now }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	st := newState()
	st.registrations["module.web"] = bus.Registration{Module: "web", Nodes: []string{"n1"}, Providers: []string{}}
	st.builds["build.web.f2"] = bus.Build{Module: "web", Fingerprint: "f2", State: bus.BuildDone, At: now}
	st.grants["grant.web.f2"] = bus.Grant{Module: "web", Fingerprint: "f2", At: now}
	st.compositions["composed-n1/composition.web.f2"] = Composition{Node: "n1", Module: "web", Fingerprint: "f2", Digest: digest("n1", "web", "f2")}
	st.haves[Place{Node: "n1", Module: "web"}] = runs("f1", now)

	holdKey, _ := bus.HoldKey("web", "f2")
	if _, err := b.Holds.Put(ctx, holdKey, bus.Encode(bus.Hold{Module: "web", Fingerprint: "f2", Reason: "broken", At: now})); err != nil {
		t.Fatal(err)
	}
	a.pass(ctx, st)
	wantKey, _ := bus.WantKey("n1", "web")
	if _, err := b.Wants.Get(ctx, wantKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a held build was wanted: %v", err)
	}

	if err := b.Holds.Delete(ctx, holdKey); err != nil {
		t.Fatal(err)
	}
	a.pass(ctx, st)
	got, err := b.Wants.Get(ctx, wantKey)
	if err != nil {
		t.Fatalf("no want once the hold was lifted: %v", err)
	}
	if w, _ := bus.DecodeWant(got.Value()); w.Fingerprint != "f2" {
		t.Fatalf("want %+v", w)
	}
}

// TestAHoldBeforeTheBuildIsNeverPassedOver, on the real server with the
// assigner running: forty times a build is held, the hold acknowledged,
// and only then marked done; no held build is ever wanted, and the last
// build, not held, is.
func TestAHoldBeforeTheBuildIsNeverPassedOver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := bustest.Open(t, testenv.NewNATS(t).URL, 1)
	keys, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	put := func(kv jetstream.KeyValue, key string, doc any) {
		t.Helper()
		if _, err := kv.Put(ctx, key, bus.Encode(doc)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now().UTC()
	put(b.Modules, "module.web", bus.Registration{Module: "web", Nodes: []string{"n1"}, Providers: []string{}})
	put(b.Haves, "have.n1.web", bus.Have{Phase: bus.PhaseRunning, Health: bus.Unknown, At: start})
	const tries = 40
	fingerprint := func(i int) string { return fmt.Sprintf("f%02d", i) }
	for i := range tries + 1 {
		f := fingerprint(i)
		put(b.Grants, "grant.web."+f, bus.Grant{Module: "web", Fingerprint: f, At: start})
		doc := composition.Document{Module: "web", Fingerprint: f, Node: "n1", Files: map[string]composition.File{},
			Command: composition.Command{Argv: []string{"bin/web"}},
			Health:  composition.Health{Command: []string{"true"}, Interval: composition.Duration(time.Second), Timeout: composition.Duration(time.Second)}}
		envelope, err := composition.Sign(ctx, keys.Signer, doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.WriteComposition(ctx, "n1", "web", f, envelope); err != nil {
			t.Fatal(err)
		}
	}
	// Every want the assigner writes, as it writes it.
	watch, err := b.Wants.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wanted []string
	go func() {
		for entry := range watch.Updates() {
			if entry == nil {
				continue
			}
			if w, err := bus.DecodeWant(entry.Value()); err == nil {
				mu.Lock()
				wanted = append(wanted, w.Fingerprint)
				mu.Unlock()
			}
		}
	}()
	logs := &testenv.LogBuffer{}
	a := &Assigner{Bus: b, Verifier: keys.Trust, Now: func() time.Time { return time.Now().UTC() }, Tick: 200 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for i := range tries {
		f := fingerprint(i)
		put(b.Holds, "hold.web."+f, bus.Hold{Module: "web", Fingerprint: f, Reason: "held before it was done", At: start})
		put(b.Builds, "build.web."+f, bus.Build{Module: "web", Fingerprint: f, State: bus.BuildDone, At: start.Add(time.Duration(i) * time.Second)})
	}
	last := fingerprint(tries)
	put(b.Builds, "build.web."+last, bus.Build{Module: "web", Fingerprint: last, State: bus.BuildDone, At: start.Add(time.Hour)})
	wait.Poll{Detail: logs}.For(t, "the last build wanted", func() bool {
		mu.Lock()
		got := append([]string(nil), wanted...)
		mu.Unlock()
		for _, f := range got {
			if f != last {
				t.Fatalf("the held build %s was wanted (wants %v)\n%s", f, got, logs)
			}
		}
		return len(got) > 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the assigner stopped with %v", err)
	}
}
