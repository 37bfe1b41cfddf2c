package releasehistory

import (
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// Outcome is how a deployment ended, as the DORA figures count it.
type Outcome string

// A release succeeded when it reached healthy without failing first;
// failed when it was aborted or degraded before healthy (a change
// failure, even if it recovered later); abandoned when it finished
// otherwise (superseded, rolled back or closed before either). One still
// in flight has no outcome yet.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeAbandoned Outcome = "abandoned"
	OutcomeInFlight  Outcome = "in-flight"
)

// Outcomes are the outcomes a finished deployment has, in the order the
// figures list them.
var Outcomes = []Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeAbandoned}

// failedBeforeHealthy reports a change failure: the record is aborted or
// degraded, or it sent a failure event for either. A Degraded after healthy
// is drift: the reducer keeps the state healthy and sends no failure, so it
// is not one.
func failedBeforeHealthy(r rr.Record) bool {
	if r.State == rr.StateAborted || r.State == rr.StateDegraded {
		return true
	}
	for _, key := range slices.Concat(r.EmittedLive, r.EmittedShadow) {
		if key == "failed."+string(rr.StateAborted) || key == "failed."+string(rr.StateDegraded) {
			return true
		}
	}
	return false
}

// OutcomeOf is a record's deployment outcome.
func OutcomeOf(r rr.Record) Outcome {
	switch {
	case failedBeforeHealthy(r):
		return OutcomeFailed
	case !r.HealthyAt.IsZero():
		return OutcomeSucceeded
	case r.State.Terminal():
		return OutcomeAbandoned
	default:
		return OutcomeInFlight
	}
}

// FailedAt is when a change failure happened: its stateAt while the record
// is still aborted or degraded; once a later state has overwritten that,
// its mergedAt, the latest instant the record still proves.
func FailedAt(r rr.Record) time.Time {
	if r.State == rr.StateAborted || r.State == rr.StateDegraded {
		return r.StateAt
	}
	return r.MergedAt
}

// FinishedAt is when a deployment got its outcome: healthy, failed, or its
// last state; zero while in flight.
func FinishedAt(r rr.Record) time.Time {
	switch OutcomeOf(r) {
	case OutcomeFailed:
		return FailedAt(r)
	case OutcomeSucceeded:
		return r.HealthyAt
	case OutcomeAbandoned:
		return r.StateAt
	case OutcomeInFlight:
	}
	return time.Time{}
}

// LeadTime is a release's time from merged to healthy; ok is false for one
// that never reached healthy.
func LeadTime(r rr.Record) (time.Duration, bool) {
	if r.HealthyAt.IsZero() || r.MergedAt.IsZero() || r.HealthyAt.Before(r.MergedAt) {
		return 0, false
	}
	return r.HealthyAt.Sub(r.MergedAt), true
}

// ServiceFigures are one service's DORA figures.
type ServiceFigures struct {
	Deployments    map[Outcome]int
	LeadTimes      []time.Duration
	ChangeFailures int
	// Restores are, per change failure since restored, the time from the
	// failure to the next healthyAt of the service (the failed release's
	// own, if it recovered).
	Restores []time.Duration
}

// Figures computes the DORA figures per service from the records whose
// deployment finished at or after since (zero: every record). They are a
// function of the records alone, so a restart recomputes the same.
func Figures(recs []rr.Record, since time.Time) map[ServiceKey]ServiceFigures {
	out := map[ServiceKey]ServiceFigures{}
	healthy := healthyByService(recs)
	for _, r := range recs {
		o := OutcomeOf(r)
		if o == OutcomeInFlight || FinishedAt(r).Before(since) {
			continue
		}
		k := KeyOf(r)
		f, ok := out[k]
		if !ok {
			f.Deployments = map[Outcome]int{}
		}
		f.Deployments[o]++
		if d, ok := LeadTime(r); ok {
			f.LeadTimes = append(f.LeadTimes, d)
		}
		if o == OutcomeFailed {
			f.ChangeFailures++
			if d, ok := RestoreTime(r, healthy[k]); ok {
				f.Restores = append(f.Restores, d)
			}
		}
		out[k] = f
	}
	return out
}

// RestoreTime is the time from a change failure to the first healthyAt of
// its service after it; ok is false while none is. group is the service's
// records that reached healthy, in any order.
func RestoreTime(failed rr.Record, group []rr.Record) (time.Duration, bool) {
	at := FailedAt(failed)
	var first time.Time
	for _, h := range group {
		if h.HealthyAt.After(at) && (first.IsZero() || h.HealthyAt.Before(first)) {
			first = h.HealthyAt
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(at), true
}
