package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestSourceThenStatus runs mesh source and mesh status whole against an
// embedded bus: the revision written, then the table and the exit code of
// a revision not yet delivered (moving; stuck under heartbeats; a
// registered node online without a want), then delivered without the node
// gone offline.
func TestSourceThenStatus(t *testing.T) { sourceThenStatus(t, bustest.Embedded(t)) }

// TestSourceThenStatusOnTheRealServer is the same on the built nats-server.
func TestSourceThenStatusOnTheRealServer(t *testing.T) { sourceThenStatus(t, testenv.NewNATS(t).URL) }

func sourceThenStatus(t *testing.T, url string) {
	vars := env(map[string]string{natsURL.Name: url})
	mesh := func(args ...string) (int, string, string) {
		var out, logs bytes.Buffer
		code := run(context.Background(), args, vars, time.Now, &out, &logs)
		return code, out.String(), logs.String()
	}
	if code, _, logs := mesh("source", "abc123", "web"); code != 2 || !strings.Contains(logs, `is not <module>=<fingerprint>`) {
		t.Fatalf("a bad argument: %d\n%s", code, logs)
	}
	if code, _, logs := mesh("source", "abc123", "web=f2"); code != 0 {
		t.Fatalf("source: %d\n%s", code, logs)
	}
	b := bustest.Open(t, url, 1)
	reg, _ := bus.ModuleKey("web")
	if _, err := b.Modules.Put(context.Background(), reg, bus.Encode(bus.Registration{Module: "web", Nodes: []string{"n1", "n2"}, Providers: []string{}})); err != nil {
		t.Fatal(err)
	}
	key, _ := bus.WantKey("n1", "web")
	digest := bus.Digest([]byte("e"))
	if _, err := b.Wants.Put(context.Background(), key, bus.Encode(bus.Want{Fingerprint: "f2", Digest: digest, Owner: bus.OwnerRules, At: time.Now().UTC()})); err != nil {
		t.Fatal(err)
	}
	code, out, logs := mesh("status")
	if code != 3 || !strings.Contains(out, "revision abc123: not delivered") || !strings.Contains(out, "moving") || strings.Contains(out, "\x1b[") {
		t.Fatalf("status: %d\n%s\n%s", code, out, logs)
	}
	putHave := func(node string, h bus.Have) {
		t.Helper()
		k, _ := bus.HaveKey(node, "web")
		if _, err := b.Haves.Put(context.Background(), k, bus.Encode(h)); err != nil {
			t.Fatal(err)
		}
	}
	// Unhealthy for twenty minutes, the have written again just now as a
	// heartbeat: no progress, so stuck.
	now := time.Now().UTC()
	if _, err := b.Wants.Put(context.Background(), key, bus.Encode(bus.Want{Fingerprint: "f2", Digest: digest, Owner: bus.OwnerRules, At: now.Add(-30 * time.Minute)})); err != nil {
		t.Fatal(err)
	}
	putHave("n1", bus.Have{Fingerprint: "f2", Digest: digest, Phase: bus.PhaseRunning, Health: bus.Unhealthy, Since: now.Add(-20 * time.Minute), At: now})
	if code, out, _ := mesh("status"); code != 3 || !strings.Contains(out, "stuck") {
		t.Fatalf("status of a heartbeat over an unhealthy module: %d\n%s", code, out)
	}
	// n1 settled; n2, registered and online, has no want yet.
	putHave("n1", bus.Have{Fingerprint: "f2", Digest: digest, Phase: bus.PhaseRunning, Health: bus.Healthy, At: time.Now().UTC()})
	putHave("n2", bus.Have{Phase: bus.PhaseRunning, Health: bus.Unknown, Reason: "nothing runs yet", At: time.Now().UTC()})
	if code, out, _ := mesh("status"); code != 3 || !strings.Contains(out, "revision abc123: not delivered") || !strings.Contains(out, "settled") {
		t.Fatalf("status with a registered node online and no want: %d\n%s", code, out)
	}
	// n2 silent past ONLINE_WINDOW: delivered without it, and said so.
	putHave("n2", bus.Have{Phase: bus.PhaseRunning, Health: bus.Unknown, Reason: "nothing runs yet", At: time.Now().UTC().Add(-time.Hour)})
	if code, out, _ := mesh("status"); code != 0 || !strings.Contains(out, "revision abc123: delivered, without the offline n2") {
		t.Fatalf("status once settled: %d\n%s", code, out)
	}
}
