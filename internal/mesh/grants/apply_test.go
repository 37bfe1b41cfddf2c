package grants_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
)

// TestApply runs a fleet's credentials from nothing, then takes node n2
// out: its agent, connected on the credentials Apply wrote, is closed at
// once, and nothing is left to change.
func TestApply(t *testing.T) {
	b := startOperatorBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sys, err := b.connect(t, "system", "", b.auth.SystemUserJWT)
	if err != nil {
		t.Fatal(err)
	}
	folder := grants.Folder(t.TempDir())
	run := func(nodes []string, revoked []string) []string {
		t.Helper()
		want, err := grants.Wanted(nodes)
		if err != nil {
			t.Fatal(err)
		}
		have, keys, err := folder.Users()
		if err != nil {
			t.Fatal(err)
		}
		revoked, err = grants.Apply(ctx, b.auth, folder, grants.Plan(have, want), want, keys, revoked, sys.nc, time.Now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if have, _, err = folder.Users(); err != nil || len(grants.Plan(have, want)) != 0 {
			t.Fatalf("after the run: %v, %v", grants.Plan(have, want), err)
		}
		return revoked
	}
	revoked := run([]string{"n1", "n2"}, nil)
	if len(revoked) != 0 {
		t.Errorf("revoked %v from nothing", revoked)
	}
	inbox, _ := grants.InboxPrefix(grants.Agent, "n2")
	n2, err := nats.Connect(b.url, nats.UserCredentials(filepath.Join(string(folder), "agent-n2.creds")), nats.CustomInboxPrefix(inbox), nats.NoReconnect())
	if err != nil {
		t.Fatalf("node n2's agent connects on its credentials: %v", err)
	}
	defer n2.Close()
	closed := make(chan struct{})
	n2.SetClosedHandler(func(*nats.Conn) { close(closed) })

	revoked = run([]string{"n1"}, revoked)
	if len(revoked) != 2 {
		t.Errorf("revoked %v, want n2's agent and backup worker", revoked)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("node n2's agent was not disconnected")
	}
	if nc, err := nats.Connect(b.url, nats.UserCredentials(filepath.Join(string(folder), "agent-n1.creds")), nats.NoReconnect()); err != nil {
		t.Errorf("node n1's agent no longer connects: %v", err)
	} else {
		nc.Close()
	}
}
