package view_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/watchman"
)

// BenchmarkViewAt1000NodesBy50Modules is the view and the watchman over
// 1,000 nodes × 50 modules on an embedded bus, every place settled but
// one: how long they take to catch up from a cold start (every settled
// event said), the share of a core the whole process uses at rest over
// two of their default ticks, and from the last have written to the
// revision delivered.
func BenchmarkViewAt1000NodesBy50Modules(b *testing.B) {
	const nodes, modules = 1000, 50
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := bustest.Embedded(b)
	nc, js := bustest.Connect(b, url)
	bs := bustest.Open(b, url, 1)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	v, err := view.Open(ctx, js, bs, 1, logger)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	digest := bus.Digest([]byte("composition"))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	src := view.Source{Revision: "rev-1", Modules: map[string]string{}, At: now}
	type put struct {
		kv  jetstream.KeyValue
		key string
		raw []byte
	}
	var puts []put
	for m := range modules {
		module := fmt.Sprintf("m%02d", m)
		src.Modules[module] = "f1"
		key, _ := bus.ModuleKey(module)
		puts = append(puts, put{bs.Modules, key, bus.Encode(bus.Registration{Module: module, Nodes: names, Providers: []string{}})})
		for _, n := range names {
			wk, _ := bus.WantKey(n, module)
			puts = append(puts, put{bs.Wants, wk, bus.Encode(bus.Want{Fingerprint: "f1", Digest: digest, Owner: bus.OwnerRules, At: now})})
			if m == modules-1 && n == names[nodes-1] {
				continue // the last have, written once the view is at rest
			}
			hk, _ := bus.HaveKey(n, module)
			puts = append(puts, put{bs.Haves, hk, bus.Encode(bus.Have{Fingerprint: "f1", Digest: digest, Phase: bus.PhaseRunning, Health: bus.Healthy, Since: now, At: now})})
		}
	}
	jobs := make(chan put)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for p := range jobs {
				if _, err := p.kv.Put(ctx, p.key, p.raw); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, p := range puts {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	if err := view.WriteSource(ctx, v.Sources, src); err != nil {
		b.Fatal(err)
	}
	delivered, err := nc.SubscribeSync("mesh.events.delivered")
	if err != nil {
		b.Fatal(err)
	}
	teller, err := dedup.Open(ctx, js, 1, logger)
	if err != nil {
		b.Fatal(err)
	}
	guard, err := watchman.New(bs, teller, prometheus.NewRegistry(), logger)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		go func() { _ = v.Run(ctx, 15*time.Second) }()
		go func() { _ = guard.Run(ctx, 15*time.Second) }()
		events, err := js.Stream(ctx, dedup.EventsStream)
		if err != nil {
			b.Fatal(err)
		}
		for {
			info, err := events.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if info.State.Msgs >= nodes*modules {
				break // every settled place said, and the one moving
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d events said in 10 minutes", info.State.Msgs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/caught-up")

		before, at := cpu(), time.Now()
		time.Sleep(30 * time.Second) // two ticks at rest: the share of a core is the figure
		b.ReportMetric(100*(cpu()-before).Seconds()/time.Since(at).Seconds(), "%core-at-rest")

		hk, _ := bus.HaveKey(names[nodes-1], fmt.Sprintf("m%02d", modules-1))
		last := time.Now()
		if _, err := bs.Haves.Put(ctx, hk, bus.Encode(bus.Have{Fingerprint: "f1", Digest: digest, Phase: bus.PhaseRunning, Health: bus.Healthy, Since: last, At: last})); err != nil {
			b.Fatal(err)
		}
		if _, err := delivered.NextMsg(5 * time.Minute); err != nil {
			b.Fatalf("not delivered: %v", err)
		}
		b.ReportMetric(time.Since(last).Seconds(), "s/last-have-to-delivered")
	}
}

// cpu is the CPU time the process has used, user and system.
func cpu() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
