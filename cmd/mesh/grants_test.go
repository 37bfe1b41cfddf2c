package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func runMesh(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, env(vars), time.Now, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// operatorServer runs the built nats-server in operator mode on the JWTs
// grants --init wrote, with a full resolver preloaded with both accounts,
// as the bootstrap in docs/mesh.md sets it up.
func operatorServer(t *testing.T, keys string) string {
	t.Helper()
	read := func(file string) string {
		raw, err := os.ReadFile(filepath.Join(keys, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	op, err := jwt.DecodeOperatorClaims(read("operator.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.NewOperatorNATS(t, testenv.NATSTrust{
		OperatorJWT: read("operator.jwt"), SystemAccount: op.SystemAccount,
		Accounts: []string{read("system.jwt"), read("account.jwt")},
	}).URL
}

func TestGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, creds := t.TempDir(), t.TempDir()
	if code, _, stderr := runMesh(t, nil, "grants", "--keys", keys, "--creds", creds); code != 2 || !strings.Contains(stderr, "operator.nk") {
		t.Fatalf("without keys: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runMesh(t, nil, "grants", "--keys", keys, "--init"); code != 0 {
		t.Fatalf("--init: exit %d, %s", code, stderr)
	}
	seed, _ := os.ReadFile(filepath.Join(keys, "operator.nk"))
	if code, _, stderr := runMesh(t, nil, "grants", "--keys", keys, "--init"); code != 0 {
		t.Fatalf("--init again: exit %d, %s", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(keys, "operator.nk")); !bytes.Equal(seed, again) {
		t.Fatal("--init wrote over the operator's seed")
	}
	url := operatorServer(t, keys)

	// The operator's own user registers two modules on two nodes.
	auth, err := loadAuthority(keys)
	if err != nil {
		t.Fatal(err)
	}
	opCreds := filepath.Join(t.TempDir(), "operator.creds")
	folder := grants.Folder(filepath.Dir(opCreds))
	if err := folder.WriteOperator(auth, "operator"); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"NATS_URL": url, "NATS_CREDS": opCreds}
	nc, err := nats.Connect(url, nats.UserCredentials(opCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	b, err := bus.Open(ctx, js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	register := func(nodes ...string) {
		t.Helper()
		raw := bus.Encode(bus.Registration{Module: "web", Nodes: nodes, Providers: []string{}})
		if _, err := b.Modules.Put(ctx, "module.web", raw); err != nil {
			t.Fatal(err)
		}
	}
	register("n1", "n2")

	code, stdout, stderr := runMesh(t, vars, "grants", "--keys", keys, "--creds", creds, "--dry-run")
	if code != 0 || !strings.Contains(stdout, "add agent-n2") || !strings.Contains(stdout, "add assigner") {
		t.Fatalf("--dry-run: exit %d, %q, %s", code, stdout, stderr)
	}
	if matches, _ := filepath.Glob(filepath.Join(creds, "*.creds")); len(matches) != 0 {
		t.Fatalf("--dry-run wrote %v", matches)
	}
	if code, _, stderr := runMesh(t, vars, "grants", "--keys", keys, "--creds", creds); code != 0 {
		t.Fatalf("grants: exit %d, %s", code, stderr)
	}
	n2, err := nats.Connect(url, nats.UserCredentials(filepath.Join(creds, "agent-n2.creds")), nats.NoReconnect())
	if err != nil {
		t.Fatalf("node n2's agent connects: %v", err)
	}
	defer n2.Close()
	closed := make(chan struct{})
	n2.SetClosedHandler(func(*nats.Conn) { close(closed) })

	register("n1")
	code, stdout, stderr = runMesh(t, vars, "grants", "--keys", keys, "--creds", creds)
	if code != 0 || !strings.Contains(stdout, "revoke agent-n2") || !strings.Contains(stdout, "revoke backup-seat-n2") {
		t.Fatalf("grants after n2 left: exit %d, %q, %s", code, stdout, stderr)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("node n2's agent was not disconnected")
	}
	if code, stdout, _ = runMesh(t, vars, "grants", "--keys", keys, "--creds", creds); code != 0 || !strings.Contains(stdout, "no change") {
		t.Fatalf("a run with nothing to do: exit %d, %q", code, stdout)
	}
}
