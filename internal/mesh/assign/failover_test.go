package assign_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// wantWrites counts every write of each want key a watch of its own sees,
// so a want written twice shows as two.
type wantWrites struct {
	mu      sync.Mutex
	puts    map[string]int
	deletes int
}

func (w *wantWrites) counts() (keys, most, deletes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.puts {
		most = max(most, n)
	}
	return len(w.puts), most, w.deletes
}

// TestALeaderStoppedMidWritesLosesNoWantAndWritesNoneTwice runs the
// assigner on a three-peer JetStream cluster, its buckets in three
// replicas, and stops the peer leading the wants' stream once a fifth of
// 500 wants are written: every want is written once all the same, none
// twice, none lost.
func TestALeaderStoppedMidWritesLosesNoWantAndWritesNoneTwice(t *testing.T) {
	c := testenv.NewNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := bustest.Open(t, c.URLs(), 3)
	e := newEstate(t)
	e.bus = b
	const nodes, modules = 20, 25
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	for m := range modules {
		module := fmt.Sprintf("m%02d", m)
		k, _ := bus.ModuleKey(module)
		e.put(b.Modules, k, bus.Registration{Module: module, Nodes: names, Providers: []string{}})
		k, _ = bus.GrantKey(module, "f1")
		e.put(b.Grants, k, bus.Grant{Module: module, Fingerprint: "f1", At: e.now})
		for _, n := range names {
			e.compose(e.signer, n, module, "f1")
		}
		// The canary, n00, runs f1 healthy: every node may have it.
		e.have(names[0], module, "f1")
	}

	// The test's own watch of the wants, on a connection of its own.
	seen := &wantWrites{puts: map[string]int{}}
	_, js := bustest.Connect(t, c.URLs())
	watch, err := js.KeyValue(ctx, bus.WantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := watch.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	go func() {
		for entry := range w.Updates() {
			if entry == nil {
				continue
			}
			seen.mu.Lock()
			if entry.Operation() == jetstream.KeyValuePut {
				seen.puts[entry.Key()]++
			} else {
				seen.deletes++
			}
			seen.mu.Unlock()
		}
	}()

	logs := &testenv.LogBuffer{}
	_, stop := e.start(logs)
	defer stop()
	for m := range modules {
		module := fmt.Sprintf("m%02d", m)
		k, _ := bus.BuildKey(module, "f1")
		e.put(b.Builds, k, bus.Build{Module: module, Fingerprint: "f1", State: bus.BuildDone, At: e.now})
	}
	waitWants(t, seen, nodes*modules/5, logs)
	stream, err := b.JS.Stream(ctx, "KV_"+bus.WantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("the wants' stream leader: %+v %v", info, err)
	}
	leader := c.Peer(info.Cluster.Leader)
	if leader == nil {
		t.Fatalf("no peer %q", info.Cluster.Leader)
	}
	leader.Stop()
	t.Logf("stopped %s, the wants' leader, after %d wants", info.Cluster.Leader, func() int { k, _, _ := seen.counts(); return k }())

	waitWants(t, seen, nodes*modules, logs)
	keys, most, deletes := seen.counts()
	if keys != nodes*modules || most != 1 || deletes != 0 {
		t.Fatalf("%d wants, the most writes of one %d, %d deletes: want %d, 1, 0", keys, most, deletes, nodes*modules)
	}
	for _, n := range names {
		for m := range modules {
			if got, ok := e.want(n, fmt.Sprintf("m%02d", m)); !ok || got.Fingerprint != "f1" || got.Owner != bus.OwnerRules {
				t.Fatalf("%s wants %+v (%v)", n, got, ok)
			}
		}
	}
}

// waitWants waits until the watch has seen n wants.
func waitWants(t *testing.T, seen *wantWrites, n int, logs *testenv.LogBuffer) {
	t.Helper()
	wait.Poll{Within: 2 * time.Minute, Detail: logs}.Until(t, fmt.Sprintf("%d wants", n), func() (bool, string) {
		keys, _, _ := seen.counts()
		return keys >= n, fmt.Sprintf("%d wants", keys)
	})
}
