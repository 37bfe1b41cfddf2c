package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
)

// BenchmarkDeliveredAcross50Agents is the whole delivery on one machine:
// 50 node agents on an embedded bus, each running the module (the test
// binary, an HTTP server), the assigner and the view. Each iteration is a
// new build: from its build done to the revision delivered on all 50, and
// from the canary's healthy have to delivered.
func BenchmarkDeliveredAcross50Agents(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	ctx := context.Background()
	s := Story{Out: io.Discard, Logs: io.Discard, Module: []string{self}, ModuleEnv: map[string]string{"MESH_DEMO_MODULE": "1"},
		Dir: b.TempDir(), StuckAfter: time.Hour, Nodes: names}
	w, stop, err := s.setUp(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	reg, _ := bus.ModuleKey(module)
	if err := w.put(ctx, w.bus.Modules, reg, bus.Registration{Module: module, Nodes: names, Providers: []string{}}); err != nil {
		b.Fatal(err)
	}
	for _, n := range names {
		key, _ := bus.HaveKey(n, module)
		if err := waitFor(ctx, n+" online", func() bool { _, err := w.bus.Haves.Get(ctx, key); return err == nil }); err != nil {
			b.Fatal(err)
		}
	}
	var fromBuild, fromCanary time.Duration
	for i := range b.N {
		fp, revision := fmt.Sprintf("f%d", i+1), fmt.Sprintf("rev-%d", i+1)
		start := time.Now()
		if err := w.build(ctx, revision, fp, true); err != nil {
			b.Fatal(err)
		}
		canaryAt, err := w.waitHave(ctx, names[0], fp, true)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.waitView(ctx, revision+" delivered", func(p view.Picture) bool { return p.Revision == revision && p.Delivered }); err != nil {
			b.Fatal(err)
		}
		fromBuild += time.Since(start)
		fromCanary += time.Since(canaryAt)
	}
	b.ReportMetric(fromBuild.Seconds()/float64(b.N), "s/delivered")
	b.ReportMetric(fromCanary.Seconds()/float64(b.N), "s/after-canary")
}
