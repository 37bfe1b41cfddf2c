package releaserecord

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Phase is what a fact says of a release.
type Phase string

// The phases a fact carries. Merged starts a record; the others move it.
const (
	PhaseMerged      Phase = "Merged"
	PhaseProgressing Phase = "Progressing"
	PhasePaused      Phase = "Paused"
	PhaseHealthy     Phase = "Healthy"
	PhaseDegraded    Phase = "Degraded"
	PhaseSyncFailed  Phase = "SyncFailed"
	// PhaseHeartbeat says only that the release is there, with its pod
	// hash: it changes nothing but drift.
	PhaseHeartbeat Phase = "Heartbeat"
	// PhaseHeld says whether the Release Gate holds the release, and why
	// (Fact.Held): it changes the record's held alone.
	PhaseHeld Phase = "Held"
)

// Fact is one thing a source saw of a release.
type Fact struct {
	// Release names the release; a Merged fact's fills the new record.
	Release Release
	Phase   Phase
	// Abort is Argo Rollouts' abort flag, or a Canary Flagger failed: a
	// Degraded release with it set was aborted.
	Abort bool
	// PodHash is the pod hash the release runs; "" when the source names
	// none.
	PodHash string
	// Message is the source's words: the sync failure's, the degradation's.
	Message string
	// At is when the source says the fact happened; zero when it does not
	// say. A Degraded fact from before the release was merged is the
	// release before's.
	At time.Time
	// HealthyBefore is true when another release of the same app, env and
	// cluster has turned healthy: the adapter reads it from the records, and
	// it makes a healthy release an upgrade rather than a first deploy.
	HealthyBefore bool
	// Order is where the fact places its release among its service's.
	Order Order
	// Held is a PhaseHeld fact's word from the gate: why it holds the
	// release, "" when it holds it no longer.
	Held string
	// Newer names the newest recorded release of the same service that is
	// newer than this one (Newer); the adapter reads it from the records
	// before a release's first fact, whose record then starts superseded.
	Newer string
}

// Order is what a fact says of where its release stands among its
// service's, so that a late notification of an older release does not pass
// for a newer one. Zero when the fact says nothing.
type Order struct {
	// SyncStartedAt is when Argo CD began the sync naming the release.
	SyncStartedAt time.Time
	// ObjectGeneration is the metadata.generation of the object that
	// carries the release (an Argo Rollout, a Flux unit's OCIRepository),
	// as ObjectGenerationOf writes it: a later release of one object
	// changes its spec, so it is a later generation of it.
	ObjectGeneration string
}

// EventType is a release event.
type EventType string

// The events. Deployed, Upgraded and RolledBack are CDEvents' service
// events; Deploying and Failed have no CDEvent and go out as custom events.
const (
	EventDeploying  EventType = "deploying"
	EventDeployed   EventType = "deployed"
	EventUpgraded   EventType = "upgraded"
	EventRolledBack EventType = "rolledback"
	EventFailed     EventType = "failed"
)

// Event is a release event due. Its Key is the type and, for a failure,
// the outcome (failed.aborted): the sent sets hold keys, and the event's id
// is a function of the release id and the key.
type Event struct {
	Type EventType
	// Outcome is a failure's: sync-failed, aborted or degraded; "" else.
	Outcome string
}

// Key is the event as the sent sets hold it.
func (e Event) Key() string {
	if e.Outcome == "" {
		return string(e.Type)
	}
	return string(e.Type) + "." + e.Outcome
}

// eventOf reads a key back; ok is false for a key of no event.
func eventOf(key string) (Event, bool) {
	t, outcome, _ := strings.Cut(key, ".")
	e := Event{Type: EventType(t), Outcome: outcome}
	return e, e.rank() >= 0 && e.Key() == key
}

// rank orders events as a release lives them: deploying, then a failure,
// then success. -1 is no event.
func (e Event) rank() int {
	switch {
	case e.Type == EventDeploying && e.Outcome == "":
		return 0
	case e.Type == EventFailed && e.Outcome == string(StateSyncFailed):
		return 1
	case e.Type == EventFailed && (e.Outcome == string(StateAborted) || e.Outcome == string(StateDegraded)):
		return 2
	case (e.Type == EventDeployed || e.Type == EventUpgraded || e.Type == EventRolledBack) && e.Outcome == "":
		return 3
	}
	return -1
}

// Drift is a change a release was not released with: a ReleaseDrift
// Kubernetes Event on the record, never a CDEvent.
type Drift struct {
	Message string
}

// Result is what one fact does to one record.
type Result struct {
	// Record is the record after the fact; Changed is false when it is the
	// record before, so nothing is written.
	Record  Record
	Changed bool
	// Events are the events the fact makes due that no sent set holds, in
	// the order the release lived them.
	Events []Event
	// Drift is set when the fact shows a drift not recorded before.
	Drift *Drift
	// Why says what the fact did, in words, for the answer and the log.
	Why string
}

// Reduce is the reducer: what a fact does to a record at now. It is a pure
// function of its arguments; the record is the one the fact's release id
// names, or none (a zero Record) when there is none yet.
func Reduce(rec Record, f Fact, now time.Time) Result {
	if !rec.Exists() {
		return start(f, now)
	}
	switch rec.State {
	case StateSuperseded:
		return ignored(rec, "the release was superseded by "+rec.SupersededBy)
	case StateRolledBack:
		return ignored(rec, "the release was rolled back by "+rec.RolledBackBy)
	case StateClosed:
		return ignored(rec, "the release is closed")
	default:
	}
	next, learnt := learn(rec, f)
	if f.Phase == PhaseMerged {
		if len(learnt) == 0 {
			return ignored(rec, "the release is already recorded")
		}
		// What a sync names often comes after the release was first seen:
		// kept once known, never moved, and no fact of the release's life.
		return Result{Record: next, Changed: true, Why: "learnt its " + strings.Join(learnt, ", ")}
	}
	if f.PodHash != "" && rec.PodHash != "" && f.PodHash != rec.PodHash {
		// The same release running other pods: someone changed it outside
		// the release. The state stands; the drift is said once.
		next.PodHash = f.PodHash
		next.Drift = "the pod hash moved from " + rec.PodHash + " to " + f.PodHash
		return changed(rec, next, f, now, nil, "drift: "+next.Drift, &Drift{Message: next.Drift})
	}
	if f.PodHash != "" {
		next.PodHash = f.PodHash
	}
	switch f.Phase {
	case PhaseProgressing, PhasePaused:
		return progressing(rec, next, f, now)
	case PhaseHealthy:
		return healthy(rec, next, f, now)
	case PhaseDegraded:
		return degraded(rec, next, f, now)
	case PhaseSyncFailed:
		return syncFailed(rec, next, f, now)
	case PhaseHeld:
		return held(rec, next, f, now)
	default: // a heartbeat
		return changed(rec, next, f, now, nil, "nothing new", nil)
	}
}

// start is a release's first fact, whatever it says: facts arrive in no
// set order (a Rollout often moves before its sync is notified), so any
// fact of a release starts its record, merged, and then moves it. A
// release first seen after a newer one of its service starts superseded.
func start(f Fact, now time.Time) Result {
	r, _ := learn(NewRecord(f.Release, now), f)
	r.LastFactAt, r.LastFactPhase = now, string(f.Phase)
	switch {
	case f.Newer != "":
		r = enter(r, StateSuperseded, now)
		r.SupersededBy = f.Newer
		return Result{Record: r, Changed: true, Why: "first seen after the newer " + f.Newer + ": superseded by it"}
	case f.Phase == PhaseMerged:
		return Result{Record: r, Changed: true, Why: "merged"}
	}
	res := Reduce(r, f, now)
	if !res.Changed {
		res.Record = r
	}
	res.Changed, res.Why = true, "merged by its first fact, "+res.Why
	return res
}

// learn fills what a fact names that the record does not know yet: the
// release's image, source and revision, that it is a rollback (until it
// turned healthy as a promote), and its order. A known value never moves,
// but the sync's start keeps the earliest said. mergedAt stays when the
// release was first seen, so that releases the facts cannot order are
// ordered by arrival alone.
func learn(rec Record, f Fact) (Record, []string) {
	next, rel, o := rec, f.Release, f.Order
	var learnt []string
	fill := func(into *string, v, what string) {
		if *into == "" && v != "" {
			*into = v
			learnt = append(learnt, what+" "+v)
		}
	}
	fill(&next.GitRevision, rel.GitRevision, "git revision")
	fill(&next.GitURL, rel.GitURL, "git URL")
	fill(&next.Image, rel.Image, "image")
	fill(&next.Objects, rel.Objects, "objects")
	if next.RollbackOf == "" && rel.RollbackOf != "" && next.HealthyAt.IsZero() {
		next.Kind, next.RollbackReason = KindRollback, rel.RollbackReason
		fill(&next.RollbackOf, rel.RollbackOf, "rollback of")
	}
	fill(&next.ObjectGeneration, o.ObjectGeneration, "object generation")
	if at := o.SyncStartedAt.UTC().Truncate(time.Second); !o.SyncStartedAt.IsZero() && (next.SyncStartedAt.IsZero() || at.Before(next.SyncStartedAt)) {
		next.SyncStartedAt = at
		learnt = append(learnt, "sync start "+at.Format(time.RFC3339))
	}
	return next, learnt
}

func progressing(rec, next Record, f Fact, now time.Time) Result {
	switch {
	case rec.State == StateAborted && f.Abort:
		return changed(rec, next, f, now, nil, "the release is still aborted", nil)
	case rec.State == StateAborted:
		// A retry: the abort flag is clear. Its deploying event was sent.
		next = enter(next, StateProgressing, now)
		return changed(rec, next, f, now, nil, "retried after it was aborted", nil)
	case rec.State.Terminal():
		return changed(rec, next, f, now, nil, string(f.Phase)+" after the release was "+string(rec.State)+": ignored", nil)
	case rec.State == StateProgressing:
		return changed(rec, next, f, now, nil, "still progressing", nil)
	}
	next = enter(next, StateProgressing, now)
	return changed(rec, next, f, now, []Event{{Type: EventDeploying}}, "progressing", nil)
}

func healthy(rec, next Record, f Fact, now time.Time) Result {
	if rec.State == StateHealthy {
		if strings.HasPrefix(rec.Drift, degradedDrift) {
			next.Drift = ""
			return changed(rec, next, f, now, nil, "healthy again after it degraded", nil)
		}
		return changed(rec, next, f, now, nil, "still healthy", nil)
	}
	success := EventDeployed
	switch {
	case rec.Kind == KindRollback:
		success = EventRolledBack
	case f.HealthyBefore:
		success = EventUpgraded
	}
	next = enter(next, StateHealthy, now)
	// What serves is held by no gate: a hold said before is over.
	next.Held = ""
	if next.HealthyAt.IsZero() {
		next.HealthyAt = now
	}
	return changed(rec, next, f, now, []Event{{Type: EventDeploying}, {Type: success}}, "healthy", nil)
}

// degradedDrift opens the drift of a release that degraded after it was
// reported healthy.
const degradedDrift = "degraded after it was healthy"

func degraded(rec, next Record, f Fact, now time.Time) Result {
	if !f.At.IsZero() && f.At.Before(rec.MergedAt) {
		return changed(rec, next, f, now, nil, "a failure from before the release was merged: the release before's", nil)
	}
	switch rec.State {
	case StateHealthy:
		next.Drift = degradedDrift
		if f.Message != "" {
			next.Drift += ": " + oneLine(f.Message)
		}
		if next.Drift == rec.Drift {
			return changed(rec, next, f, now, nil, "still degraded after it was healthy", nil)
		}
		return changed(rec, next, f, now, nil, "drift: "+next.Drift, &Drift{Message: next.Drift})
	case StateAborted, StateDegraded:
		return changed(rec, next, f, now, nil, "still "+string(rec.State), nil)
	default:
	}
	state := StateDegraded
	if f.Abort {
		state = StateAborted
	}
	next = enter(next, state, now)
	if f.Message != "" {
		next.LastError = oneLine(f.Message)
	}
	return changed(rec, next, f, now, []Event{{Type: EventDeploying}, {Type: EventFailed, Outcome: string(state)}}, string(state), nil)
}

func syncFailed(rec, next Record, f Fact, now time.Time) Result {
	if !rec.State.inFlight() {
		return changed(rec, next, f, now, nil, "a sync failure with no release in flight: ignored", nil)
	}
	if rec.State == StateSyncFailed {
		return changed(rec, next, f, now, nil, "still failing to sync", nil)
	}
	next = enter(next, StateSyncFailed, now)
	if next.LastError == "" {
		next.LastError = oneLine(f.Message)
	}
	return changed(rec, next, f, now, []Event{{Type: EventDeploying}, {Type: EventFailed, Outcome: string(StateSyncFailed)}}, "sync failed", nil)
}

// held takes the gate's word on a release: why it holds it, or that it
// holds it no longer. Only a release that does not serve yet is held; the
// gate's word on one that serves, or serves no more, changes nothing.
func held(rec, next Record, f Fact, now time.Time) Result {
	reason := f.Held
	switch {
	case reason != "" && !heldPattern.MatchString(reason):
		return changed(rec, next, f, now, nil, "the gate's word is no reason: ignored", nil)
	case rec.State == StateHealthy || (rec.State == StateDegraded && !rec.HealthyAt.IsZero()):
		return changed(rec, next, f, now, nil, "the gate's word on a release that serves: ignored", nil)
	case reason == "" && rec.Held == "":
		return changed(rec, next, f, now, nil, "not held", nil)
	case reason == rec.Held:
		return changed(rec, next, f, now, nil, "still held: "+reason, nil)
	case reason == "":
		next.Held = ""
		return changed(rec, next, f, now, nil, "held no longer", nil)
	}
	next.Held = reason
	return changed(rec, next, f, now, nil, "held: "+reason, nil)
}

// heldPattern is a reason as the gate names it, and the record's schema
// holds held to.
var heldPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func enter(r Record, s State, now time.Time) Record {
	r.State, r.StateAt = s, now
	return r
}

// changed finishes a fact's result: the events no sent set holds, and the
// last fact stamped only when the record changed otherwise, so a repeat
// writes nothing.
func changed(before, after Record, f Fact, now time.Time, events []Event, why string, drift *Drift) Result {
	sent := append(slices.Clone(before.EmittedLive), before.EmittedShadow...)
	var due []Event
	for _, e := range events {
		if !slices.Contains(sent, e.Key()) {
			due = append(due, e)
		}
	}
	if equal(before, after) && len(due) == 0 {
		return Result{Record: before, Why: why}
	}
	after.LastFactAt, after.LastFactPhase = now, string(f.Phase)
	return Result{Record: after, Changed: true, Events: due, Drift: drift, Why: why}
}

func ignored(rec Record, why string) Result { return Result{Record: rec, Why: why} }

// equal compares records as they are written.
func equal(a, b Record) bool { return maps.Equal(a.Data(), b.Data()) }

// oneLine folds a source's message onto one line of at most 1,024 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = strings.ToValidUTF8(s[:1021], "") + "…"
	}
	return s
}
