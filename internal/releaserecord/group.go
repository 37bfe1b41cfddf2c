package releaserecord

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
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

// Newer reports whether a is a later release than b of one service, by
// what the facts say rather than by when they arrived: a rollback is later
// than the release it undoes; then the later generation of the one object
// carrying both (a Rollout, a Flux unit's source); then the later start of
// Argo CD's sync; and only when the facts name no common order, the one
// first seen later.
func Newer(a, b Record) bool {
	switch {
	case a.Kind == KindRollback && a.RollbackOf == b.ReleaseID:
		return true
	case b.Kind == KindRollback && b.RollbackOf == a.ReleaseID:
		return false
	}
	if ga, gb, ok := sameObject(a.ObjectGeneration, b.ObjectGeneration); ok && ga != gb {
		return ga > gb
	}
	if !a.SyncStartedAt.IsZero() && !b.SyncStartedAt.IsZero() && !a.SyncStartedAt.Equal(b.SyncStartedAt) {
		return a.SyncStartedAt.After(b.SyncStartedAt)
	}
	return a.MergedAt.After(b.MergedAt)
}

// objectGenerationPattern is what ObjectGenerationOf writes, as the
// record's schema holds it: <kind>/<namespace>/<name>[/<uid>]=<generation>.
var objectGenerationPattern = regexp.MustCompile(`^[A-Za-z]{1,63}/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?` +
	`(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?=[0-9]{1,19}$`)

// ObjectGenerationOf names the generation of the object that carries a
// release: <kind>/<namespace>/<name>[/<uid>]=<generation>. The uid, where
// the source names it, keeps an object deleted and made again (its
// generation back at 1) from passing for an older one. "" when the parts
// do not form it: the fact then orders nothing.
func ObjectGenerationOf(kind, namespace, name, uid, generation string) string {
	object := kind + "/" + namespace + "/" + name
	if uid != "" {
		object += "/" + uid
	}
	if g := object + "=" + generation; objectGenerationPattern.MatchString(g) {
		return g
	}
	return ""
}

// sameObject reads two object generations of one object as their
// generations; ok is false when they name different objects or either is
// not of that form.
func sameObject(a, b string) (uint64, uint64, bool) {
	objA, genA, okA := strings.Cut(a, "=")
	objB, genB, okB := strings.Cut(b, "=")
	if !okA || !okB || objA != objB {
		return 0, 0, false
	}
	na, errA := strconv.ParseUint(genA, 10, 64)
	nb, errB := strconv.ParseUint(genB, 10, 64)
	return na, nb, errA == nil && errB == nil
}

// newest is the release of records no other is Newer than, scanning in
// order; ok is false for none.
func newest(records []Record) (Record, bool) {
	if len(records) == 0 {
		return Record{}, false
	}
	best := records[0]
	for _, r := range records[1:] {
		if Newer(r, best) {
			best = r
		}
	}
	return best, true
}

// NewerThan names the newest of records of rec's service that is Newer
// than rec, or "" when none is: a release first seen after it starts
// superseded by it.
func NewerThan(rec Record, records []Record) string {
	var later []Record
	for _, r := range records {
		if r.ReleaseID != rec.ReleaseID && SameService(r, rec) && Newer(r, rec) {
			later = append(later, r)
		}
	}
	n, _ := newest(later)
	return n.ReleaseID
}

// InFlight picks, among one service's records, the release a fact that
// names no release id is about (an Argo CD sync failure): the one at
// revision when one in flight is, else the newest in flight (Newer). ok is
// false when none is in flight.
func InFlight(records []Record, revision string) (Record, bool) {
	var flying, atRevision []Record
	for _, r := range records {
		switch {
		case !r.State.inFlight():
		case revision != "" && r.GitRevision == revision:
			atRevision = append(atRevision, r)
		default:
			flying = append(flying, r)
		}
	}
	if r, ok := newest(atRevision); ok {
		return r, true
	}
	return newest(flying)
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
