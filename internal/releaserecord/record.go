package releaserecord

import (
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// The labels on every record: who manages it, and the app, env and cluster
// its release is of, so one list finds the releases of one service in one
// environment.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "release-record"
	LabelApp       = "delivery.jorisjonkers.dev/app"
	LabelEnv       = "delivery.jorisjonkers.dev/env"
	LabelCluster   = "delivery.jorisjonkers.dev/cluster"
)

// State is where a release is.
type State string

// The states. Terminal ones take no Progressing; sync-failed is not one.
const (
	StateMerged      State = "merged"
	StateProgressing State = "progressing"
	StateSyncFailed  State = "sync-failed"
	StateHealthy     State = "healthy"
	StateAborted     State = "aborted"
	StateDegraded    State = "degraded"
	StateSuperseded  State = "superseded"
	StateRolledBack  State = "rolled-back"
	// StateClosed is a release closed by hand; the reducer never enters it.
	StateClosed State = "closed"
)

// Terminal reports whether a state takes no Progressing.
func (s State) Terminal() bool {
	switch s {
	case StateHealthy, StateAborted, StateDegraded, StateSuperseded, StateRolledBack, StateClosed:
		return true
	default:
		return false
	}
}

// live reports whether a release in this state still speaks for its
// service: a newer release supersedes it.
func (s State) live() bool {
	switch s {
	case StateSuperseded, StateRolledBack, StateClosed:
		return false
	default:
		return true
	}
}

// ran reports whether the release ever reached the cluster, so a rollback
// can undo it.
func (s State) ran() bool {
	switch s {
	case StateMerged, StateRolledBack, StateClosed:
		return false
	default:
		return true
	}
}

// inFlight reports whether the release is still being applied: a sync
// failure is about such a release.
func (s State) inFlight() bool {
	return s == StateMerged || s == StateProgressing || s == StateSyncFailed
}

// Kind is what a release does.
type Kind string

// A promote releases a new version; a rollback returns to an earlier one
// and names the release it undoes.
const (
	KindPromote  Kind = "promote"
	KindRollback Kind = "rollback"
)

// Release is what a release is, as its first fact names it.
type Release struct {
	ID             ReleaseID
	Kind           Kind
	RollbackOf     string
	RollbackReason string
	// Image is the image, or for a Project the OCI artifact with its pinned
	// digest, as <repository>@<digest> or <repository>:<tag>.
	Image       string
	GitURL      string
	GitRevision string
	// Objects are the cluster objects the release moved, as ObjectsOf
	// writes them; "" when the source names none.
	Objects string
}

// Record is one release's record: every key of its ConfigMap. A zero
// ReleaseID is no record.
type Record struct {
	ReleaseID      string
	Kind           Kind
	RollbackOf     string
	RollbackReason string
	App            string
	Env            string
	Cluster        string
	Image          string
	GitURL         string
	GitRevision    string
	State          State
	StateAt        time.Time
	MergedAt       time.Time
	// LastFactAt and LastFactPhase are the last fact that changed the
	// record; a repeat changes nothing, so it writes nothing.
	LastFactAt    time.Time
	LastFactPhase string
	PodHash       string
	// Drift is the last drift seen: the pod hash moving, or a Degraded
	// after Healthy. "" when none.
	Drift     string
	LastError string
	// EmittedLive and EmittedShadow are the keys of the events sent in each
	// mode (Event.Key), so flipping shadow to emit sends the history once.
	EmittedLive   []string
	EmittedShadow []string
	SupersededBy  string
	HealthyAt     time.Time
	RolledBackBy  string
	// SyncStartedAt and ObjectGeneration order the release among its
	// service's (Newer): when Argo CD began its sync, and the generation of
	// the object carrying the release its first fact named. Zero and ""
	// when no fact said.
	SyncStartedAt    time.Time
	ObjectGeneration string
	// Held is why the Release Gate holds the release (its reason, such as
	// analysis-failed), "" while it holds it for no reason a source said.
	Held string
	// Objects are the cluster objects the release moved (its Flux unit,
	// its Canaries), kind/namespace/name joined by commas; "" when no fact
	// named them.
	Objects string
}

// Exists reports whether r is a record rather than none.
func (r Record) Exists() bool { return r.ReleaseID != "" }

// Name is the record's ConfigMap name.
func (r Record) Name() string { return RecordName(r.ReleaseID) }

// Labels are the record's ConfigMap labels.
func (r Record) Labels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelApp: r.App, LabelEnv: r.Env, LabelCluster: r.Cluster}
}

// NewRecord is the record a release's first fact starts.
func NewRecord(rel Release, now time.Time) Record {
	kind := rel.Kind
	if kind == "" {
		kind = KindPromote
	}
	return Record{
		ReleaseID: rel.ID.String(), Kind: kind, RollbackOf: rel.RollbackOf, RollbackReason: rel.RollbackReason,
		App: rel.ID.App(), Env: rel.ID.Env, Cluster: rel.ID.Cluster,
		Image: rel.Image, GitURL: rel.GitURL, GitRevision: rel.GitRevision, Objects: rel.Objects,
		State: StateMerged, StateAt: now, MergedAt: now,
	}
}

// RecordSchema is the JSON Schema of a record's ConfigMap data.
//
//go:embed schema/record.schema.json
var RecordSchema []byte

var recordSchema = jsondoc.MustCompile(RecordSchema, jsondoc.AssertFormats())

// Keys are the record's ConfigMap keys, in the order the schema lists them.
var Keys = []string{"releaseId", "kind", "rollbackOf", "rollbackReason", "app", "env", "cluster", "image",
	"gitUrl", "gitRevision", "state", "stateAt", "mergedAt", "lastFactAt", "lastFactPhase", "podHash", "drift",
	"lastError", "emittedLive", "emittedShadow", "supersededBy", "healthyAt", "rolledBackBy", "syncStartedAt", "objectGeneration",
	"held", "objects"}

// Data is the record as its ConfigMap's data: every key, "" where the
// record holds nothing; times in RFC 3339, UTC; a sent set as its keys,
// sorted, joined by commas.
func (r Record) Data() map[string]string {
	return map[string]string{
		"releaseId": r.ReleaseID, "kind": string(r.Kind), "rollbackOf": r.RollbackOf, "rollbackReason": r.RollbackReason,
		"app": r.App, "env": r.Env, "cluster": r.Cluster, "image": r.Image, "gitUrl": r.GitURL, "gitRevision": r.GitRevision,
		"state": string(r.State), "stateAt": timeString(r.StateAt), "mergedAt": timeString(r.MergedAt),
		"lastFactAt": timeString(r.LastFactAt), "lastFactPhase": r.LastFactPhase, "podHash": r.PodHash, "drift": r.Drift,
		"lastError": r.LastError, "emittedLive": setString(r.EmittedLive), "emittedShadow": setString(r.EmittedShadow),
		"supersededBy": r.SupersededBy, "healthyAt": timeString(r.HealthyAt), "rolledBackBy": r.RolledBackBy,
		"syncStartedAt": timeString(r.SyncStartedAt), "objectGeneration": r.ObjectGeneration,
		"held": r.Held, "objects": r.Objects,
	}
}

// ErrUnreadable marks a record whose ConfigMap does not hold to the schema:
// it is reported and never overwritten.
var ErrUnreadable = errors.New("the record does not decode")

// DecodeRecord reads a record's ConfigMap data, held to the schema first:
// every key present, each of its shape; the release id's hash must be the
// ConfigMap's name, so a record copied under another name is refused.
func DecodeRecord(name string, data map[string]string) (Record, error) {
	doc := make(map[string]any, len(data))
	for k, v := range data {
		doc[k] = v
	}
	if err := recordSchema.Validate(doc); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	id, err := ParseReleaseID(data["releaseId"])
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if RecordName(id.String()) != name {
		return Record{}, fmt.Errorf("%w: the release id %s is not the record %s's", ErrUnreadable, id, name)
	}
	if id.App() != data["app"] || id.Cluster != data["cluster"] || id.Env != data["env"] {
		return Record{}, fmt.Errorf("%w: app, env or cluster differ from the release id %s", ErrUnreadable, id)
	}
	r := Record{
		ReleaseID: data["releaseId"], Kind: Kind(data["kind"]), RollbackOf: data["rollbackOf"], RollbackReason: data["rollbackReason"],
		App: data["app"], Env: data["env"], Cluster: data["cluster"], Image: data["image"], GitURL: data["gitUrl"],
		GitRevision: data["gitRevision"], State: State(data["state"]), LastFactPhase: data["lastFactPhase"],
		PodHash: data["podHash"], Drift: data["drift"], LastError: data["lastError"],
		EmittedLive: setOf(data["emittedLive"]), EmittedShadow: setOf(data["emittedShadow"]),
		SupersededBy: data["supersededBy"], RolledBackBy: data["rolledBackBy"], ObjectGeneration: data["objectGeneration"],
		Held: data["held"], Objects: data["objects"],
	}
	for key, into := range map[string]*time.Time{"stateAt": &r.StateAt, "mergedAt": &r.MergedAt, "lastFactAt": &r.LastFactAt,
		"healthyAt": &r.HealthyAt, "syncStartedAt": &r.SyncStartedAt} {
		if *into, err = parseTime(data[key]); err != nil {
			return Record{}, fmt.Errorf("%w: %s: %w", ErrUnreadable, key, err)
		}
	}
	return r, nil
}

// objectPattern is one object as the record's objects hold it.
var objectPattern = regexp.MustCompile(`^[A-Za-z]{1,63}/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)

// ObjectsOf writes the objects a release moved as the record keeps them:
// each <kind>/<namespace>/<name>, sorted, once, joined by commas. An object
// not of that shape is left out, and the whole is "" past the schema's
// 4,096 bytes rather than cut.
func ObjectsOf(objects []string) string {
	var kept []string
	for _, o := range objects {
		if objectPattern.MatchString(o) {
			kept = append(kept, o)
		}
	}
	s := setString(kept)
	if len(s) > 4096 {
		return ""
	}
	return s
}

func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}

func setString(keys []string) string {
	s := slices.Clone(keys)
	sort.Strings(s)
	return strings.Join(slices.Compact(s), ",")
}

func setOf(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
