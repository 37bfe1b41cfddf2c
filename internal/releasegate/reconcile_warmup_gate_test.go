package releasegate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// warmerFunc is a Warmer made of a function.
type warmerFunc func(ctx context.Context, hosts, paths []string) (owntraffic.Warmup, error)

func (f warmerFunc) Warm(ctx context.Context, hosts, paths []string) (owntraffic.Warmup, error) {
	return f(ctx, hosts, paths)
}

// A warmup runs beside the rounds: a round starts it and goes on without
// waiting, so a slow warmup holds up no other Application, and a later round
// writes its verdict. A warmup still running is not started twice.
func TestWarmupsRunBesideTheRounds(t *testing.T) {
	cp := testenv.Own(t)
	kube, err := releasegate.NewKube(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	nsA, nsC := cp.Namespace(t), cp.Namespace(t)
	serving := &app{ns: nsA, name: "docs",
		members: []member{{process: "docs", phase: "Succeeded", applied: "d-1", promoted: "d-1", image: "docs:1", primaryImage: "docs:1",
			hosts: `["docs.example.com"]`, paths: `["/"]`}}}
	proven := &app{ns: nsC, name: "shop", migration: true, testedAgainst: prevRev,
		members: []member{{process: "shop-api", phase: "Waiting", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
		jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
		record:  &release.Record{Namespace: nsC, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
	serving.apply(t, cp)
	proven.apply(t, cp)

	var warmups atomic.Int32
	release := make(chan struct{})
	warmer := warmerFunc(func(ctx context.Context, _, _ []string) (owntraffic.Warmup, error) {
		warmups.Add(1)
		<-release
		return owntraffic.Warmup{Requests: 1}, nil
	})
	cluster := &failingRecordWrite{Kube: kube}
	reconciler, logs := loggedReconciler(cluster, warmer)
	var prompted atomic.Int32
	reconciler.OnWarmupDone(func() { prompted.Add(1) })
	finished := make(chan error, 1)
	go func() { finished <- reconciler.Round(context.Background()) }()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatalf("round: %v\n%s", err, logs)
		}
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatalf("the round waited on a warmup\n%s", logs)
	}
	if suspended(t, cp, nsC, "shop-migration-"+tag) {
		t.Fatalf("the round waited on a warmup before starting a migration\n%s", logs)
	}
	round(t, reconciler, logs)
	close(release)
	reconciler.WaitWarmups()
	if n := warmups.Load(); n != 1 || prompted.Load() != 1 {
		t.Fatalf("%d warmups, %d prompts: one of each wanted", n, prompted.Load())
	}
	if rec, _ := readRecord(t, cp, nsA, "docs"); rec.Warmup != nil && rec.Warmup.Revision == rev {
		t.Fatalf("a verdict was written before a round took it: %+v", rec.Warmup)
	}
	// The write that would carry the verdict fails: the verdict waits for
	// the next round, and the revision is not warmed again.
	cluster.failNext.Store(true)
	round(t, reconciler, logs)
	if w := logEntries(t, logs.String(), nsA, "warmup"); len(w) != 0 {
		t.Errorf("a verdict whose write failed was logged as recorded: %v", w)
	}
	round(t, reconciler, logs)
	reconciler.WaitWarmups()
	if rec, _ := readRecord(t, cp, nsA, "docs"); rec.Warmup == nil || rec.Warmup.Revision != rev || !rec.Warmup.Warmed {
		t.Fatalf("the next round did not write the verdict: %+v\n%s", rec.Warmup, logs)
	}
	if n := warmups.Load(); n != 1 {
		t.Errorf("the revision was warmed %d times", n)
	}
	if w := logEntries(t, logs.String(), nsA, "warmup"); len(w) != 1 {
		t.Errorf("warmup log lines: %v", w)
	}
}

// failingRecordWrite is the gate's cluster with the next record update
// failing when failNext is set, as an API server that refused it would.
type failingRecordWrite struct {
	*releasegate.Kube
	failNext atomic.Bool
}

func (f *failingRecordWrite) UpdateRecord(ctx context.Context, namespace, name, resourceVersion string, data map[string]string) error {
	if f.failNext.CompareAndSwap(true, false) {
		return errors.New("the API server refused the write")
	}
	return f.Kube.UpdateRecord(ctx, namespace, name, resourceVersion, data)
}

// A warmup that ends while another release is pinned keeps its verdict for
// as long as what serves is not warmed on record: when the pin comes back
// (the other release failed and was reverted), the verdict is written, and
// the revision is warmed once.
func TestAWarmupVerdictWaitsForThePinToComeBack(t *testing.T) {
	var warmups atomic.Int32
	release := make(chan struct{})
	cp := testenv.Own(t)
	kube, err := releasegate.NewKube(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	reconciler, logs := loggedReconciler(kube, warmerFunc(func(context.Context, []string, []string) (owntraffic.Warmup, error) {
		warmups.Add(1)
		<-release
		return owntraffic.Warmup{Requests: 1}, nil
	}))
	ns := cp.Namespace(t)
	docs := &app{ns: ns, name: "docs",
		members: []member{{process: "docs", phase: "Succeeded", applied: "d-1", promoted: "d-1", image: "docs:1", primaryImage: "docs:1",
			hosts: `["docs.example.com"]`, paths: `["/"]`}}}
	docs.apply(t, cp)
	round(t, reconciler, logs) // rev serves; its warmup starts

	m := docs.member("docs")
	m.canaryRev, m.phase, m.applied, m.image = prevRev, "Progressing", "d-2", "docs:2"
	docs.apply(t, cp)
	round(t, reconciler, logs) // another release pinned, in analysis
	close(release)
	reconciler.WaitWarmups()
	round(t, reconciler, logs) // the verdict ended while it was pinned

	m.canaryRev, m.phase, m.applied, m.image = "", "Succeeded", "d-1", "docs:1"
	docs.apply(t, cp)
	round(t, reconciler, logs)
	reconciler.WaitWarmups()
	if rec, _ := readRecord(t, cp, ns, "docs"); rec.Serving != rev || rec.Warmup == nil || rec.Warmup.Revision != rev || !rec.Warmup.Warmed {
		t.Fatalf("record %+v %+v\n%s", rec, rec.Warmup, logs)
	}
	if n := warmups.Load(); n != 1 {
		t.Fatalf("the revision was warmed %d times", n)
	}
}
