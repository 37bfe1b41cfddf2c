package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// TestTheBusAwayForThirtySeconds stops the real nats-server for 30 s under
// a running agent: the module goes on serving, and once the server is back
// the agent takes the want written then without a restart, nothing lost.
func TestTheBusAwayForThirtySeconds(t *testing.T) {
	server := testenv.NewNATS(t)
	n := newNode(t)
	n.bus = bustest.Open(t, server.URL, 1)
	n.start()
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))

	server.Stop()
	away := time.Now()
	for time.Since(away) < 30*time.Second {
		if got := n.serves(); got != "f1" {
			t.Fatalf("with the bus away the module answers %q", got)
		}
		time.Sleep(time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The client reconnects on its own; the writes wait for it.
	d2 := ""
	wait.Poll{Every: 100 * time.Millisecond}.Until(t, "the bus back", func() (bool, string) {
		digest, err := n.tryCompose("f2")
		if err != nil {
			return false, err.Error()
		}
		d2 = digest
		return true, ""
	})
	n.want("f2", d2)
	n.have("f2 running healthy after the bus came back", running("f2"))
	if got := n.serves(); got != "f2" {
		t.Fatalf("the module answers %q", got)
	}
	// The f1 have written before the bus went is still there to read:
	// JetStream kept its store through the stop.
	key, _ := bus.HaveKey("n1", "web")
	if h, err := n.bus.Haves.History(context.Background(), key); err != nil || len(h) == 0 {
		t.Fatalf("the haves' history: %v", err)
	}
}

// TestAnAgentStartedWithTheBusAway runs what its disk says at once, and
// writes its haves the moment the bus is back: its tick and its backoff
// are an hour, so only the reconnect can make that pass.
func TestAnAgentStartedWithTheBusAway(t *testing.T) {
	server := testenv.NewNATS(t)
	n := newNode(t)
	n.bus = bustest.Open(t, server.URL, 1)
	n.runThenStop("f1")
	server.Stop()

	nc, back, err := bus.Dial(server.URL, "agent n1", bus.Credential{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	n.startWith(nil, func(a *agent.Agent) {
		a.Bus, a.Back = nil, back
		a.Tick, a.Backoff = time.Hour, agent.Backoff{First: time.Hour, Most: time.Hour}
		a.Open = func(ctx context.Context) (*bus.Bus, error) {
			js, err := jetstream.New(nc)
			if err != nil {
				return nil, err
			}
			return bus.Open(ctx, js, bus.Options{})
		}
	})
	wait.Poll{Every: 50 * time.Millisecond, Detail: n.logs}.Until(t, "f1 served with the bus away", func() (bool, string) {
		got := n.serves()
		return got == "f1", fmt.Sprintf("the module answers %q", got)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n.have("f1 written again once the bus is back", running("f1"))
}
