package releasehistory

import (
	"cmp"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// LabelStallAlerted remembers on a record the state a ReleaseStalled Event
// was raised for, so a second sweep raises nothing new. The release record
// writes a record's labels whole, so the label goes when the record next
// moves: a later stall of the next state is said again.
const LabelStallAlerted = "delivery.jorisjonkers.dev/stall-alerted"

// StalledReason is the reason of the Kubernetes Event a stall is said as.
const StalledReason = "ReleaseStalled"

// Entry is one record as the sweep lists it: its ConfigMap's name and
// creation time, the stall label, and the record. A legacy record, written
// before records had a state, holds no decoded record and is judged by its
// creation time alone.
type Entry struct {
	Name string
	// Version and UID are the ConfigMap's resourceVersion and uid as listed:
	// the sweep writes and deletes a record only as it was when decided on.
	Version string
	UID     string
	Created time.Time
	// StallAlerted is the LabelStallAlerted value: "" when no stall was said.
	StallAlerted string
	Legacy       bool
	// Unreadable is why a record that does not decode was left out of the
	// plan: it is reported and never deleted. "" for a readable one.
	Unreadable string
	Record     rr.Record
}

// SweepPolicy is the sweep's settings.
type SweepPolicy struct {
	// StallAfter is RELEASE_STALL_MINUTES: how long a merged or progressing
	// release may go with no fact.
	StallAfter time.Duration
	// TTL is RECORD_TTL_DAYS: how long a finished record is kept.
	TTL time.Duration
	// KeepHealthy is KEEP_HEALTHY: the newest records per app, env and
	// cluster that reached healthy, kept whatever their age, as the
	// rollback window.
	KeepHealthy int
}

// Stall is a ReleaseStalled Event due on a record.
type Stall struct {
	Name      string    `json:"record"`
	Version   string    `json:"-"`
	UID       string    `json:"-"`
	ReleaseID string    `json:"releaseId"`
	State     rr.State  `json:"state"`
	Since     time.Time `json:"since"`
}

// Deletion is a record due for deletion, and why.
type Deletion struct {
	Name      string `json:"record"`
	Version   string `json:"-"`
	UID       string `json:"-"`
	ReleaseID string `json:"releaseId,omitempty"`
	Why       string `json:"why"`
}

// SweepPlan is what one sweep does.
type SweepPlan struct {
	Stalls    []Stall
	Deletions []Deletion
}

// PlanSweep decides, from one list of the records, which stall Events to
// raise and which records to delete, in the entries' order.
func PlanSweep(entries []Entry, p SweepPolicy, now time.Time) SweepPlan {
	kept := RollbackWindow(records(entries), p.KeepHealthy)
	var plan SweepPlan
	for _, e := range entries {
		if s, ok := stallOf(e, p, now); ok {
			plan.Stalls = append(plan.Stalls, s)
		}
		if d, ok := deletionOf(e, kept, p, now); ok {
			plan.Deletions = append(plan.Deletions, d)
		}
	}
	return plan
}

func records(entries []Entry) []rr.Record {
	out := make([]rr.Record, 0, len(entries))
	for _, e := range entries {
		if !e.Legacy && e.Unreadable == "" {
			out = append(out, e.Record)
		}
	}
	return out
}

// stalls reports whether a state is one a release can stall in: merged
// (waiting to be applied) or progressing (being analysed).
func stalls(s rr.State) bool { return s == rr.StateMerged || s == rr.StateProgressing }

// LastMoved is when the record last heard of its release: its last fact,
// else when it entered its state, else when it was merged.
func LastMoved(r rr.Record) time.Time {
	return latest(r.LastFactAt, r.StateAt, r.MergedAt)
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func stallOf(e Entry, p SweepPolicy, now time.Time) (Stall, bool) {
	r := e.Record
	if e.Legacy || e.Unreadable != "" || !stalls(r.State) || e.StallAlerted == string(r.State) {
		return Stall{}, false
	}
	since := LastMoved(r)
	if since.IsZero() {
		since = e.Created
	}
	if now.Sub(since) < p.StallAfter {
		return Stall{}, false
	}
	return Stall{Name: e.Name, Version: e.Version, UID: e.UID, ReleaseID: r.ReleaseID, State: r.State, Since: since}, true
}

func deletionOf(e Entry, kept map[string]bool, p SweepPolicy, now time.Time) (Deletion, bool) {
	if e.Unreadable != "" {
		return Deletion{}, false
	}
	if e.Legacy {
		if now.Sub(e.Created) < p.TTL {
			return Deletion{}, false
		}
		return Deletion{Name: e.Name, Version: e.Version, UID: e.UID, Why: "a record with no state, created over the TTL ago"}, true
	}
	r := e.Record
	switch {
	case !r.State.Terminal():
		// merged, progressing and sync-failed are still in flight.
		return Deletion{}, false
	case kept[r.ReleaseID]:
		return Deletion{}, false
	case r.StateAt.IsZero() || now.Sub(r.StateAt) < p.TTL:
		return Deletion{}, false
	}
	return Deletion{Name: e.Name, Version: e.Version, UID: e.UID, ReleaseID: r.ReleaseID, Why: "finished (" + string(r.State) + ") over the TTL ago"}, true
}

// ServiceKey names one app, env and cluster.
type ServiceKey struct{ App, Env, Cluster string }

// KeyOf is a record's service.
func KeyOf(r rr.Record) ServiceKey { return ServiceKey{App: r.App, Env: r.Env, Cluster: r.Cluster} }

// RollbackWindow is the release ids of the newest keep records per app,
// env and cluster that reached healthy, newest by healthyAt.
func RollbackWindow(recs []rr.Record, keep int) map[string]bool {
	out := map[string]bool{}
	for _, group := range healthyByService(recs) {
		for i := 0; i < len(group) && i < keep; i++ {
			out[group[i].ReleaseID] = true
		}
	}
	return out
}

// healthyByService groups the records that reached healthy by service,
// each group newest first (by healthyAt, then release id, so the order is
// total).
func healthyByService(recs []rr.Record) map[ServiceKey][]rr.Record {
	groups := map[ServiceKey][]rr.Record{}
	for _, r := range recs {
		if !r.HealthyAt.IsZero() {
			groups[KeyOf(r)] = append(groups[KeyOf(r)], r)
		}
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b rr.Record) int {
			return cmp.Or(b.HealthyAt.Compare(a.HealthyAt), cmp.Compare(b.ReleaseID, a.ReleaseID))
		})
	}
	return groups
}
