package assign_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/assign"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func openBus(t testing.TB) *bus.Bus { return bustest.Open(t, bustest.Embedded(t), 1) }

// estate is a bus, a signing key and a trust of it.
type estate struct {
	t      testing.TB
	bus    *bus.Bus
	signer *composition.Signer
	trust  *composition.Trust
	now    time.Time
}

func newEstate(t testing.TB) *estate {
	keys, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return &estate{t: t, bus: openBus(t), signer: keys.Signer, trust: keys.Trust, now: time.Now().UTC()}
}

func (e *estate) put(store jetstream.KeyValue, key string, doc any) {
	e.t.Helper()
	raw, ok := doc.([]byte)
	if !ok {
		raw = bus.Encode(doc)
	}
	if _, err := store.Put(context.Background(), key, raw); err != nil {
		e.t.Fatal(err)
	}
}

func (e *estate) compose(signer *composition.Signer, node, module, fingerprint string) string {
	e.t.Helper()
	doc := composition.Document{Module: module, Fingerprint: fingerprint, Node: node, Files: map[string]composition.File{},
		Command: composition.Command{Argv: []string{"bin/" + module}},
		Health:  composition.Health{HTTP: "http://127.0.0.1:8080/healthz", Interval: composition.Duration(time.Second), Timeout: composition.Duration(time.Second)}}
	envelope, err := composition.Sign(context.Background(), signer, doc)
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := e.bus.WriteComposition(context.Background(), node, module, fingerprint, envelope)
	if err != nil {
		e.t.Fatal(err)
	}
	return entry.Digest
}

func (e *estate) have(node, module, fingerprint string) {
	e.t.Helper()
	key, _ := bus.HaveKey(node, module)
	e.put(e.bus.Haves, key, bus.Have{Fingerprint: fingerprint, Phase: bus.PhaseRunning, Health: bus.Healthy, At: time.Now().UTC()})
}

func (e *estate) want(node, module string) (bus.Want, bool) {
	key, _ := bus.WantKey(node, module)
	got, err := e.bus.Wants.Get(context.Background(), key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return bus.Want{}, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := bus.DecodeWant(got.Value())
	if err != nil {
		e.t.Fatal(err)
	}
	return w, true
}

func (e *estate) start(logs *testenv.LogBuffer) (*assign.Assigner, func()) {
	a := &assign.Assigner{Bus: e.bus, Verifier: e.trust, Now: func() time.Time { return time.Now().UTC() },
		Tick: 200 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("the assigner stopped with %v", err)
		}
	}
}

func TestAssignerCanaryFirstThenTheOthersAndAPutStays(t *testing.T) {
	e := newEstate(t)
	nodes := []string{"n1", "n2", "n3"}
	modKey, _ := bus.ModuleKey("web")
	e.put(e.bus.Modules, modKey, bus.Registration{Module: "web", Nodes: nodes, Providers: []string{}})
	grantKey, _ := bus.GrantKey("web", "f2")
	e.put(e.bus.Grants, grantKey, bus.Grant{Module: "web", Fingerprint: "f2", At: e.now})
	digests := map[string]string{}
	for _, n := range nodes {
		digests[n] = e.compose(e.signer, n, "web", "f2")
		e.have(n, "web", "f1")
	}
	put := bus.Want{Fingerprint: "f1", Digest: bus.Digest([]byte("f1 on n3")), Owner: bus.PutOwner("op"), At: e.now}
	putKey, _ := bus.WantKey("n3", "web")
	e.put(e.bus.Wants, putKey, put)
	// Bad input on every side, each logged and skipped.
	badBuild, _ := bus.BuildKey("web", "f9")
	e.put(e.bus.Builds, badBuild, []byte(`{"module":"web"`))
	strayBuild, _ := bus.BuildKey("nobody", "f1")
	e.put(e.bus.Builds, strayBuild, bus.Build{Module: "nobody", Fingerprint: "f1", State: bus.BuildDone, At: e.now})
	mismatched, _ := bus.BuildKey("web", "f8")
	e.put(e.bus.Builds, mismatched, bus.Build{Module: "web", Fingerprint: "f7", State: bus.BuildDone, At: e.now})
	badModule, _ := bus.ModuleKey("db")
	e.put(e.bus.Modules, badModule, []byte(`{"module":"db","nodes":[]}`))

	logs := &testenv.LogBuffer{}
	a, stop := e.start(logs)
	defer stop()
	wait.For(t, "the bad documents logged", func() bool {
		s := logs.String()
		return strings.Count(s, "skipped a document") >= 4 && strings.Contains(s, `unknown module \"nobody\"`)
	})
	if _, ok := e.want("n1", "web"); ok {
		t.Fatal("a want written with no build done")
	}

	buildKey, _ := bus.BuildKey("web", "f2")
	e.put(e.bus.Builds, buildKey, bus.Build{Module: "web", Fingerprint: "f2", State: bus.BuildDone, At: e.now})
	wait.For(t, "the canary's want", func() bool {
		w, ok := e.want("n1", "web")
		return ok && w.Fingerprint == "f2" && w.Digest == digests["n1"] && w.Owner == bus.OwnerRules
	})
	if _, ok := e.want("n2", "web"); ok {
		t.Fatal("n2 wanted before the canary ran the build healthy")
	}

	ops, written := e.bus.Ops(), a.Written()
	e.have("n1", "web", "f2")
	wait.For(t, "n2's want once the canary is healthy", func() bool {
		w, ok := e.want("n2", "web")
		return ok && w.Fingerprint == "f2" && w.Digest == digests["n2"]
	})
	if got, _ := e.want("n3", "web"); !got.Same(put) {
		t.Fatalf("the put on n3 was written over: %+v", got)
	}
	// One write, and the holds read again before it.
	if n := a.Written() - written; n != 1 || e.bus.Ops()-ops != 2 {
		t.Fatalf("%d wants in %d operations, want one want in two", n, e.bus.Ops()-ops)
	}

	// A composition the trusted key did not sign is never wanted.
	other, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	grant3, _ := bus.GrantKey("web", "f3")
	e.put(e.bus.Grants, grant3, bus.Grant{Module: "web", Fingerprint: "f3", At: e.now})
	e.compose(other.Signer, "n1", "web", "f3")
	build3, _ := bus.BuildKey("web", "f3")
	e.put(e.bus.Builds, build3, bus.Build{Module: "web", Fingerprint: "f3", State: bus.BuildDone, At: e.now.Add(time.Second)})
	// A second module's want, written after the above, marks a pass that
	// read them all.
	apiKey, _ := bus.ModuleKey("api")
	e.put(e.bus.Modules, apiKey, bus.Registration{Module: "api", Nodes: []string{"n1"}, Providers: []string{}})
	apiGrant, _ := bus.GrantKey("api", "a1")
	e.put(e.bus.Grants, apiGrant, bus.Grant{Module: "api", Fingerprint: "a1", At: e.now})
	e.compose(e.signer, "n1", "api", "a1")
	apiBuild, _ := bus.BuildKey("api", "a1")
	e.put(e.bus.Builds, apiBuild, bus.Build{Module: "api", Fingerprint: "a1", State: bus.BuildDone, At: e.now})
	wait.For(t, "the marking want", func() bool {
		w, ok := e.want("n1", "api")
		return ok && w.Fingerprint == "a1"
	})
	if !strings.Contains(logs.String(), composition.ErrUnverified.Error()) {
		t.Fatalf("the unsigned composition was not logged:\n%s", logs.String())
	}
	if w, _ := e.want("n1", "web"); w.Fingerprint != "f2" {
		t.Fatalf("the canary wants %+v: a composition no trusted key signed was wanted", w)
	}
}
