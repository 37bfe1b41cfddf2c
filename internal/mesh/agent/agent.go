package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// Backup asks the node's backup worker for a backup of a module's data
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
	// Backup is the node's backup worker; nil, a module that holds data is
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
	// Keep is how many versions of a module stay laid down, the newest,
	// besides what runs and what last ran healthy; 0 is 3.
	Keep int
	// Restart is the wait before a module whose process ended in failure
	// is started again; its zero value is 1 s doubled to 30 s, counted
	// afresh once the module passes its check.
	Restart Backoff
	Output  io.Writer
	Logger  *slog.Logger
	Now     func() time.Time

	mu       sync.Mutex
	runs     map[string]*run   // module → what runs of it, supervised
	attempts map[string]string // module → the want and composition last applied or refused
	haves    map[string]bus.Have
	why      map[string]string // module → why its attempt is where it is, for a have amended later

	// writing orders the have writes, so a heartbeat never puts back a
	// have a supervisor has changed since.
	writing sync.Mutex

	// unanswered says the bus did not answer during the pass under way
	// (a supervisor's have write may say so too); failures counts such
	// passes in a row, Run's goroutine alone.
	unanswered atomic.Bool
	failures   int
	// wantKeys is want.<node>.>, all the agent reads of the wants: its own
	// credential allows it no other. Set by watch, read by its passes.
	wantKeys string
}

func (a *Agent) init() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs == nil {
		a.runs, a.attempts, a.haves, a.why = map[string]*run{}, map[string]string{}, map[string]bus.Have{}, map[string]string{}
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
	if a.Keep <= 0 {
		a.Keep = 3
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
	if a.wantKeys, err = bus.NodeKeys(bus.KindWant, a.Node); err != nil {
		return err
	}
	only := []bus.Watched{{Store: a.Bus.Wants, Keys: a.wantKeys}}
	return bus.Loop{Stores: []jetstream.KeyValue{composed}, Only: only, Wake: a.Back, Wait: a.wait}.Run(ctx, a.pass)
}

// wait is how long to wait for a change before the next pass: the tick, or
// while the bus does not answer, the backoff.
func (a *Agent) wait() time.Duration {
	if !a.unanswered.Load() {
		a.failures = 0
		return a.Tick
	}
	a.failures++
	return a.Backoff.After(a.failures)
}

// Stop stops every module the agent runs, its supervision first.
func (a *Agent) Stop() {
	a.mu.Lock()
	runs := a.runs
	a.runs = map[string]*run{}
	a.mu.Unlock()
	for _, r := range runs {
		r.stop(a.Grace)
	}
}

// pass applies each of the node's wants, one module at a time.
func (a *Agent) pass(ctx context.Context) {
	a.unanswered.Store(false)
	wants, err := bus.ReadPlacesOf(ctx, a.Bus.Wants, a.wantKeys, bus.KindWant, bus.DecodeWant, func(key string, err error) {
		a.Logger.Warn("document skipped", slog.String("key", key), slog.String("error", err.Error()))
	})
	if err != nil {
		a.unanswered.Store(true)
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
	a.writing.Lock()
	defer a.writing.Unlock()
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
		a.put(ctx, m, h)
	}
}

// present writes, for each module registered on the node that it has reported
// nothing of, a have naming no fingerprint: the node is there and runs
// nothing of it yet. A node is online, and can be a module's canary, only
// once it has written a have.
func (a *Agent) present(ctx context.Context) {
	entries, err := bus.ReadAll(ctx, a.Bus.Modules)
	if err != nil {
		a.unanswered.Store(true)
		return
	}
	for _, raw := range entries {
		r, err := bus.DecodeRegistration(raw)
		if err != nil || !slices.Contains(r.Nodes, a.Node) {
			continue
		}
		a.mu.Lock()
		_, reported := a.haves[r.Module]
		a.mu.Unlock()
		if !reported {
			a.writeHave(ctx, r.Module, bus.Have{Phase: bus.PhaseRunning, Health: bus.Unknown, Reason: "nothing runs yet"})
		}
	}
}

// age reads what Decide needs to refuse going back: the revision of the
// entry of what runs and, when the offer is older, whether what runs is
// held. Only an offer that would be applied is worth the reads.
func (a *Agent) age(ctx context.Context, module string, want bus.Want, running Running, offer *Offer) error {
	if !offer.Found || offer.Unverified != "" || offer.Digest != want.Digest || running.Fingerprint == "" ||
		want.Fingerprint == running.Fingerprint && want.Digest == running.Digest {
		return nil
	}
	var err error
	if offer.Runs, err = a.Bus.CompositionRevision(ctx, a.Node, module, running.Fingerprint, running.Digest); err != nil || offer.Runs <= offer.Revision {
		return err
	}
	offer.RunsHeld, err = a.Bus.Held(ctx, module, running.Fingerprint)
	return err
}

// owner is who the bus proves owns the want (ProvenOwner). Only a want that
// would go back past what runs, with no hold sending it there, turns on its
// owner, so only then is the seal read.
func (a *Agent) owner(ctx context.Context, module string, want bus.Want, offer Offer) (bus.Owner, error) {
	if want.Owner == bus.OwnerRules || offer.Runs <= offer.Revision || offer.RunsHeld {
		return want.Owner, nil
	}
	seal, _, err := a.Bus.ReadSeal(ctx, a.Node, module)
	if err != nil {
		return "", err
	}
	return ProvenOwner(want, seal), nil
}

// apply does what Decide says of one module's want. Until the new version
// runs, the have names what runs and the want beside it as the attempt.
func (a *Agent) apply(ctx context.Context, module string, want bus.Want) {
	running, _, err := a.Layout.Current(module)
	var back RolledBack
	if err == nil {
		back, err = a.Layout.RolledBack(module)
	}
	tries := bus.Attempt{Fingerprint: want.Fingerprint, Digest: want.Digest}
	if err != nil {
		a.attemptFailed(ctx, module, running, tries, err)
		return
	}
	var offer Offer
	var doc composition.Document
	entry, envelope, revision, err := a.Bus.ReadCompositionAt(ctx, a.Node, module, want.Fingerprint)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil && entry.Digest == "":
		a.unanswered.Store(true)
		a.Logger.Warn("the bus did not answer", slog.String("module", module), slog.String("error", err.Error()))
		return
	case err != nil:
		offer = Offer{Found: true, Digest: entry.Digest, Unverified: err.Error()}
	default:
		offer = Offer{Found: true, Digest: entry.Digest, Revision: revision}
		if doc, err = a.Trust.OpenFor(ctx, envelope, a.Node, module, want.Fingerprint); err != nil {
			offer.Unverified = err.Error()
		}
	}
	err = a.age(ctx, module, want, running, &offer)
	proven := want
	if err == nil {
		proven.Owner, err = a.owner(ctx, module, want, offer)
	}
	if err != nil {
		a.unanswered.Store(true)
		a.Logger.Warn("the bus did not answer", slog.String("module", module), slog.String("error", err.Error()))
		return
	}
	action, why := Decide(proven, running, offer, back)
	// The want's time is part of the attempt: a want written again (a put)
	// tries again what failed or was rolled back from.
	attempt := want.Fingerprint + " " + want.Digest + " " + offer.Digest + " " + want.At.String()
	a.mu.Lock()
	tried := a.attempts[module] == attempt
	a.mu.Unlock()
	switch {
	case action == ActionNone || tried:
		return
	case action == ActionRefuse:
		a.remember(module, attempt)
		a.Logger.Warn("refused", slog.String("module", module), slog.String("fingerprint", want.Fingerprint), slog.String("why", why))
		a.writeHave(ctx, module, a.about(module, running, bus.PhaseRefused, tries, why))
		return
	}
	a.remember(module, attempt)
	a.writeHave(ctx, module, a.about(module, running, bus.PhaseApplying, tries, ""))
	if doc.HoldsData {
		if a.Backup == nil {
			a.attemptFailed(ctx, module, running, tries, errors.New("the module holds data and no backup seat answers: not applied"))
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
				a.unanswered.Store(true)
			}
			a.attemptFailed(ctx, module, running, tries, fmt.Errorf("no backup of %s, so not applied: %w", doc.DataDir, err))
			return
		}
	}
	dir, err := a.Layout.Install(doc, want.Digest)
	if err != nil {
		a.attemptFailed(ctx, module, running, tries, err)
		return
	}
	// From here what ran before stops: the have says so, not that it
	// still runs healthy.
	a.writeHave(ctx, module, bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: bus.PhaseApplying,
		Health: bus.Unknown, Attempt: tries, Reason: "stopping what runs for " + want.Fingerprint})
	a.stopRun(module)
	if err := a.Layout.Switch(module, want.Digest); err != nil {
		a.attemptFailed(ctx, module, running, tries, err)
		a.resumeModule(ctx, module) // what current still names runs again
		return
	}
	a.bringUp(ctx, module, Running{Fingerprint: want.Fingerprint, Digest: want.Digest}, doc, dir, true, nil)
}

// about is a have of what runs, with an attempt beside it.
func (a *Agent) about(module string, running Running, phase bus.Phase, tries bus.Attempt, why string) bus.Have {
	return bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: phase,
		Health: a.health(module, running), Reason: clip(why), Attempt: tries}
}

// attemptFailed says an attempt was not applied, what ran before running on.
func (a *Agent) attemptFailed(ctx context.Context, module string, running Running, tries bus.Attempt, err error) {
	a.Logger.Error("apply failed", slog.String("module", module), slog.String("fingerprint", tries.Fingerprint), slog.String("error", err.Error()))
	a.writeHave(ctx, module, a.about(module, running, bus.PhaseFailed, tries, err.Error()))
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

// health is the last health written of running, the version that runs of
// module; unknown when none was.
func (a *Agent) health(module string, running Running) bus.Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h, ok := a.haves[module]; ok && running.Fingerprint != "" && h.Fingerprint == running.Fingerprint && h.Digest == running.Digest {
		return h.Health
	}
	return bus.Unknown
}

// writeHave writes module's have now; its reason, where an attempt is
// beside it, is kept for the supervisor to say again once what runs is
// healthy again.
func (a *Agent) writeHave(ctx context.Context, module string, h bus.Have) {
	a.writing.Lock()
	defer a.writing.Unlock()
	a.mu.Lock()
	a.why[module] = ""
	if h.Attempt != (bus.Attempt{}) {
		a.why[module] = h.Reason
	}
	a.mu.Unlock()
	a.put(ctx, module, h)
}

// put writes h as module's have; the caller holds writing. Its Since
// stays while what it says does not change, so a heartbeat is no
// progress to the view.
func (a *Agent) put(ctx context.Context, module string, h bus.Have) {
	h.At = a.Now().UTC()
	a.mu.Lock()
	if before, ok := a.haves[module]; ok && before.Says(h) && !before.Since.IsZero() {
		h.Since = before.Since
	} else {
		h.Since = h.At
	}
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
		a.unanswered.Store(true)
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
