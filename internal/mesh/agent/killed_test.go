package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// runAgentProcess is the test binary as node n1's agent, in a process of
// its own so a test can kill it: the bus at url, its root and trusted key
// from MESH_TEST_ROOT and MESH_TEST_KEYS.
func runAgentProcess(url string) int {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	b, err := bus.Open(ctx, js, bus.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	raw, _ := os.ReadFile(os.Getenv("MESH_TEST_KEYS"))
	keys, _ := composition.ParsePublicKeys(raw)
	trust, err := composition.NewTrust(keys...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a := &agent.Agent{Node: "n1", Bus: b, Trust: trust, Layout: agent.Layout{Root: os.Getenv("MESH_TEST_ROOT")}, Grace: 2 * time.Second,
		HealthWithin: 10 * time.Second, Tick: 200 * time.Millisecond, Output: os.Stderr, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	_ = a.Run(ctx)
	return 0
}

// TestAnAgentKilledMidApplyRestartsIntoOneWholeVersion kills the agent's
// process with SIGKILL while it lays a large composition down: the version
// that runs is still the old one, whole, and the agent started again
// serves it, then applies the new one.
func TestAnAgentKilledMidApplyRestartsIntoOneWholeVersion(t *testing.T) {
	n := newNode(t)
	server := testenv.NewNATS(t)
	n.bus = bustest.Open(t, server.URL, 1)
	pair, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	n.signer = pair.Signer
	keys := filepath.Join(t.TempDir(), "trusted.pub")
	if err := os.WriteFile(keys, pair.Public, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	// The modules outlive their agents by design: the test ends them by
	// the process groups their versions name.
	t.Cleanup(func() {
		pids, _ := filepath.Glob(filepath.Join(n.root, "web", "releases", "*", ".pid"))
		for _, p := range pids {
			raw, _ := os.ReadFile(p) //nolint:gosec // a file under the test's folder
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	start := func() *exec.Cmd {
		cmd := exec.Command(self) //nolint:gosec // the test binary as the agent
		cmd.Env = append(os.Environ(), "MESH_TEST_AGENT="+server.URL, "MESH_TEST_ROOT="+n.root, "MESH_TEST_KEYS="+keys)
		cmd.Stdout, cmd.Stderr = logs, logs
		// The module the agent started keeps the agent's output open when
		// the agent is killed: Wait stops waiting for it.
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := start()
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))

	// A version of 2,000 files, each synced: laying it down takes long
	// enough to be killed in the middle.
	doc := n.document("f2", nil, false)
	for i := range 2000 {
		doc.Files[fmt.Sprintf("share/file-%04d", i)] = composition.File{Content: strings.Repeat("y", 1024), Mode: "0644"}
	}
	envelope, err := composition.Sign(context.Background(), n.signer, doc)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := n.bus.WriteComposition(context.Background(), "n1", "web", "f2", envelope)
	if err != nil {
		t.Fatal(err)
	}
	n.want("f2", entry.Digest)
	releases := filepath.Join(n.root, "web", "releases")
	wait.Poll{Within: time.Minute, Every: time.Millisecond, Detail: logs}.For(t, "the install begun", func() bool {
		matches, _ := filepath.Glob(filepath.Join(releases, ".install-*", "share", "file-0*"))
		return len(matches) > 0
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()

	l := agent.Layout{Root: n.root}
	r, dir, err := l.Current("web")
	if err != nil || r.Fingerprint != "f1" {
		t.Fatalf("after the kill current names %+v (%v), want f1 whole", r, err)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "etc", "web.conf")); err != nil || string(raw) != "fingerprint=f1\n" {
		t.Fatalf("the old version is not whole: %q %v", raw, err)
	}

	start()
	n.have("f2 running healthy after the restart", running("f2"))
	if got := n.serves(); got != "f2" {
		t.Fatalf("the module answers %q", got)
	}
	r, dir, _ = l.Current("web")
	if files, _ := filepath.Glob(filepath.Join(dir, "share", "file-*")); r.Fingerprint != "f2" || len(files) != 2000 {
		t.Fatalf("the new version %+v holds %d of 2,000 files", r, len(files))
	}
	if leftovers, _ := filepath.Glob(filepath.Join(releases, ".install-*")); len(leftovers) != 0 {
		t.Fatalf("leftovers of the killed install stay: %v", leftovers)
	}
}
