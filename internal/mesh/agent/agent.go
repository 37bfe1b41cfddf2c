package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// Opener verifies a node's signed composition before reading it;
// composition.Trust is one.
type Opener interface {
	OpenFor(ctx context.Context, envelope []byte, node, module, fingerprint string) (composition.Document, error)
}

// Backup asks the node's backup seat for a backup of a module's data
// directory and waits for its end.
type Backup interface {
	BackUp(ctx context.Context, module, dataDir string) error
}

// Agent is one node's agent: it applies, one module at a time, what its
// wants name and its bucket holds signed, and writes its haves.
type Agent struct {
	Node string
	// Bus is the bus the agent uses; when nil, Open opens it, tried again
	// with Backoff until the bus answers, what runs on disk running
	// meanwhile.
	Bus  *bus.Bus
	Open func(context.Context) (*bus.Bus, error)
	// Back, when set, has a value each time the connection to the bus is
	// made again (bus.Dial gives one): a pass then runs at once.
	Back <-chan struct{}
	// Backoff is the wait after a pass the bus did not answer; its zero
	// value is 1 s doubled to 30 s.
	Backoff Backoff
	Trust   Opener
	Layout  Layout
	// Backup is the node's backup seat; nil, a module that holds data is
	// never applied.
	Backup Backup
	// Grace is how long a stopped module has between SIGTERM and SIGKILL.
	Grace time.Duration
	// HealthWithin is how long a started module has to pass its check.
	HealthWithin time.Duration
	// Tick is how often it looks with nothing new on the bus.
	Tick time.Duration
	// Heartbeat is how often a have that did not change is written again,
	// so the node stays online for the assigner (well within its
	// ONLINE_WINDOW); 0 is 30 s.
	Heartbeat time.Duration
	Output    io.Writer
	Logger    *slog.Logger
	Now       func() time.Time

	mu       sync.Mutex
	procs    map[string]*Process
	attempts map[string]string // module → the want and composition last applied or refused
	haves    map[string]bus.Have

	// unanswered says the bus did not answer during the pass under way;
	// failures counts such passes in a row. Only Run's goroutine uses them.
	unanswered bool
	failures   int
}

func (a *Agent) init() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.procs == nil {
		a.procs, a.attempts, a.haves = map[string]*Process{}, map[string]string{}, map[string]bus.Have{}
	}
	if a.Grace == 0 {
		a.Grace = 10 * time.Second
	}
	if a.HealthWithin == 0 {
		a.HealthWithin = time.Minute
	}
	if a.Heartbeat == 0 {
		a.Heartbeat = 30 * time.Second
	}
	if a.Tick == 0 {
		a.Tick = 5 * time.Second
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Output == nil {
		a.Output = io.Discard
	}
}

// Run starts what the disk says runs, writes its haves again, then applies
// on every change of the node's wants or compositions until ctx ends; what
// it runs goes on running, stopped only by Stop.
func (a *Agent) Run(ctx context.Context) error {
	a.init()
	if a.Bus == nil && a.Open == nil {
		return errors.New("the agent has no bus and no way to open one")
	}
	a.resume(ctx)
	for failures := 1; ; failures++ {
		err := a.watch(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.Logger.Warn("the bus did not answer", slog.String("error", err.Error()))
		wait := time.NewTimer(a.Backoff.After(failures))
		select {
		case <-ctx.Done():
		case <-a.Back:
		case <-wait.C:
		}
		wait.Stop()
	}
}

// watch opens the bus if it is not yet, and passes on every change of the
// node's wants or compositions, on its Back and its Tick, until the bus
// cannot be watched or ctx ends.
func (a *Agent) watch(ctx context.Context) error {
	if a.Bus == nil {
		b, err := a.Open(ctx)
		if err != nil {
			return err
		}
		a.Bus = b
	}
	composed, err := a.Bus.Composed(ctx, a.Node)
	if err != nil {
		return err
	}
	return bus.Loop{Stores: []jetstream.KeyValue{a.Bus.Wants, composed}, Wake: a.Back, Wait: a.wait}.Run(ctx, a.pass)
}

// wait is how long to wait for a change before the next pass: the tick, or
// while the bus does not answer, the backoff.
func (a *Agent) wait() time.Duration {
	if !a.unanswered {
		a.failures = 0
		return a.Tick
	}
	a.failures++
	return a.Backoff.After(a.failures)
}

// Stop stops every module the agent runs.
func (a *Agent) Stop() {
	a.mu.Lock()
	procs := a.procs
	a.procs = map[string]*Process{}
	a.mu.Unlock()
	for _, p := range procs {
		p.Stop(a.Grace)
	}
}

// resume starts each module's current version from disk, not the bus.
func (a *Agent) resume(ctx context.Context) {
	modules, err := a.Layout.Modules()
	if err != nil {
		a.Logger.Error("cannot read what runs", slog.String("root", a.Layout.Root), slog.String("error", err.Error()))
		return
	}
	for _, m := range modules {
		running, dir, err := a.Layout.Current(m)
		if err != nil || running.Fingerprint == "" {
			continue
		}
		doc, err := readDocument(dir)
		if err != nil {
			a.failed(ctx, m, running, err)
			continue
		}
		a.stopStale(dir)
		a.start(ctx, m, running, doc, dir)
	}
}

// pass applies each of the node's wants, one module at a time.
func (a *Agent) pass(ctx context.Context) {
	a.unanswered = false
	wants, err := bus.ReadPlaces(ctx, a.Bus.Wants, bus.KindWant, bus.DecodeWant, func(key string, err error) {
		a.Logger.Warn("document skipped", slog.String("key", key), slog.String("error", err.Error()))
	})
	if err != nil {
		a.unanswered = true
		a.Logger.Warn("the bus did not answer", slog.String("error", err.Error()))
		return
	}
	var mine []bus.Place
	for p := range wants {
		if p.Node == a.Node {
			mine = append(mine, p)
		}
	}
	slices.SortFunc(mine, func(x, y bus.Place) int { return strings.Compare(x.Module, y.Module) })
	for _, p := range mine {
		a.apply(ctx, p.Module, wants[p])
	}
	a.present(ctx)
	a.beat(ctx)
}

// beat writes again each have not written for a heartbeat, unchanged but
// its time: a node that runs steadily must not look offline, or it would
// stop being a canary, and a fleet at rest would have none.
func (a *Agent) beat(ctx context.Context) {
	now := a.Now()
	a.mu.Lock()
	due := map[string]bus.Have{}
	for m, h := range a.haves {
		if now.Sub(h.At) >= a.Heartbeat {
			due[m] = h
		}
	}
	a.mu.Unlock()
	for m, h := range due {
		a.writeHave(ctx, m, h)
	}
}

// present writes, for each module registered on the node that it has said
// nothing of, a have naming no fingerprint: the node is there and runs
// nothing of it yet. A node is online, and can be a module's canary, only
// once it has written a have.
func (a *Agent) present(ctx context.Context) {
	entries, err := bus.ReadAll(ctx, a.Bus.Modules)
	if err != nil {
		a.unanswered = true
		return
	}
	for _, raw := range entries {
		r, err := bus.DecodeRegistration(raw)
		if err != nil || !slices.Contains(r.Nodes, a.Node) {
			continue
		}
		a.mu.Lock()
		_, said := a.haves[r.Module]
		a.mu.Unlock()
		if !said {
			a.writeHave(ctx, r.Module, bus.Have{Phase: bus.PhaseRunning, Health: bus.Unknown, Reason: "nothing runs yet"})
		}
	}
}

// apply does what Decide says of one module's want.
func (a *Agent) apply(ctx context.Context, module string, want bus.Want) {
	running, _, err := a.Layout.Current(module)
	if err != nil {
		a.failed(ctx, module, running, err)
		return
	}
	var offer Offer
	var doc composition.Document
	entry, envelope, err := a.Bus.ReadComposition(ctx, a.Node, module, want.Fingerprint)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil && entry.Digest == "":
		a.unanswered = true
		a.Logger.Warn("the bus did not answer", slog.String("module", module), slog.String("error", err.Error()))
		return
	case err != nil:
		offer = Offer{Found: true, Digest: entry.Digest, Unverified: err.Error()}
	default:
		offer = Offer{Found: true, Digest: entry.Digest}
		if doc, err = a.Trust.OpenFor(ctx, envelope, a.Node, module, want.Fingerprint); err != nil {
			offer.Unverified = err.Error()
		}
	}
	action, why := Decide(want, running, offer)
	attempt := want.Fingerprint + " " + want.Digest + " " + offer.Digest
	a.mu.Lock()
	tried := a.attempts[module] == attempt
	a.mu.Unlock()
	switch {
	case action == ActionNone || tried:
		return
	case action == ActionRefuse:
		a.remember(module, attempt)
		a.Logger.Warn("refused", slog.String("module", module), slog.String("fingerprint", want.Fingerprint), slog.String("why", why))
		a.writeHave(ctx, module, bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: bus.PhaseRefused,
			Health: a.health(module), Reason: clip(why)})
		return
	}
	a.remember(module, attempt)
	next := Running{Fingerprint: want.Fingerprint, Digest: want.Digest}
	a.writeHave(ctx, module, bus.Have{Fingerprint: next.Fingerprint, Digest: next.Digest, Phase: bus.PhaseApplying, Health: bus.Unknown})
	if doc.HoldsData {
		if a.Backup == nil {
			a.failed(ctx, module, next, errors.New("the module holds data and no backup seat answers: not applied"))
			return
		}
		data, err := a.Layout.DataDir(module, doc.DataDir)
		if err == nil {
			err = a.Backup.BackUp(ctx, module, data)
		}
		if err != nil {
			if bus.Unanswered(err) {
				// Not an answer: tried again at the next pass, not only at
				// the next change of the want.
				a.forget(module)
				a.unanswered = true
			}
			a.failed(ctx, module, next, fmt.Errorf("no backup of %s, so not applied: %w", doc.DataDir, err))
			return
		}
	}
	dir, err := a.Layout.Install(doc, want.Digest)
	if err != nil {
		a.failed(ctx, module, next, err)
		return
	}
	a.mu.Lock()
	old := a.procs[module]
	delete(a.procs, module)
	a.mu.Unlock()
	if old != nil {
		old.Stop(a.Grace)
	}
	if err := a.Layout.Switch(module, want.Digest); err != nil {
		a.failed(ctx, module, next, err)
		return
	}
	a.start(ctx, module, next, doc, dir)
}

// start runs a version and writes how it went.
func (a *Agent) start(ctx context.Context, module string, running Running, doc composition.Document, dir string) {
	command := doc.Command
	if doc.HoldsData {
		// The module finds its data where every version of it does.
		data, err := a.Layout.DataDir(module, doc.DataDir)
		if err == nil {
			err = os.MkdirAll(data, 0o700)
		}
		if err != nil {
			a.failed(ctx, module, running, err)
			return
		}
		command.Env = maps.Clone(command.Env)
		if command.Env == nil {
			command.Env = map[string]string{}
		}
		command.Env["MESH_DATA_DIR"] = data
	}
	p, err := StartProcess(dir, command, a.Output)
	if err != nil {
		a.failed(ctx, module, running, err)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(p.Pid())), 0o600)
	a.mu.Lock()
	a.procs[module] = p
	a.mu.Unlock()
	have := bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: bus.PhaseRunning, Health: bus.Healthy}
	if err := WaitHealthy(ctx, p, doc.Health, dir, a.HealthWithin); err != nil {
		have.Health, have.Reason = bus.Unhealthy, clip(err.Error())
		select {
		case <-p.Exited():
			have.Phase = bus.PhaseFailed
		default:
		}
	}
	a.Logger.Info("applied", slog.String("module", module), slog.String("fingerprint", running.Fingerprint),
		slog.String("phase", string(have.Phase)), slog.String("health", string(have.Health)), slog.String("reason", have.Reason))
	a.writeHave(ctx, module, have)
}

func (a *Agent) failed(ctx context.Context, module string, running Running, err error) {
	a.Logger.Error("apply failed", slog.String("module", module), slog.String("fingerprint", running.Fingerprint), slog.String("error", err.Error()))
	a.writeHave(ctx, module, bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: bus.PhaseFailed,
		Health: bus.Unknown, Reason: clip(err.Error())})
}

func (a *Agent) remember(module, attempt string) {
	a.mu.Lock()
	a.attempts[module] = attempt
	a.mu.Unlock()
}

func (a *Agent) forget(module string) {
	a.mu.Lock()
	delete(a.attempts, module)
	a.mu.Unlock()
}

// health is the last health written for module.
func (a *Agent) health(module string) bus.Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h, ok := a.haves[module]; ok {
		return h.Health
	}
	return bus.Unknown
}

func (a *Agent) writeHave(ctx context.Context, module string, h bus.Have) {
	h.At = a.Now().UTC()
	a.mu.Lock()
	a.haves[module] = h
	a.mu.Unlock()
	key, err := bus.HaveKey(a.Node, module)
	switch {
	case err != nil:
	case a.Bus == nil:
		err = errors.New("the bus is not open yet")
	default:
		_, err = a.Bus.Haves.Put(ctx, key, bus.Encode(h))
	}
	if err != nil {
		// A have the bus did not take is due at once: its zero time makes
		// the next pass's beat write it.
		a.mu.Lock()
		h.At = time.Time{}
		a.haves[module] = h
		a.mu.Unlock()
		a.unanswered = true
		a.Logger.Warn("have not written", slog.String("module", module), slog.String("error", err.Error()))
	}
}

// The files beside a version that the agent keeps: the composition it was
// laid down from, and the process group that runs it.
const (
	documentFile = ".composition.json"
	pidFile      = ".pid"
)

func readDocument(dir string) (composition.Document, error) {
	raw, err := os.ReadFile(filepath.Join(dir, documentFile)) //nolint:gosec // a version's folder under MESH_ROOT
	if err != nil {
		return composition.Document{}, err
	}
	return composition.Decode(raw)
}

// stopStale kills the process group an agent before this one left running
// from dir, so a version runs once.
func (a *Agent) stopStale(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile)) //nolint:gosec // a version's folder under MESH_ROOT
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// clip keeps a have's reason within its schema's 1024 bytes.
func clip(s string) string {
	if len(s) > 1024 {
		return s[:1021] + "..."
	}
	return s
}
