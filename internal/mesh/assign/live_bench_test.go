package assign_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/assign"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// BenchmarkLiveAssigner is the assigner against a real JetStream server:
// 1,000 nodes of one module, every composition signed and on the bus, the
// canary's want written; it measures from the canary's healthy have to the
// other 999 wants written, and the bus operations each want cost. With 50
// modules, the 49 others are settled on every node (their builds done,
// compositions signed, wants written and haves healthy), so each pass
// decides over the whole estate of 50,000 places.
func BenchmarkLiveAssigner(b *testing.B) {
	for _, modules := range []int{1, 50} {
		b.Run(fmt.Sprintf("modules=%d", modules), func(b *testing.B) { liveAssigner(b, modules) })
	}
}

func liveAssigner(b *testing.B, modules int) {
	const nodes = 1000
	b.StopTimer()
	for range b.N {
		e := newEstate(b)
		names := make([]string, nodes)
		for i := range names {
			names[i] = fmt.Sprintf("node-%04d", i)
		}
		modKey, _ := bus.ModuleKey("web")
		e.put(e.bus.Modules, modKey, bus.Registration{Module: "web", Nodes: names, Providers: []string{}})
		grantKey, _ := bus.GrantKey("web", "f2")
		e.put(e.bus.Grants, grantKey, bus.Grant{Module: "web", Fingerprint: "f2", At: e.now})
		for _, n := range names {
			e.compose(e.signer, n, "web", "f2")
			e.have(n, "web", "f1")
		}
		for m := 1; m < modules; m++ {
			settle(e, fmt.Sprintf("mod-%02d", m), names)
		}
		a := &assign.Assigner{Bus: e.bus, Verifier: e.trust, Now: func() time.Time { return time.Now().UTC() },
			Tick: time.Minute, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		buildKey, _ := bus.BuildKey("web", "f2")
		e.put(e.bus.Builds, buildKey, bus.Build{Module: "web", Fingerprint: "f2", State: bus.BuildDone, At: e.now})
		wait.For(b, "the canary's want", func() bool { return a.Written() == 1 })
		ops, written := e.bus.Ops(), a.Written()
		b.StartTimer()
		start := time.Now()
		e.have(names[0], "web", "f2")
		for a.Written() < nodes {
			time.Sleep(time.Millisecond)
			if time.Since(start) > time.Minute {
				b.Fatalf("%d wants written in a minute", a.Written())
			}
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(took.Seconds(), "s/rollout")
		b.ReportMetric(float64(e.bus.Ops()-ops)/float64(a.Written()-written), "ops/want")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// settle registers module on nodes at f1 with everything the rules ask
// done, and each node's want of it written and its have healthy.
func settle(e *estate, module string, nodes []string) {
	k, _ := bus.ModuleKey(module)
	e.put(e.bus.Modules, k, bus.Registration{Module: module, Nodes: nodes, Providers: []string{}})
	k, _ = bus.GrantKey(module, "f1")
	e.put(e.bus.Grants, k, bus.Grant{Module: module, Fingerprint: "f1", At: e.now})
	k, _ = bus.BuildKey(module, "f1")
	e.put(e.bus.Builds, k, bus.Build{Module: module, Fingerprint: "f1", State: bus.BuildDone, At: e.now})
	for _, n := range nodes {
		digest := e.compose(e.signer, n, module, "f1")
		e.have(n, module, "f1")
		k, _ = bus.WantKey(n, module)
		e.put(e.bus.Wants, k, bus.Want{Fingerprint: "f1", Digest: digest, Owner: bus.OwnerRules, At: e.now})
	}
}
