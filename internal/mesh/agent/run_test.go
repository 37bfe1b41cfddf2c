package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/backupworker"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// TestMain is also the module the agents run: started with MESH_TEST_SERVE
// set, the test binary serves that address, answering / with its
// FINGERPRINT and /healthz with 200 (503 with MESH_TEST_UNHEALTHY set, or
// while the file MESH_TEST_SICK names exists).
func TestMain(m *testing.M) {
	if url := os.Getenv("MESH_TEST_AGENT"); url != "" {
		os.Exit(runAgentProcess(url))
	}
	if addr := os.Getenv("MESH_TEST_SERVE"); addr != "" {
		if data := os.Getenv("MESH_DATA_DIR"); data != "" {
			_ = os.WriteFile(filepath.Join(data, "seen-"+os.Getenv("FINGERPRINT")), nil, 0o600)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, os.Getenv("FINGERPRINT")) })
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			_, sick := os.Stat(os.Getenv("MESH_TEST_SICK"))
			if os.Getenv("MESH_TEST_UNHEALTHY") != "" || sick == nil {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: time.Second}
		_ = srv.ListenAndServe()
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// node is one node's agent on an embedded bus, its module served on addr.
type node struct {
	t      testing.TB
	bus    *bus.Bus
	signer *composition.Signer
	trust  *composition.Trust
	root   string
	addr   string
	logs   *testenv.LogBuffer
	// heartbeat is the agents' Heartbeat; 0 their default.
	heartbeat time.Duration
	ends      map[*agent.Agent]func()
	leaves    map[*agent.Agent]func()
}

func newNode(t testing.TB) *node {
	t.Helper()
	keys, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	return &node{t: t, bus: bustest.Open(t, bustest.Embedded(t), 1), signer: keys.Signer, trust: keys.Trust,
		root: t.TempDir(), addr: addr, logs: &testenv.LogBuffer{}}
}

// start runs an agent, tuned as the test says, until the test ends; its
// modules are stopped then.
func (n *node) start(tune ...func(*agent.Agent)) *agent.Agent { return n.startWith(nil, tune...) }

// startWith is start with a backup worker, the agent tuned as the test says.
func (n *node) startWith(backup agent.Backup, tune ...func(*agent.Agent)) *agent.Agent {
	n.t.Helper()
	a := &agent.Agent{Backup: backup, Heartbeat: n.heartbeat, Node: "n1", Bus: n.bus, Trust: n.trust, Layout: agent.Layout{Root: n.root}, Grace: 2 * time.Second,
		HealthWithin: 10 * time.Second, Tick: 200 * time.Millisecond, Output: n.logs, Logger: slog.New(slog.NewJSONHandler(n.logs, nil))}
	for _, f := range tune {
		f(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	leave := func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				n.t.Errorf("the agent ended with %v", err)
			}
		})
	}
	if n.ends == nil {
		n.ends, n.leaves = map[*agent.Agent]func(){}, map[*agent.Agent]func(){}
	}
	n.ends[a] = func() { leave(); a.Stop() }
	n.leaves[a] = leave
	n.t.Cleanup(n.ends[a])
	return a
}

// end stops an agent and the modules it runs.
func (n *node) end(a *agent.Agent) { n.ends[a]() }

// leave stops an agent alone: its modules run on, as after its upgrade.
func (n *node) leave(a *agent.Agent) { n.leaves[a]() }

// backupWorker runs the node's backup worker into dir until the test ends.
func (n *node) backupWorker(dir string) {
	n.t.Helper()
	s := &backupworker.Worker{Node: "n1", Dir: dir, Conn: n.bus.JS.Conn(), Now: time.Now, Logger: slog.New(slog.NewJSONHandler(n.logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	n.t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			n.t.Errorf("the backup worker ended with %v", err)
		}
	})
}

// runThenStop has an agent apply fingerprint, stops it and deletes its
// have, leaving what runs on disk alone for the next agent to read.
func (n *node) runThenStop(fingerprint string) {
	n.t.Helper()
	first := n.start()
	digest, _ := n.compose(n.signer, fingerprint, nil)
	n.want(fingerprint, digest)
	n.have(fingerprint+" running healthy", running(fingerprint))
	first.Stop()
	key, _ := bus.HaveKey("n1", "web")
	if err := n.bus.Haves.Delete(context.Background(), key); err != nil {
		n.t.Fatal(err)
	}
}

// compose signs the module web at fingerprint for n1 with signer and puts
// it on the bus; it answers the envelope's digest.
func (n *node) compose(signer *composition.Signer, fingerprint string, env map[string]string) (string, []byte) {
	n.t.Helper()
	return n.composeDoc(signer, fingerprint, env, false)
}

// composeDoc is compose, of a module that holds data when data is set.
func (n *node) composeDoc(signer *composition.Signer, fingerprint string, env map[string]string, data bool) (string, []byte) {
	n.t.Helper()
	digest, envelope, err := n.write(signer, fingerprint, env, data)
	if err != nil {
		n.t.Fatal(err)
	}
	return digest, envelope
}

// tryCompose is compose that answers the bus's error instead of failing.
func (n *node) tryCompose(fingerprint string) (string, error) {
	digest, _, err := n.write(n.signer, fingerprint, nil, false)
	return digest, err
}

// document is the module web at fingerprint, served by the test binary.
func (n *node) document(fingerprint string, env map[string]string, data bool) composition.Document {
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	vars := map[string]string{"MESH_TEST_SERVE": n.addr, "FINGERPRINT": fingerprint}
	maps.Copy(vars, env)
	doc := composition.Document{Module: "web", Fingerprint: fingerprint, Node: "n1",
		Files:   map[string]composition.File{"etc/web.conf": {Content: "fingerprint=" + fingerprint + "\n", Mode: "0644"}},
		Command: composition.Command{Argv: []string{self}, Env: vars},
		Health:  composition.Health{HTTP: "http://" + n.addr + "/healthz", Interval: composition.Duration(200 * time.Millisecond), Timeout: composition.Duration(200 * time.Millisecond)}}
	if data {
		doc.HoldsData, doc.DataDir = true, "db"
	}
	return doc
}

// write signs the module web at fingerprint and puts it on the bus.
func (n *node) write(signer *composition.Signer, fingerprint string, env map[string]string, data bool) (string, []byte, error) {
	envelope, err := composition.Sign(context.Background(), signer, n.document(fingerprint, env, data))
	if err != nil {
		return "", nil, err
	}
	entry, err := n.bus.WriteComposition(context.Background(), "n1", "web", fingerprint, envelope)
	return entry.Digest, envelope, err
}

func (n *node) want(fingerprint, digest string) {
	n.t.Helper()
	key, _ := bus.WantKey("n1", "web")
	if _, err := n.bus.Wants.Put(context.Background(), key, bus.Encode(bus.Want{Fingerprint: fingerprint, Digest: digest, Owner: bus.OwnerRules, At: time.Now().UTC()})); err != nil {
		n.t.Fatal(err)
	}
}

// have waits until the node's have of web satisfies ok.
func (n *node) have(what string, ok func(bus.Have) bool) bus.Have {
	n.t.Helper()
	key, _ := bus.HaveKey("n1", "web")
	var last bus.Have
	wait.Poll{Detail: n.logs}.Until(n.t, "a have "+what, func() (bool, string) {
		entry, err := n.bus.Haves.Get(context.Background(), key)
		if err == nil {
			if last, err = bus.DecodeHave(entry.Value()); err == nil && ok(last) {
				return true, ""
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			n.t.Fatal(err)
		}
		return false, fmt.Sprintf("%+v", last)
	})
	return last
}

// serves is what the module at the node's address answers.
func (n *node) serves() string {
	n.t.Helper()
	resp, err := http.Get("http://" + n.addr + "/") //nolint:noctx // the client's own timeout
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func running(fp string) func(bus.Have) bool {
	return func(h bus.Have) bool {
		return h.Fingerprint == fp && h.Phase == bus.PhaseRunning && h.Health == bus.Healthy
	}
}

// TestTheAgentAppliesOnlyWhatItIsSignedTo walks one node through a first
// apply, an upgrade, a composition signed by an unknown key, one altered
// by a byte, and a restart of the agent, which reads what runs from disk.
func TestTheAgentAppliesOnlyWhatItIsSignedTo(t *testing.T) {
	n := newNode(t)
	n.start()
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	n.have("f1 running healthy", running("f1"))
	if got := n.serves(); got != "f1" {
		t.Fatalf("the module answers %q", got)
	}

	d2, _ := n.compose(n.signer, "f2", nil)
	n.want("f2", d2)
	n.have("f2 running healthy", running("f2"))
	if got := n.serves(); got != "f2" {
		t.Fatalf("the module answers %q after the upgrade", got)
	}

	// Signed by a key the node does not trust: refused, f2 runs on.
	stranger, err := composition.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	d3, _ := n.compose(stranger.Signer, "f3", nil)
	n.want("f3", d3)
	h := n.have("refused", func(h bus.Have) bool { return h.Phase == bus.PhaseRefused })
	if h.Fingerprint != "f2" || !strings.Contains(h.Reason, "does not verify") || n.serves() != "f2" {
		t.Fatalf("have %+v, serving %q", h, n.serves())
	}

	// The want names one envelope; the bucket holds it altered by a byte.
	_, envelope := n.compose(n.signer, "f4", nil)
	d4 := bus.Digest(envelope)
	altered := []byte(strings.Replace(string(envelope), `"payload":"`, `"payload":"A`, 1))
	if _, err := n.bus.WriteComposition(context.Background(), "n1", "web", "f4", altered); err != nil {
		t.Fatal(err)
	}
	n.want("f4", d4)
	h = n.have("refused f4", func(h bus.Have) bool {
		return h.Phase == bus.PhaseRefused && strings.Contains(h.Reason, "is not the want's")
	})
	if h.Fingerprint != "f2" || n.serves() != "f2" {
		t.Fatalf("have %+v, serving %q", h, n.serves())
	}
}

// TestARestartedAgentReadsWhatRunsFromDisk: a new agent over the same
// folder starts the version current names and writes its have again, the
// bus's want notwithstanding.
func TestARestartedAgentReadsWhatRunsFromDisk(t *testing.T) {
	n := newNode(t)
	n.runThenStop("f1")
	// The next agent starts what its disk says, and writes its have
	// again before any want is read.
	n.start()
	n.have("f1 again, from disk", running("f1"))
	if got := n.serves(); got != "f1" {
		t.Fatalf("the module answers %q", got)
	}
}

// TestADataModuleIsBackedUpBeforeItIsApplied: with no backup worker a module that
// holds data is not applied; with one, each apply waits for a backup of
// the data the version before wrote, and that generation restores.
func TestADataModuleIsBackedUpBeforeItIsApplied(t *testing.T) {
	n := newNode(t)
	d1, _ := n.composeDoc(n.signer, "f1", nil, true)
	n.want("f1", d1)
	first := n.start()
	h := n.have("failed for want of a backup", func(h bus.Have) bool { return h.Phase == bus.PhaseFailed })
	if !strings.Contains(h.Reason, "no backup seat") {
		t.Fatalf("have %+v", h)
	}
	first.Stop()

	nc := n.bus.JS.Conn()
	backups := t.TempDir()
	n.backupWorker(backups)
	n.startWith(backupworker.Client{Node: "n1", Conn: nc, Within: 30 * time.Second})
	n.have("f1 running healthy", running("f1"))
	d2, _ := n.composeDoc(n.signer, "f2", nil, true)
	n.want("f2", d2)
	n.have("f2 running healthy", running("f2"))

	// The backup before f2 holds what f1 wrote.
	claim := filepath.Join(backups, "web")
	gens, err := backup.ClaimSource{Dir: claim}.List(context.Background())
	if err != nil || len(gens) == 0 {
		t.Fatalf("generations %v, %v\n%s", gens, err, n.logs)
	}
	target := filepath.Join(t.TempDir(), "restored")
	if _, err := (backup.Restorer{Source: backup.ClaimSource{Dir: claim}}).Restore(context.Background(), gens[0], target); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "seen-f1")); err != nil {
		t.Fatalf("the backup before f2 lacks what f1 wrote: %v", err)
	}
}

// TestAHaveIsWrittenAgainAsAHeartbeat: a module that runs steadily has its
// have written again, unchanged but its time, so its node stays online;
// its since stays, so the view sees no progress in it.
func TestAHaveIsWrittenAgainAsAHeartbeat(t *testing.T) {
	n := newNode(t)
	n.heartbeat = 300 * time.Millisecond
	n.start()
	d1, _ := n.compose(n.signer, "f1", nil)
	n.want("f1", d1)
	first := n.have("f1 running healthy", running("f1"))
	again := n.have("the same have written again", func(h bus.Have) bool { return running("f1")(h) && h.At.After(first.At) })
	if again.Digest != first.Digest || again.Phase != first.Phase || again.Health != first.Health || again.Reason != first.Reason || !again.Since.Equal(first.Since) {
		t.Fatalf("the heartbeat changed the have: %+v, was %+v", again, first)
	}
}

// TestABackupTheWorkerDidNotAnswerIsAskedAgain: with no backup worker listening yet
// the apply fails for want of an answer, and, with nothing changed on the
// bus, is tried again with the backoff until the worker is there.
func TestABackupTheWorkerDidNotAnswerIsAskedAgain(t *testing.T) {
	n := newNode(t)
	d1, _ := n.composeDoc(n.signer, "f1", nil, true)
	n.want("f1", d1)
	nc := n.bus.JS.Conn()
	n.startWith(backupworker.Client{Node: "n1", Conn: nc, Within: 5 * time.Second}, func(a *agent.Agent) {
		a.Tick = time.Hour // only the backoff can try again
		a.Backoff = agent.Backoff{First: 100 * time.Millisecond, Most: 400 * time.Millisecond}
	})
	h := n.have("failed for want of the worker's answer", func(h bus.Have) bool { return h.Phase == bus.PhaseFailed })
	if !strings.Contains(h.Reason, "no responders") {
		t.Fatalf("have %+v", h)
	}
	n.backupWorker(t.TempDir())
	n.have("f1 running healthy once the worker answers", running("f1"))
}
