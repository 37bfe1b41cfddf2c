package grants_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants/grantstest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
)

// operatorBus is the built nats-server in operator mode with a full
// resolver, as the mesh runs it: the mesh account, the system account, and
// nothing else trusted.
type operatorBus struct {
	url  string
	auth grants.Authority
	dir  string
}

func startOperatorBus(t *testing.T) operatorBus {
	t.Helper()
	s := grantstest.Start(t)
	return operatorBus{url: s.URL, auth: s.Auth, dir: t.TempDir()}
}

// client is one connection on its own user, with the permission errors the
// server sent it.
type client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	user string

	mu     sync.Mutex
	denied []string
}

func (c *client) violations() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.denied, "; ")
}

// connect dials as a new user made by issue from its public key.
func (b operatorBus) connect(t *testing.T, name, inbox string, issue func(user string) (string, error)) (*client, error) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	userJWT, err := issue(pub)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := grants.Creds(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(b.dir, name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &client{user: pub}
	opts := []nats.Option{nats.UserCredentials(path), nats.NoReconnect(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c.mu.Lock()
		c.denied = append(c.denied, err.Error())
		c.mu.Unlock()
	})}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(b.url, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	c.nc = nc
	return c, nil
}

func (b operatorBus) part(t *testing.T, p grants.Part, node string) *client {
	t.Helper()
	perms, err := grants.For(p, node)
	if err != nil {
		t.Fatal(err)
	}
	inbox, _ := grants.InboxPrefix(p, node)
	c, err := b.connect(t, string(p)+node, inbox, func(user string) (string, error) {
		return b.auth.UserJWT(string(p)+" "+node, user, perms)
	})
	if err != nil {
		t.Fatalf("%s %s connects: %v", p, node, err)
	}
	return c
}

// deniedTo runs op, which the server is to refuse, and asks that it failed
// and that the server said the subject was not the user's.
func deniedTo(t *testing.T, c *client, what, subject string, op func(ctx context.Context) error) {
	t.Helper()
	// The server refuses at once but says so apart from the request, which
	// then waits out its context: keep that short.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := op(ctx); err == nil {
		t.Errorf("%s: allowed", what)
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(c.violations(), subject) {
		if time.Now().After(deadline) {
			t.Errorf("%s: no permissions violation naming %s, only %q", what, subject, c.violations())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPermissionsOnOperatorModeServer(t *testing.T) {
	b := startOperatorBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := []string{"n1", "n2"}

	op, err := b.connect(t, "operator", "", b.auth.OperatorUserJWT)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := bus.Open(ctx, op.js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		key, _ := bus.WantKey(n, "web")
		if _, err := mesh.Wants.Put(ctx, key, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := mesh.WriteComposition(ctx, n, "web", "f1", []byte("envelope of "+n)); err != nil {
			t.Fatal(err)
		}
	}

	agent := b.part(t, grants.Agent, "n1")
	wants, err := agent.js.KeyValue(ctx, bus.WantsBucket)
	if err != nil {
		t.Fatalf("the agent binds the wants: %v", err)
	}
	if _, err := wants.Get(ctx, "want.n1.web"); err != nil {
		t.Errorf("the agent reads its own want: %v", err)
	}
	w, err := wants.Watch(ctx, "want.n1.>")
	if err != nil {
		t.Fatalf("the agent watches its own wants: %v", err)
	}
	if e := <-w.Updates(); e == nil || e.Key() != "want.n1.web" {
		t.Errorf("the agent's watch gave %v, want want.n1.web", e)
	}
	_ = w.Stop()
	mine, err := bus.NodeKeys(bus.KindWant, "n1")
	if err != nil {
		t.Fatal(err)
	}
	places, err := bus.ReadPlacesOf(ctx, wants, mine, bus.KindWant, func(raw []byte) ([]byte, error) { return raw, nil }, func(string, error) {})
	if err != nil || len(places) != 1 || places[bus.Place{Node: "n1", Module: "web"}] == nil {
		t.Errorf("the agent reads its wants as its passes do: %v, %v", places, err)
	}
	own, err := agent.js.KeyValue(ctx, "composed-n1")
	if err != nil {
		t.Fatalf("the agent binds its own compositions: %v", err)
	}
	if _, err := own.Get(ctx, "composition.web.f1"); err != nil {
		t.Errorf("the agent reads its own composition: %v", err)
	}
	haves, err := agent.js.KeyValue(ctx, bus.HavesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := haves.Put(ctx, "have.n1.web", []byte(`{}`)); err != nil {
		t.Errorf("the agent writes its own have: %v", err)
	}
	deniedTo(t, agent, "node n1 binds composed-n2", "$JS.API.STREAM.INFO.KV_composed-n2", func(ctx context.Context) error {
		_, err := agent.js.KeyValue(ctx, "composed-n2")
		return err
	})
	deniedTo(t, agent, "node n1 reads n2's want", "$JS.API.DIRECT.GET.KV_mesh_wants.$KV.mesh_wants.want.n2.web", func(ctx context.Context) error {
		_, err := wants.Get(ctx, "want.n2.web")
		return err
	})
	deniedTo(t, agent, "node n1 watches every want", "$JS.API.CONSUMER.CREATE.KV_mesh_wants", func(ctx context.Context) error {
		w, err := wants.WatchAll(ctx)
		if err == nil {
			_ = w.Stop()
		}
		return err
	})
	deniedTo(t, agent, "node n1 writes a want", "$KV.mesh_wants.want.n1.web", func(ctx context.Context) error {
		_, err := wants.Put(ctx, "want.n1.web", []byte(`{}`))
		return err
	})
	deniedTo(t, agent, "node n1 writes n2's have", "$KV.mesh_haves.have.n2.web", func(ctx context.Context) error {
		_, err := haves.Put(ctx, "have.n2.web", []byte(`{}`))
		return err
	})

	assigner := b.part(t, grants.Assigner, "")
	aWants, err := assigner.js.KeyValue(ctx, bus.WantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aWants.Put(ctx, "want.n2.web", []byte(`{}`)); err != nil {
		t.Errorf("the assigner writes a want: %v", err)
	}
	composed2, err := assigner.js.KeyValue(ctx, "composed-n2")
	if err != nil {
		t.Fatalf("the assigner binds composed-n2: %v", err)
	}
	if _, err := composed2.Get(ctx, "composition.web.f1"); err != nil {
		t.Errorf("the assigner reads n2's composition: %v", err)
	}
	aHaves, err := assigner.js.KeyValue(ctx, bus.HavesBucket)
	if err != nil {
		t.Fatal(err)
	}
	deniedTo(t, assigner, "the assigner writes a have", "$KV.mesh_haves.have.n1.web", func(ctx context.Context) error {
		_, err := aHaves.Put(ctx, "have.n1.web", []byte(`{}`))
		return err
	})
}

// TestEveryPartOpensTheBus opens the bus as each part does when it starts:
// binding every bucket the operator made, none made or changed.
func TestEveryPartOpensTheBus(t *testing.T) {
	b := startOperatorBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op, err := b.connect(t, "operator", "", b.auth.OperatorUserJWT)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := bus.Open(ctx, op.js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.Composed(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := dedup.Open(ctx, op.js, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := view.Sources(ctx, op.js, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []grants.Part{grants.Assigner, grants.Agent, grants.Watchman, grants.View, grants.Source} {
		c := b.part(t, p, "n1")
		opened, err := bus.Open(ctx, c.js, bus.Options{})
		if err != nil {
			t.Errorf("%s opens the bus: %v (%s)", p, err, c.violations())
			continue
		}
		switch p {
		case grants.Agent:
			_, err = opened.Composed(ctx, "n1")
		case grants.Watchman:
			_, err = dedup.Open(ctx, c.js, 1, nil)
		case grants.View:
			if _, err = dedup.Open(ctx, c.js, 1, nil); err == nil {
				_, err = view.Sources(ctx, c.js, 1)
			}
		case grants.Source:
			_, err = view.Sources(ctx, c.js, 1)
		case grants.Assigner, grants.BackupWorker:
			// Opening the bus is all the assigner reads first; the backup worker
			// opens no bucket at all.
		}
		if err != nil {
			t.Errorf("%s opens what it reads: %v (%s)", p, err, c.violations())
		}
	}
}

func TestRevokedNodeIsRefusedAtOnce(t *testing.T) {
	b := startOperatorBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent := b.part(t, grants.Agent, "n1")
	closed := make(chan struct{})
	agent.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })

	sys, err := b.connect(t, "system", "", b.auth.SystemUserJWT)
	if err != nil {
		t.Fatal(err)
	}
	// A revocation covers the JWTs issued up to its time, to the second.
	account, err := b.auth.AccountJWT([]string{agent.user}, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := grants.Push(ctx, sys.nc, account); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the revoked node's connection was not closed")
	}
	creds := filepath.Join(b.dir, "again.creds")
	seed, _ := os.ReadFile(filepath.Join(b.dir, "agentn1.creds"))
	if err := os.WriteFile(creds, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(b.url, nats.UserCredentials(creds), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the revoked node connected again")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("the revoked node's connect failed with %v, want an authorization error", err)
	}
}

// TestNodeReadsOnlyItsOwnLargeCompositions: an envelope over 64 KiB is in
// its node's own object store, which that node's agent reads as it reads
// its bucket, and no other node can bind, list or read.
func TestNodeReadsOnlyItsOwnLargeCompositions(t *testing.T) {
	b := startOperatorBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op, err := b.connect(t, "operator", "", b.auth.OperatorUserJWT)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := bus.Open(ctx, op.js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	large := map[string][]byte{}
	for _, n := range []string{"n1", "n2"} {
		large[n] = []byte(strings.Repeat("meant for "+n+" alone. ", bus.InlineLimit/10))
		entry, err := mesh.WriteComposition(ctx, n, "web", "f1", large[n])
		if err != nil {
			t.Fatal(err)
		}
		if entry.Object == "" {
			t.Fatalf("an envelope of %d bytes is held inline", len(large[n]))
		}
	}

	agent := b.part(t, grants.Agent, "n1")
	own, err := bus.Open(ctx, agent.js, bus.Options{})
	if err != nil {
		t.Fatalf("the agent opens the bus: %v (%s)", err, agent.violations())
	}
	if _, envelope, err := own.ReadComposition(ctx, "n1", "web", "f1"); err != nil || string(envelope) != string(large["n1"]) {
		t.Fatalf("the agent reads its own large composition: %d bytes, %v (%s)", len(envelope), err, agent.violations())
	}
	deniedTo(t, agent, "node n1 binds n2's object store", "$JS.API.STREAM.INFO.OBJ_composed-n2", func(ctx context.Context) error {
		_, err := agent.js.ObjectStore(ctx, "composed-n2")
		return err
	})
	// Its entry is out of n1's reach too; handed the entry all the same,
	// n1 cannot read the object it names.
	entry := bus.Composed{Module: "web", Fingerprint: "f1", Node: "n2", Digest: bus.Digest(large["n2"]), Object: "composition.web.f1", Size: len(large["n2"])}
	deniedTo(t, agent, "node n1 reads n2's large envelope", "OBJ_composed-n2", func(ctx context.Context) error {
		_, err := own.Envelope(ctx, entry)
		return err
	})
	deniedTo(t, agent, "node n1 makes a consumer on n2's object store", "$JS.API.CONSUMER.CREATE.OBJ_composed-n2", func(ctx context.Context) error {
		_, err := agent.js.OrderedConsumer(ctx, "OBJ_composed-n2", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"$O.composed-n2.C.>"}})
		return err
	})
	deniedTo(t, agent, "node n1 gets a message of n2's object store", "$JS.API.STREAM.MSG.GET.OBJ_composed-n2", func(ctx context.Context) error {
		msg := nats.NewMsg("$JS.API.STREAM.MSG.GET.OBJ_composed-n2")
		msg.Data = []byte(`{"seq":1}`)
		_, err := agent.nc.RequestMsgWithContext(ctx, msg)
		return err
	})

	// The assigner reads every node's, as rule 7 verifies them.
	assigner := b.part(t, grants.Assigner, "")
	all, err := bus.Open(ctx, assigner.js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, envelope, err := all.ReadComposition(ctx, "n2", "web", "f1"); err != nil || string(envelope) != string(large["n2"]) {
		t.Errorf("the assigner reads n2's large composition: %d bytes, %v (%s)", len(envelope), err, assigner.violations())
	}
}
