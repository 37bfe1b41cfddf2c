package watchman_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/watchman"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestOwed(t *testing.T) {
	now := t0.Add(time.Hour)
	w := func(fp string, ago time.Duration) bus.Want {
		return bus.Want{Fingerprint: fp, Digest: bus.Digest([]byte(fp)), Owner: bus.OwnerRules, At: now.Add(-ago)}
	}
	h := func(fp string, phase bus.Phase) bus.Have {
		return bus.Have{Fingerprint: fp, Digest: bus.Digest([]byte(fp)), Phase: phase, Health: bus.Unknown, At: t0}
	}
	cases := []struct {
		name    string
		want    bus.Want
		have    *bus.Have
		owed    bool
		stalled bool
	}{
		{"no have, wanted a minute ago", w("f2", time.Minute), nil, true, false},
		{"no have, wanted eleven minutes ago", w("f2", 11*time.Minute), nil, true, true},
		{"the fingerprint before, wanted long ago", w("f2", time.Hour), &bus.Have{Fingerprint: "f1", Phase: bus.PhaseRunning}, true, true},
		// Only the want proven answers it: running healthy.
		{"the fingerprint, failed", w("f2", time.Hour), new(h("f2", bus.PhaseFailed)), true, true},
		{"the fingerprint, applying a minute", w("f2", time.Minute), new(h("f2", bus.PhaseApplying)), true, false},
		{"the fingerprint running healthy", w("f2", time.Hour), &bus.Have{Fingerprint: "f2", Phase: bus.PhaseRunning, Health: bus.Healthy}, false, false},
		{"the fingerprint running unhealthy", w("f2", time.Hour), &bus.Have{Fingerprint: "f2", Phase: bus.PhaseRunning, Health: bus.Unhealthy}, true, true},
		{"exactly STALL_AFTER", w("f2", watchman.DefaultStallAfter), nil, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			place := bus.Place{Node: "n1", Module: "web"}
			haves := map[bus.Place]bus.Have{}
			if c.have != nil {
				haves[place] = *c.have
			}
			got := watchman.Owed(map[bus.Place]bus.Want{place: c.want}, haves, now, watchman.DefaultStallAfter)
			if (len(got) == 1) != c.owed || (c.owed && got[0].Stalled != c.stalled) {
				t.Fatalf("%+v, want owed %v stalled %v", got, c.owed, c.stalled)
			}
		})
	}
}

// TestAStallIsPublishedOnceAndCounted: a node that does not move is said once
// on mesh.events.stall and counted; once it answers, the gauge reads 0.
func TestAStallIsPublishedOnceAndCounted(t *testing.T) {
	url := bustest.Embedded(t)
	b := bustest.Open(t, url, 1)
	nc, _ := bustest.Connect(t, url)
	ctx := context.Background()
	logs := &testenv.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	teller, err := dedup.Open(ctx, b.JS, 1, logger)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := watchman.New(b, teller, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	w.Now = func() time.Time { return now }
	sub, err := nc.SubscribeSync("mesh.events.stall")
	if err != nil {
		t.Fatal(err)
	}
	put := func(kv interface {
		Put(context.Context, string, []byte) (uint64, error)
	}, key string, doc any) {
		if _, err := kv.Put(ctx, key, bus.Encode(doc)); err != nil {
			t.Fatal(err)
		}
	}
	wantN1, _ := bus.WantKey("n1", "web")
	wantN2, _ := bus.WantKey("n2", "web")
	haveN2, _ := bus.HaveKey("n2", "web")
	digest := bus.Digest([]byte("f2"))
	put(b.Wants, wantN1, bus.Want{Fingerprint: "f2", Digest: digest, Owner: bus.OwnerRules, At: t0})
	put(b.Wants, wantN2, bus.Want{Fingerprint: "f2", Digest: digest, Owner: bus.OwnerRules, At: now})
	put(b.Haves, haveN2, bus.Have{Fingerprint: "f1", Digest: bus.Digest([]byte("f1")), Phase: bus.PhaseRunning, Health: bus.Healthy, At: t0})

	stalls, err := w.Pass(ctx)
	if err != nil || len(stalls) != 1 || stalls[0].Node != "n1" {
		t.Fatalf("stalls %+v, %v", stalls, err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no stall on the bus: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mesh_pulses_owed Wants a node's agent has not answered with a have of their fingerprint, by node.
# TYPE mesh_pulses_owed gauge
mesh_pulses_owed{node="n1"} 1
mesh_pulses_owed{node="n2"} 1
# HELP mesh_stalls Wants unanswered for longer than STALL_AFTER, by node.
# TYPE mesh_stalls gauge
mesh_stalls{node="n1"} 1
mesh_stalls{node="n2"} 0
`)); err != nil {
		t.Fatal(err)
	}
	// A second pass, and a restarted watchman, say it no more.
	if stalls, err := w.Pass(ctx); err != nil || len(stalls) != 0 {
		t.Fatalf("said again: %+v, %v", stalls, err)
	}
	again, err := watchman.New(b, teller, prometheus.NewRegistry(), logger)
	if err != nil {
		t.Fatal(err)
	}
	again.Now = w.Now
	if stalls, err := again.Pass(ctx); err != nil || len(stalls) != 0 {
		t.Fatalf("the restarted watchman said again: %+v, %v", stalls, err)
	}
	// n1 answers: nothing owed there any more.
	haveN1, _ := bus.HaveKey("n1", "web")
	put(b.Haves, haveN1, bus.Have{Fingerprint: "f2", Digest: digest, Phase: bus.PhaseRunning, Health: bus.Healthy, At: now})
	if _, err := w.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mesh_pulses_owed Wants a node's agent has not answered with a have of their fingerprint, by node.
# TYPE mesh_pulses_owed gauge
mesh_pulses_owed{node="n2"} 1
# HELP mesh_stalls Wants unanswered for longer than STALL_AFTER, by node.
# TYPE mesh_stalls gauge
mesh_stalls{node="n2"} 0
`)); err != nil {
		t.Fatalf("after n1 answered: %v", err)
	}
	if strings.Count(logs.String(), `"msg":"mesh event"`) != 1 {
		t.Fatalf("the stall was logged other than once:\n%s", logs)
	}
}
