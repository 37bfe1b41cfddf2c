package releasehistory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Records lists every record the service keeps; the read API, /metrics and
// the page read through it.
type Records interface {
	// Records reads every record that decodes; unreadable counts those that
	// do not (and legacy ones, which hold no record).
	Records(ctx context.Context) (recs []rr.Record, unreadable int, err error)
}

// KubeRecords reads the records with the sweep's own paged list, so the
// two see the same records the same way.
type KubeRecords struct {
	List func(ctx context.Context) ([]Entry, error)
}

// Records keeps the entries that decode. A failed page fails the read: a
// part of the history would show wrong figures, not fewer.
func (k KubeRecords) Records(ctx context.Context) ([]rr.Record, int, error) {
	entries, err := k.List(ctx)
	if err != nil {
		return nil, 0, err
	}
	recs := make([]rr.Record, 0, len(entries))
	unreadable := 0
	for _, e := range entries {
		if e.Legacy || e.Unreadable != "" {
			unreadable++
			continue
		}
		recs = append(recs, e.Record)
	}
	return recs, unreadable, nil
}

// NewestFirst sorts records by when they were merged, newest first; then by
// stateAt and release id, so the order is total.
func NewestFirst(recs []rr.Record) {
	slices.SortFunc(recs, func(a, b rr.Record) int {
		return cmp.Or(b.MergedAt.Compare(a.MergedAt), b.StateAt.Compare(a.StateAt), cmp.Compare(a.ReleaseID, b.ReleaseID))
	})
}

// Filter is a GET /v1/releases query: "" matches any.
type Filter struct {
	App, Env, Cluster string
	State             rr.State
	// Limit is the most releases answered, newest first.
	Limit int
}

// The bounds of limit: an answer of the default is about half a megabyte.
const (
	DefaultLimit = 1000
	MostLimit    = 10000
)

var (
	appPattern   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
	labelPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	states       = []rr.State{rr.StateMerged, rr.StateProgressing, rr.StateSyncFailed, rr.StateHealthy, rr.StateAborted,
		rr.StateDegraded, rr.StateSuperseded, rr.StateRolledBack, rr.StateClosed}
)

// ErrBadQuery marks a query the read API answers 400.
var ErrBadQuery = errors.New("bad query")

// query reads the named parameters of q: each at most once, no other.
func query(q url.Values, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range q {
		if !slices.Contains(names, k) {
			return nil, fmt.Errorf("%w: unknown parameter %q (known: %v)", ErrBadQuery, clip(k), names)
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("%w: %s given %d times", ErrBadQuery, k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

func checkService(p map[string]string, required bool) error {
	for _, name := range []string{"app", "env", "cluster"} {
		v, ok := p[name]
		pattern := labelPattern
		if name == "app" {
			pattern = appPattern
		}
		switch {
		case !ok && required:
			return fmt.Errorf("%w: %s is required", ErrBadQuery, name)
		case ok && !pattern.MatchString(v):
			return fmt.Errorf("%w: %s %q is not a DNS label", ErrBadQuery, name, clip(v))
		}
	}
	return nil
}

// ParseFilter reads GET /v1/releases?app=&env=&cluster=&state=&limit=.
func ParseFilter(q url.Values) (Filter, error) {
	p, err := query(q, "app", "env", "cluster", "state", "limit")
	if err != nil {
		return Filter{}, err
	}
	if err := checkService(p, false); err != nil {
		return Filter{}, err
	}
	f := Filter{App: p["app"], Env: p["env"], Cluster: p["cluster"], State: rr.State(p["state"]), Limit: DefaultLimit}
	if s, ok := p["state"]; ok && !slices.Contains(states, rr.State(s)) {
		return Filter{}, fmt.Errorf("%w: state %q is none of %v", ErrBadQuery, clip(s), states)
	}
	if l, ok := p["limit"]; ok {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MostLimit {
			return Filter{}, fmt.Errorf("%w: limit %q is not a whole number from 1 to %d", ErrBadQuery, clip(l), MostLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// Select is the records f matches, in the order given, at most f.Limit;
// truncated when more matched.
func Select(recs []rr.Record, f Filter) (out []rr.Record, truncated bool) {
	out = []rr.Record{}
	for _, r := range recs {
		if (f.App != "" && r.App != f.App) || (f.Env != "" && r.Env != f.Env) ||
			(f.Cluster != "" && r.Cluster != f.Cluster) || (f.State != "" && r.State != f.State) {
			continue
		}
		if len(out) == f.Limit {
			return out, true
		}
		out = append(out, r)
	}
	return out, false
}

// MostImage bounds the image a rollback question names, as the record's
// schema bounds it.
const MostImage = 512

// ParseEligibility reads GET /v1/rollback-eligible?app=&env=&cluster=&image=:
// all four required.
func ParseEligibility(q url.Values) (ServiceKey, string, error) {
	p, err := query(q, "app", "env", "cluster", "image")
	if err != nil {
		return ServiceKey{}, "", err
	}
	if err := checkService(p, true); err != nil {
		return ServiceKey{}, "", err
	}
	image, ok := p["image"]
	switch {
	case !ok || image == "":
		return ServiceKey{}, "", fmt.Errorf("%w: image is required", ErrBadQuery)
	case len(image) > MostImage:
		return ServiceKey{}, "", fmt.Errorf("%w: image is longer than %d characters", ErrBadQuery, MostImage)
	}
	return ServiceKey{App: p["app"], Env: p["env"], Cluster: p["cluster"]}, image, nil
}

// clip keeps a quoted outside value short enough for one line.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// View is a record as the read API answers it: the record's keys, times as
// RFC 3339 or null, the sent sets as arrays, and what the DORA figures make
// of it.
type View struct {
	ReleaseID      string     `json:"releaseId"`
	Kind           rr.Kind    `json:"kind"`
	RollbackOf     string     `json:"rollbackOf"`
	RollbackReason string     `json:"rollbackReason"`
	App            string     `json:"app"`
	Env            string     `json:"env"`
	Cluster        string     `json:"cluster"`
	Image          string     `json:"image"`
	GitURL         string     `json:"gitUrl"`
	GitRevision    string     `json:"gitRevision"`
	State          rr.State   `json:"state"`
	StateAt        *time.Time `json:"stateAt"`
	MergedAt       *time.Time `json:"mergedAt"`
	LastFactAt     *time.Time `json:"lastFactAt"`
	LastFactPhase  string     `json:"lastFactPhase"`
	PodHash        string     `json:"podHash"`
	Drift          string     `json:"drift"`
	LastError      string     `json:"lastError"`
	EmittedLive    []string   `json:"emittedLive"`
	EmittedShadow  []string   `json:"emittedShadow"`
	SupersededBy   string     `json:"supersededBy"`
	HealthyAt      *time.Time `json:"healthyAt"`
	RolledBackBy   string     `json:"rolledBackBy"`
	// SyncStartedAt and ObjectGeneration order the release among its
	// service's (releaserecord.Newer).
	SyncStartedAt    *time.Time `json:"syncStartedAt"`
	ObjectGeneration string     `json:"objectGeneration"`
	// Held is why the gate holds the release; Objects what it moved.
	Held    string  `json:"held"`
	Objects string  `json:"objects"`
	Outcome Outcome `json:"outcome"`
	// LeadTimeSeconds is merged to healthy; null when never healthy.
	LeadTimeSeconds *float64 `json:"leadTimeSeconds"`
}

func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ViewOf is the read API's view of a record.
func ViewOf(r rr.Record) View {
	v := View{ReleaseID: r.ReleaseID, Kind: r.Kind, RollbackOf: r.RollbackOf, RollbackReason: r.RollbackReason,
		App: r.App, Env: r.Env, Cluster: r.Cluster, Image: r.Image, GitURL: r.GitURL, GitRevision: r.GitRevision,
		State: r.State, StateAt: timeOrNull(r.StateAt), MergedAt: timeOrNull(r.MergedAt), LastFactAt: timeOrNull(r.LastFactAt),
		LastFactPhase: r.LastFactPhase, PodHash: r.PodHash, Drift: r.Drift, LastError: r.LastError,
		EmittedLive: orEmpty(r.EmittedLive), EmittedShadow: orEmpty(r.EmittedShadow), SupersededBy: r.SupersededBy,
		HealthyAt: timeOrNull(r.HealthyAt), RolledBackBy: r.RolledBackBy, SyncStartedAt: timeOrNull(r.SyncStartedAt),
		ObjectGeneration: r.ObjectGeneration, Held: r.Held, Objects: r.Objects, Outcome: OutcomeOf(r)}
	if d, ok := LeadTime(r); ok {
		s := d.Seconds()
		v.LeadTimeSeconds = &s
	}
	return v
}

// ReadVariables are the variables the release record's read side reads,
// beside the service's own.
var ReadVariables = []settings.Variable{
	{Name: "READ_CACHE", Default: "5s", Meaning: "how long one read of the records answers the read API, /metrics and the page (Go duration)"},
	{Name: "OBJECT_LINK", Default: settings.Unset, Meaning: "the address of a cluster object's page on the release page, {cluster}, {kind}, {namespace} and {name} filled; unset, objects are shown as kind/namespace/name and not linked"},
	{Name: "KEEP_HEALTHY", Default: "5", Meaning: "the rollback window /v1/rollback-eligible answers from: the newest records per app, env and cluster that reached healthy"},
}
