package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// resume starts each module's current version from disk, not the bus.
func (a *Agent) resume(ctx context.Context) {
	modules, err := a.Layout.Modules()
	if err != nil {
		a.Logger.Error("cannot read what runs", slog.String("root", a.Layout.Root), slog.String("error", err.Error()))
		return
	}
	for _, m := range modules {
		a.resumeModule(ctx, m)
	}
}

// resumeModule starts the version current names of module, if any.
func (a *Agent) resumeModule(ctx context.Context, module string) {
	running, dir, err := a.Layout.Current(module)
	if err != nil || running.Fingerprint == "" {
		return
	}
	doc, err := readDocument(dir)
	if err != nil {
		a.Logger.Error("cannot start what runs", slog.String("module", module), slog.String("error", err.Error()))
		a.writeHave(ctx, module, bus.Have{Fingerprint: running.Fingerprint, Digest: running.Digest, Phase: bus.PhaseFailed,
			Health: bus.Unhealthy, Reason: clip(err.Error())})
		return
	}
	// What runs as current names goes on running: an agent's restart
	// restarts nothing that did not change.
	if p, ok := a.adopt(dir); ok {
		a.Logger.Info("runs on", slog.String("module", module), slog.String("fingerprint", running.Fingerprint), slog.Int("pid", p.Pid()))
		a.bringUp(ctx, module, running, doc, dir, false, p)
		return
	}
	a.stopStale(dir)
	a.bringUp(ctx, module, running, doc, dir, false, nil)
}

// adopt is the process an earlier agent started from dir, when it runs.
func (a *Agent) adopt(dir string) (*Process, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile)) //nolint:gosec // a version's folder under MESH_ROOT
	if err != nil {
		return nil, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, false
	}
	return Adopt(pid, dir, adoptedPoll)
}

// adoptedPoll is how often the agent looks whether a process it did not
// start still runs.
const adoptedPoll = 250 * time.Millisecond

// spawn starts a version's command from its folder, a module that holds
// data finding it where every version of it does.
func (a *Agent) spawn(module string, doc composition.Document, dir string) (*Process, error) {
	command := doc.Command
	if doc.HoldsData {
		data, err := a.Layout.DataDir(module, doc.DataDir)
		if err == nil {
			err = os.MkdirAll(data, 0o700)
		}
		if err != nil {
			return nil, err
		}
		command.Env = maps.Clone(command.Env)
		if command.Env == nil {
			command.Env = map[string]string{}
		}
		command.Env["MESH_DATA_DIR"] = data
	}
	p, err := StartProcess(dir, command, a.Output)
	if err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(p.Pid())), 0o600)
	return p, nil
}

// bringUp starts version, which current names, and gives it HealthWithin
// to pass its check. One that passes is the version that last ran healthy;
// one that does not goes back to that version when it is another, as a
// deploy that cannot prove itself must not stay. Either way what runs is
// supervised from then on. fresh is an apply's: a version that passes
// then ends any earlier rollback. p, when not nil, is the version's
// process already running, adopted from an earlier agent.
func (a *Agent) bringUp(ctx context.Context, module string, version Running, doc composition.Document, dir string, fresh bool, p *Process) {
	var err error
	if p == nil {
		p, err = a.spawn(module, doc, dir)
	}
	if err == nil && fresh {
		a.writeHave(ctx, module, bus.Have{Fingerprint: version.Fingerprint, Digest: version.Digest, Phase: bus.PhaseApplying, Health: bus.Unknown,
			Attempt: bus.Attempt{Fingerprint: version.Fingerprint, Digest: version.Digest}, Reason: fmt.Sprintf("started; its check has %s to pass", a.HealthWithin)})
	}
	if err == nil {
		err = WaitHealthy(ctx, p, doc.Health, dir, a.HealthWithin)
	}
	if ctx.Err() != nil {
		a.supervise(ctx, module, version, doc, dir, p, false)
		return
	}
	if err == nil {
		a.markHealthy(module, version)
		if back, _ := a.Layout.RolledBack(module); fresh || back.Running == version {
			if err := a.Layout.ClearRolledBack(module); err != nil {
				a.Logger.Warn("cannot clear the rollback", slog.String("module", module), slog.String("error", err.Error()))
			}
		}
		a.Logger.Info("applied", slog.String("module", module), slog.String("fingerprint", version.Fingerprint), slog.String("health", string(bus.Healthy)))
		a.writeHave(ctx, module, a.runningHave(module, version, bus.Healthy, "", false))
		a.supervise(ctx, module, version, doc, dir, p, true)
		if fresh {
			a.collect(module)
		}
		return
	}
	if prev, perr := a.Layout.Healthy(module); perr == nil && prev.Digest != "" && prev != version && a.Layout.Has(module, prev.Digest) {
		a.rollBack(ctx, module, version, prev, p, err)
		return
	}
	ended := p == nil || exited(p)
	a.Logger.Warn("runs unhealthy", slog.String("module", module), slog.String("fingerprint", version.Fingerprint), slog.String("reason", err.Error()))
	a.writeHave(ctx, module, a.runningHave(module, version, bus.Unhealthy, err.Error(), ended))
	a.supervise(ctx, module, version, doc, dir, p, false)
}

// rollBack stops failed, which did not pass its check in time, and runs
// prev again, the version that last ran healthy. The rollback is recorded
// before current moves, so an agent that crashes between the two still
// knows the version it went back from.
func (a *Agent) rollBack(ctx context.Context, module string, failed, prev Running, p *Process, proof error) {
	if p != nil {
		p.Stop(a.Grace)
	}
	why := fmt.Sprintf("%s did not pass its health within %s (%v); back on %s, which last ran healthy",
		failed.Fingerprint, a.HealthWithin, proof, prev.Fingerprint)
	a.Logger.Warn("rolled back", slog.String("module", module), slog.String("fingerprint", failed.Fingerprint), slog.String("to", prev.Fingerprint), slog.String("reason", proof.Error()))
	tries := bus.Attempt{Fingerprint: failed.Fingerprint, Digest: failed.Digest}
	err := a.Layout.SetRolledBack(module, RolledBack{Running: failed, Reason: clip(why), At: a.Now().UTC()})
	if err == nil {
		err = a.Layout.Switch(module, prev.Digest)
	}
	var dir string
	var doc composition.Document
	if err == nil {
		_, dir, err = a.Layout.Current(module)
	}
	if err == nil {
		doc, err = readDocument(dir)
	}
	if err != nil {
		a.Logger.Error("cannot roll back", slog.String("module", module), slog.String("error", err.Error()))
		a.writeHave(ctx, module, bus.Have{Phase: bus.PhaseFailed, Health: bus.Unhealthy, Attempt: tries,
			Reason: clip(why + "; the rollback failed: " + err.Error())})
		return
	}
	np, err := a.spawn(module, doc, dir)
	if err == nil {
		err = WaitHealthy(ctx, np, doc.Health, dir, a.HealthWithin)
	}
	have := a.runningHave(module, prev, bus.Healthy, "", false)
	if err != nil {
		have = a.runningHave(module, prev, bus.Unhealthy, err.Error(), np == nil || exited(np))
		have.Phase, have.Attempt = bus.PhaseRolledBack, tries
	}
	a.writeHave(ctx, module, have)
	a.supervise(ctx, module, prev, doc, dir, np, err == nil)
	a.collect(module)
}

// collect removes the versions of module past the Keep newest, sparing
// what runs and what last ran healthy.
func (a *Agent) collect(module string) {
	gone, err := a.Layout.Collect(module, a.Keep)
	if err != nil {
		a.Logger.Warn("old versions not removed", slog.String("module", module), slog.String("error", err.Error()))
		return
	}
	if len(gone) > 0 {
		a.Logger.Info("old versions removed", slog.String("module", module), slog.Any("versions", gone))
	}
}

// runningHave is the have of version running: rolled back, with the
// version it went back from beside it, while that rollback stands.
func (a *Agent) runningHave(module string, version Running, health bus.Health, reason string, ended bool) bus.Have {
	h := bus.Have{Fingerprint: version.Fingerprint, Digest: version.Digest, Phase: bus.PhaseRunning, Health: health, Reason: clip(reason)}
	if ended {
		h.Phase = bus.PhaseFailed
	}
	if back, err := a.Layout.RolledBack(module); err == nil && back.Digest != "" && back.Running != version {
		h.Phase, h.Attempt = bus.PhaseRolledBack, bus.Attempt{Fingerprint: back.Fingerprint, Digest: back.Digest}
		if health == bus.Healthy {
			h.Reason = back.Reason
		}
	}
	return h
}

func (a *Agent) markHealthy(module string, version Running) {
	if err := a.Layout.MarkHealthy(module, version); err != nil {
		a.Logger.Warn("cannot mark the version healthy", slog.String("module", module), slog.String("error", err.Error()))
	}
}

func exited(p *Process) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// run is one module's version running under the agent's supervision.
type run struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	proc   *Process // nil while it waits to be started again
}

func (r *run) process() *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *run) set(p *Process) {
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

// stop ends the supervision, then the process.
func (r *run) stop(grace time.Duration) {
	r.cancel()
	<-r.done
	if p := r.process(); p != nil {
		p.Stop(grace)
	}
}

// stopRun stops what runs of module.
func (a *Agent) stopRun(module string) {
	a.mu.Lock()
	r := a.runs[module]
	delete(a.runs, module)
	a.mu.Unlock()
	if r != nil {
		r.stop(a.Grace)
	}
}

// supervise watches version of module from now until it is stopped or the
// agent ends: its check every interval of the check, the have amended
// when the health turns, and its process started again with the Restart
// backoff when it ends in failure (as systemd's Restart=on-failure does;
// a clean exit stays ended). p is nil when it did not start.
func (a *Agent) supervise(ctx context.Context, module string, version Running, doc composition.Document, dir string, p *Process, healthy bool) {
	ctx, cancel := context.WithCancel(ctx)
	r := &run{cancel: cancel, done: make(chan struct{}), proc: p}
	a.mu.Lock()
	a.runs[module] = r
	a.mu.Unlock()
	go a.watchOver(ctx, r, module, version, doc, dir, healthy)
}

// told is what a supervisor's have last reported of its process.
type told int

const (
	toldHealthy told = iota
	toldUnhealthy
	toldEnded
)

func (a *Agent) watchOver(ctx context.Context, r *run, module string, version Running, doc composition.Document, dir string, healthy bool) {
	defer close(r.done)
	tick := time.NewTicker(time.Duration(doc.Health.Interval))
	defer tick.Stop()
	// reported is what the have last reported of the process: healthy,
	// unhealthy, or ended.
	reported := toldUnhealthy
	if healthy {
		reported = toldHealthy
	}
	crashes := 0
	for {
		p := r.process()
		gone := closedChan
		if p != nil {
			gone = p.Exited()
		}
		select {
		case <-ctx.Done():
			return
		case <-gone:
			why := "it did not start"
			if p != nil {
				why = "the process ended: " + p.Result()
				if p.Clean() {
					a.Logger.Warn("ended cleanly, not started again", slog.String("module", module), slog.String("fingerprint", version.Fingerprint))
					a.amend(ctx, module, version, bus.Unhealthy, why+"; a clean exit is not started again", true)
					<-ctx.Done()
					return
				}
			}
			crashes++
			wait := a.Restart.After(crashes)
			a.Logger.Warn("ended, started again after a wait", slog.String("module", module), slog.String("fingerprint", version.Fingerprint),
				slog.String("why", why), slog.Duration("wait", wait))
			a.amend(ctx, module, version, bus.Unhealthy, fmt.Sprintf("%s; started again in %s", why, wait), true)
			reported = toldEnded
			r.set(nil)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			np, err := a.spawn(module, doc, dir)
			if err != nil {
				a.Logger.Error("cannot start again", slog.String("module", module), slog.String("error", err.Error()))
				continue
			}
			r.set(np)
		case <-tick.C:
			err := Check(ctx, doc.Health, dir)
			if ctx.Err() != nil {
				return
			}
			if p == nil || exited(p) {
				continue // the next turn says it ended
			}
			switch {
			case err == nil && reported != toldHealthy:
				crashes = 0
				a.markHealthy(module, version)
				a.amend(ctx, module, version, bus.Healthy, "", false)
				reported = toldHealthy
			case err == nil:
				crashes = 0
			case reported != toldUnhealthy:
				a.amend(ctx, module, version, bus.Unhealthy, err.Error(), false)
				reported = toldUnhealthy
			}
		}
	}
}

// closedChan stands for the end of a process that is not there.
var closedChan = func() <-chan struct{} { c := make(chan struct{}); close(c); return c }()

// amend changes the health of the have of version, when the have still
// names it: without an attempt beside it the phase follows (running, or
// failed when its process ended); with one, the attempt and its phase
// stand and only the health and, while unhealthy, the reason change.
func (a *Agent) amend(ctx context.Context, module string, version Running, health bus.Health, reason string, ended bool) {
	a.writing.Lock()
	defer a.writing.Unlock()
	a.mu.Lock()
	h, ok := a.haves[module]
	why := a.why[module]
	a.mu.Unlock()
	if !ok || h.Fingerprint != version.Fingerprint || h.Digest != version.Digest {
		return
	}
	next := h
	next.Health = health
	switch {
	case h.Attempt == bus.Attempt{} && ended:
		next.Phase, next.Reason = bus.PhaseFailed, reason
	case h.Attempt == bus.Attempt{}:
		next.Phase, next.Reason = bus.PhaseRunning, reason
	case health == bus.Healthy:
		next.Reason = why
	default:
		next.Reason = reason
	}
	next.Reason = clip(next.Reason)
	if next == h {
		return
	}
	a.put(ctx, module, next)
}
