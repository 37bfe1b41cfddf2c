package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "mesh", Variables: variables, Start: []string{"status"},
		Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
			return run(context.Background(), args, getenv, time.Now, stdout, stderr)
		}})
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "mesh: a command is required: agent, assigner, "},
		{[]string{"deploy"}, `unknown command "deploy" for "mesh"`},
		{[]string{"put", "n1", "web"}, "name the node, the module"},
		{[]string{"put", "--end", "n1", "web", "f1"}, "name the node, the module"},
		{[]string{"compose", "doc.json"}, "--key: name the private key"},
		{[]string{"assigner", "x"}, `unknown command "x" for "mesh assigner"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, env(nil), time.Now, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d", c.args, code)
		}
		if !strings.Contains(stderr.String(), c.want) || !strings.Contains(stderr.String(), "Usage:") {
			t.Errorf("%q: want %q and the usage on stderr, got %q", c.args, c.want, stderr.String())
		}
	}
	for command, want := range map[string][]string{
		"assigner": {"NATS_URL", "MESH_TRUSTED_KEYS", "ONLINE_WINDOW", "ASSIGN_TICK", "MESH_REPLICAS"},
		"put":      {"--end", "--id", "NATS_URL", "MESH_TRUSTED_KEYS"},
		"compose":  {"--key", "NATS_URL"},
		"key":      {"--private", "--public"},
	} {
		var stdout bytes.Buffer
		if code := run(context.Background(), []string{command, "--help"}, env(nil), time.Now, &stdout, io.Discard); code != 0 {
			t.Errorf("%s --help: exit %d", command, code)
		}
		for _, name := range want {
			if !strings.Contains(stdout.String(), name) {
				t.Errorf("%s --help does not name %s:\n%s", command, name, stdout.String())
			}
		}
	}
}

func TestBadConfigurationExitsTwo(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{}, "MESH_TRUSTED_KEYS"},
		{map[string]string{"MESH_TRUSTED_KEYS": filepath.Join(dir, "none.pub")}, "no such file"},
		{map[string]string{"MESH_TRUSTED_KEYS": "x", "ONLINE_WINDOW": "soon"}, "ONLINE_WINDOW"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{"assigner"}, env(c.vars), time.Now, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d", c.vars, code)
		}
		if !strings.Contains(stderr.String(), c.want) || !strings.Contains(stderr.String(), `"level":"ERROR"`) {
			t.Errorf("%v: want a JSON line naming %s, got %q", c.vars, c.want, stderr.String())
		}
	}
}

func TestKey(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k"), filepath.Join(dir, "k.pub")
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"key", "--private", priv, "--public", pub}, env(nil), time.Now, &stdout, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	info, err := os.Stat(priv)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("private key %v, %v: want mode 0600", info, err)
	}
	if !strings.HasPrefix(stdout.String(), "keyid ") {
		t.Fatalf("printed %q", stdout.String())
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"key", "--private", priv, "--public", pub}, env(nil), time.Now, io.Discard, &stderr); code != 1 {
		t.Fatalf("a second key over the first: exit %d", code)
	}
}

// TestMeshWhole runs every command against a real JetStream server: the
// key, a composition per node, the assigner writing the canary's want and
// then the others', a put the assigner passes over, and its end.
func TestMeshWhole(t *testing.T) {
	server := testenv.NewNATS(t)
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "mesh.key"), filepath.Join(dir, "mesh.pub")
	vars := map[string]string{"NATS_URL": server.URL, "MESH_TRUSTED_KEYS": pub, "ASSIGN_TICK": "200ms"}
	mesh := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, env(vars), time.Now, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := mesh("key", "--private", priv, "--public", pub); code != 0 {
		t.Fatalf("mesh key: %d %s", code, out)
	}
	nc, err := nats.Connect(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	b, err := bus.Open(ctx, js, bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(store jetstream.KeyValue, key string, doc any) {
		t.Helper()
		if _, err := store.Put(ctx, key, bus.Encode(doc)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(node string) bus.Want {
		key, _ := bus.WantKey(node, "web")
		got, err := b.Wants.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return bus.Want{}
		}
		if err != nil {
			t.Fatal(err)
		}
		w, _ := bus.DecodeWant(got.Value())
		return w
	}
	have := func(node, fingerprint string) {
		key, _ := bus.HaveKey(node, "web")
		put(b.Haves, key, bus.Have{Fingerprint: fingerprint, Phase: bus.PhaseRunning, Health: bus.Healthy, At: time.Now().UTC()})
	}
	nodes := []string{"n1", "n2", "n3"}
	key, _ := bus.ModuleKey("web")
	put(b.Modules, key, bus.Registration{Module: "web", Nodes: nodes, Providers: []string{}})
	digests := map[string]string{}
	for _, n := range nodes {
		have(n, "f1")
		for _, f := range []string{"f1", "f2"} {
			doc := `{"module":"web","fingerprint":"` + f + `","node":"` + n + `","files":{"etc/web.conf":{"content":"x","mode":"0644"}},` +
				`"command":{"argv":["bin/web"]},"health":{"http":"http://127.0.0.1:8080/healthz","interval":"10s","timeout":"1s"},"holdsData":false}`
			file := filepath.Join(dir, n+f+".json")
			if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out := mesh("compose", "--key", priv, file)
			if code != 0 {
				t.Fatalf("mesh compose: %d %s", code, out)
			}
			var printed struct{ Digest string }
			if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &printed); err != nil {
				t.Fatalf("mesh compose printed %q", out)
			}
			digests[n+f] = printed.Digest
		}
	}
	grant, _ := bus.GrantKey("web", "f2")
	put(b.Grants, grant, bus.Grant{Module: "web", Fingerprint: "f2", At: time.Now().UTC()})
	if code, out := mesh("put", "--id", "op-1", "n3", "web", "f1"); code != 0 {
		t.Fatalf("mesh put: %d %s", code, out)
	}
	if w := want("n3"); w.Owner != bus.PutOwner("op-1") || w.Digest != digests["n3f1"] {
		t.Fatalf("the put wrote %+v", w)
	}
	if seal, _, err := b.ReadSeal(ctx, "n3", "web"); err != nil || seal == nil || !seal.Same(want("n3")) {
		t.Fatalf("the put sealed %+v (%v), its want is %+v", seal, err, want("n3"))
	}
	if code, out := mesh("put", "--id", "op-2", "n3", "web", "f2"); code != 1 || !strings.Contains(out, "put:op-1") {
		t.Fatalf("a second put over the first: %d %s", code, out)
	}

	logs := &testenv.LogBuffer{}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"assigner"}, env(vars), time.Now, io.Discard, logs) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("the assigner exited %d: %s", code, logs.String())
		}
	}()

	build, _ := bus.BuildKey("web", "f2")
	put(b.Builds, build, bus.Build{Module: "web", Fingerprint: "f2", State: bus.BuildDone, At: time.Now().UTC()})
	wait.For(t, "the canary's want", func() bool { w := want("n1"); return w.Fingerprint == "f2" && w.Digest == digests["n1f2"] })
	if w := want("n2"); w.Fingerprint != "" {
		t.Fatalf("n2 wants %+v before the canary is healthy", w)
	}
	have("n1", "f2")
	wait.For(t, "n2's want", func() bool { w := want("n2"); return w.Fingerprint == "f2" && w.Owner == bus.OwnerRules })
	if w := want("n3"); w.Owner != bus.PutOwner("op-1") || w.Fingerprint != "f1" {
		t.Fatalf("the put was written over: %+v", w)
	}
	if code, out := mesh("put", "--end", "--id", "op-1", "n3", "web"); code != 0 {
		t.Fatalf("mesh put --end: %d %s", code, out)
	}
	if seal, _, err := b.ReadSeal(ctx, "n3", "web"); err != nil || seal != nil {
		t.Fatalf("the put's seal is left after its end: %+v (%v)", seal, err)
	}
	wait.For(t, "n3's want back under the rules", func() bool {
		w := want("n3")
		return w.Fingerprint == "f2" && w.Owner == bus.OwnerRules && w.Digest == digests["n3f2"]
	})
	if !strings.Contains(logs.String(), `"msg":"wants written"`) {
		t.Fatalf("the assigner logged no writes:\n%s", logs.String())
	}
}
