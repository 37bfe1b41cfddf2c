package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants/grantstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestTheAssignerCannotForgeAPut runs the agent on its own credential on
// the built nats-server in operator mode. The assigner's credential writes
// a want of an older composition that says it is a put's: allowed, since
// the assigner writes wants, but it may not write the seal that would make
// it one, so the agent holds the want to the rules and refuses to go back.
// The operator's own put, sealed, sends the node back.
func TestTheAssignerCannotForgeAPut(t *testing.T) {
	s := grantstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func(part grants.Part, node string) *bus.Bus {
		t.Helper()
		nc, err := s.Connect(part, node)
		if err != nil {
			t.Fatalf("%s connects: %v", part, err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bus.Open(ctx, js, bus.Options{})
		if err != nil {
			t.Fatalf("%s opens the bus: %v", part, err)
		}
		return b
	}
	keys, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	operator := open("", "")
	n := &node{t: t, bus: operator, signer: keys.Signer, trust: keys.Trust, root: t.TempDir(), addr: addr, logs: &testenv.LogBuffer{}}
	assigner := open(grants.Assigner, "")
	// The operator composes first: it makes composed-n1, which the agent's
	// credential may only bind.
	d1, _ := n.compose(n.signer, "f1", nil)
	d2, _ := n.compose(n.signer, "f2", nil)
	own := open(grants.Agent, "n1")
	n.start(func(a *agent.Agent) { a.Bus = own })
	key, _ := bus.WantKey("n1", "web")
	if _, err := assigner.Wants.Put(ctx, key, bus.Encode(bus.Want{Fingerprint: "f2", Digest: d2, Owner: bus.OwnerRules, At: time.Now().UTC()})); err != nil {
		t.Fatalf("the assigner writes a want: %v", err)
	}
	n.have("f2 running healthy", running("f2"))

	forged := bus.Want{Fingerprint: "f1", Digest: d1, Owner: bus.PutOwner("ops"), At: time.Now().UTC()}
	sealKey, _ := bus.SealKey("n1", "web")
	// The server refuses at once but says so apart from the write, which
	// then waits out its context: keep that short.
	short, stop := context.WithTimeout(ctx, time.Second)
	_, err = assigner.Seals.Put(short, sealKey, bus.Encode(forged))
	stop()
	if err == nil {
		t.Fatal("the assigner's credential wrote a seal")
	}
	short, stop = context.WithTimeout(ctx, time.Second)
	err = assigner.SealWant(short, "n1", "web", forged)
	stop()
	if err == nil {
		t.Fatal("the assigner's credential sealed a want")
	}
	if seal, _, err := operator.ReadSeal(ctx, "n1", "web"); err != nil || seal != nil {
		t.Fatalf("a seal is there: %+v, %v", seal, err)
	}
	if _, err := assigner.Wants.Put(ctx, key, bus.Encode(forged)); err != nil {
		t.Fatalf("the assigner writes the want: %v", err)
	}
	h := n.have("the forged put refused", func(h bus.Have) bool { return h.Phase == bus.PhaseRefused })
	if h.Fingerprint != "f2" || !strings.Contains(h.Reason, "older than the one that runs") || n.serves() != "f2" {
		t.Fatalf("have %+v, serving %q", h, n.serves())
	}

	// The operator's put of the same composition is sealed, and sends it back.
	if err := operator.SealWant(ctx, "n1", "web", bus.Want{Fingerprint: "f1", Digest: d1, Owner: bus.PutOwner("ops"), At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	n.have("f1 running healthy under the operator's put", running("f1"))
	if got := n.serves(); got != "f1" {
		t.Fatalf("the module answers %q", got)
	}
}
