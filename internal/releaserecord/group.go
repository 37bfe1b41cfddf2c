package releaserecord

import (
	"slices"
	"sort"
	"time"
)

// The rules between the releases of one app, env and cluster: a newer
// release supersedes the live ones before it, and a healthy rollback marks
// the release it undoes. Like Reduce they are pure.

// SameService reports whether two records are releases of one app in one
// env and cluster: only such releases supersede or roll back each other.
func SameService(a, b Record) bool {
	return a.App == b.App && a.Env == b.Env && a.Cluster == b.Cluster
}

// Supersede is what a newer release's first fact does to an older record of
// the same service: a live one becomes superseded by it, keeping healthyAt;
// its later facts send nothing.
func Supersede(older Record, by string, now time.Time) Result {
	if !older.State.live() || older.ReleaseID == by {
		return ignored(older, "not live")
	}
	next := enter(older, StateSuperseded, now)
	next.SupersededBy = by
	next.LastFactAt, next.LastFactPhase = now, "Superseded"
	return Result{Record: next, Changed: true, Why: "superseded by " + by}
}

// MarkRolledBack is what a rollback that turned healthy does to the release
// it names in rollbackOf: any state that ran becomes rolled-back, once. The
// rollback's own success event is the one rolled-back event.
func MarkRolledBack(target, rollback Record, now time.Time) Result {
	switch {
	case rollback.Kind != KindRollback || rollback.RollbackOf != target.ReleaseID:
		return ignored(target, "not the release the rollback names")
	case !SameService(target, rollback):
		return ignored(target, "a rollback marks only a release of its own app, env and cluster")
	case !target.State.ran():
		return ignored(target, "the release never ran, or was rolled back already")
	}
	next := enter(target, StateRolledBack, now)
	next.RolledBackBy = rollback.ReleaseID
	next.LastFactAt, next.LastFactPhase = now, "RolledBack"
	return Result{Record: next, Changed: true, Why: "rolled back by " + rollback.ReleaseID}
}

// InFlight picks, among one service's records, the release a fact that
// names no release id is about (an Argo CD sync failure): the newest in
// flight, preferring one at revision when there is such. ok is false when
// none is in flight.
func InFlight(records []Record, revision string) (Record, bool) {
	var flying []Record
	for _, r := range records {
		if r.State.inFlight() {
			flying = append(flying, r)
		}
	}
	if len(flying) == 0 {
		return Record{}, false
	}
	sort.SliceStable(flying, func(i, j int) bool { return flying[i].MergedAt.After(flying[j].MergedAt) })
	for _, r := range flying {
		if revision != "" && r.GitRevision == revision {
			return r, true
		}
	}
	return flying[0], true
}

// Mode is how the service sends events: emit sends them to the sink,
// shadow only logs them.
type Mode string

// The two modes.
const (
	ModeEmit   Mode = "emit"
	ModeShadow Mode = "shadow"
)

// Owed is the events a mode still owes of a record: those the reducer made
// due and every event the other mode's set holds that this mode's does not,
// so flipping shadow to emit sends the history once. In the order the
// release lived them.
func Owed(rec Record, mode Mode, due []Event) []Event {
	sent := rec.EmittedLive
	if mode == ModeShadow {
		sent = rec.EmittedShadow
	}
	keys := append(append(slices.Clone(rec.EmittedLive), rec.EmittedShadow...), keysOf(due)...)
	var out []Event
	for _, k := range keys {
		e, ok := eventOf(k)
		if ok && !slices.Contains(sent, k) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rank() < out[j].rank() })
	return out
}

// MarkSent is the record with events added to mode's sent set.
func MarkSent(rec Record, mode Mode, events []Event) Record {
	if len(events) == 0 {
		return rec
	}
	into := &rec.EmittedLive
	if mode == ModeShadow {
		into = &rec.EmittedShadow
	}
	set := append(slices.Clone(*into), keysOf(events)...)
	sort.Strings(set)
	*into = slices.Compact(set)
	return rec
}

func keysOf(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Key()
	}
	return out
}
