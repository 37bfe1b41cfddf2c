package bus

import (
	"embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// Schemas are the JSON Schemas of the bus's documents, published with the
// project (docs/mesh.md names them).
//
//go:embed schema/*.schema.json
var Schemas embed.FS

func mustSchema(file string) *jsondoc.Schema {
	return jsondoc.MustCompileFile(Schemas, "schema/"+file, jsondoc.AssertFormats())
}

var (
	registrationSchema = mustSchema("registration.schema.json")
	buildSchema        = mustSchema("build.schema.json")
	holdSchema         = mustSchema("hold.schema.json")
	grantSchema        = mustSchema("grant.schema.json")
	composedSchema     = mustSchema("composed.schema.json")
	wantSchema         = mustSchema("want.schema.json")
	haveSchema         = mustSchema("have.schema.json")
)

// Registration is a module's entry in mesh_modules.
type Registration struct {
	Module    string   `json:"module"`
	Nodes     []string `json:"nodes"`
	Providers []string `json:"providers"`
	HoldsData bool     `json:"holdsData"`
	// Step bounds how many nodes besides the canary run ahead of what the
	// canary proved; 0 is no bound.
	Step int `json:"step,omitempty"`
}

// BuildState is how a build ended.
type BuildState string

// The ends of a build.
const (
	BuildDone   BuildState = "done"
	BuildFailed BuildState = "failed"
)

// Build is build.<module>.<fingerprint>.
type Build struct {
	Module      string     `json:"module"`
	Fingerprint string     `json:"fingerprint"`
	State       BuildState `json:"state"`
	At          time.Time  `json:"at"`
}

// Hold is hold.<module>.<fingerprint>: a fingerprint never to be wanted.
type Hold struct {
	Module      string    `json:"module"`
	Fingerprint string    `json:"fingerprint"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
}

// Grant is grant.<module>.<fingerprint>.
type Grant struct {
	Module      string    `json:"module"`
	Fingerprint string    `json:"fingerprint"`
	At          time.Time `json:"at"`
}

// Composed is composition.<module>.<fingerprint> in composed-<node>: the
// envelope itself, or the name of the object that holds it.
type Composed struct {
	Module      string `json:"module"`
	Fingerprint string `json:"fingerprint"`
	Node        string `json:"node"`
	Digest      string `json:"digest"`
	Envelope    []byte `json:"envelope,omitempty"`
	Object      string `json:"object,omitempty"`
	Size        int    `json:"size"`
}

// Owner says who a want belongs to.
type Owner string

// The owners a want has besides a put's put:<id>.
const (
	OwnerRules Owner = "rules"
	OwnerHand  Owner = "hand"
)

// PutOwner is the owner of a want a put holds.
func PutOwner(id string) Owner { return Owner("put:" + id) }

// Want is want.<node>.<module>.
type Want struct {
	Fingerprint string    `json:"fingerprint"`
	Digest      string    `json:"digest"`
	Owner       Owner     `json:"owner"`
	At          time.Time `json:"at"`
}

// Same is whether w names what other names: the same fingerprint,
// composition and owner, whenever each was written.
func (w Want) Same(other Want) bool {
	return w.Fingerprint == other.Fingerprint && w.Digest == other.Digest && w.Owner == other.Owner
}

// Phase is how far a node's apply of a module is. With an attempt beside
// it, it is the attempt's; without, it is what runs.
type Phase string

// The phases of a have.
const (
	// PhaseApplying: the attempt is under way; what ran before runs on.
	PhaseApplying Phase = "applying"
	// PhaseRunning: what the have names runs, supervised.
	PhaseRunning Phase = "running"
	// PhaseFailed: the attempt was not applied (with an attempt), or the
	// process of what runs ended and waits for its restart (without one).
	PhaseFailed Phase = "failed"
	// PhaseRefused: the attempt is never applied; what ran before runs on.
	PhaseRefused Phase = "refused"
	// PhaseRolledBack: the attempt ran and did not pass its health in
	// time, so the version that last ran healthy runs again.
	PhaseRolledBack Phase = "rolled-back"
)

// Health is what the health check of what runs last said; unhealthy
// whenever its process has ended.
type Health string

// The healths of a have.
const (
	Healthy   Health = "healthy"
	Unhealthy Health = "unhealthy"
	Unknown   Health = "unknown"
)

// Have is have.<node>.<module>, the node agent's. Its fingerprint, digest
// and health are always what runs; an apply under way, failed, refused or
// rolled back is named beside them as the attempt.
type Have struct {
	Fingerprint string  `json:"fingerprint"`
	Digest      string  `json:"digest"`
	Phase       Phase   `json:"phase"`
	Health      Health  `json:"health"`
	Reason      string  `json:"reason,omitempty"`
	Attempt     Attempt `json:"attempt,omitzero"`
	// Since is when what the have says last changed: a have written
	// again unchanged, as a heartbeat, keeps it. Zero from an agent that
	// does not say it.
	Since time.Time `json:"since,omitzero"`
	At    time.Time `json:"at"`
}

// Attempt is the version a have's phase speaks of when it is not what
// runs; its zero value is none.
type Attempt struct {
	Fingerprint string `json:"fingerprint"`
	Digest      string `json:"digest"`
}

// Says is whether h says what other says, whenever each was written.
func (h Have) Says(other Have) bool {
	h.At, h.Since, other.At, other.Since = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return h == other
}

// Changed is when what the have says last changed: Since, or where the
// writer does not say it, At.
func (h Have) Changed() time.Time {
	if h.Since.IsZero() {
		return h.At
	}
	return h.Since
}

// RunsHealthy is whether the have shows fingerprint running and healthy:
// the health is always that of what runs, whatever the attempt beside it.
func (h Have) RunsHealthy(fingerprint string) bool {
	return fingerprint != "" && h.Fingerprint == fingerprint && h.Health == Healthy && (h.Phase != PhaseFailed || h.Attempt != Attempt{})
}

// RolledBackFrom is the fingerprint the node went back from, or "".
func (h Have) RolledBackFrom() string {
	if h.Phase != PhaseRolledBack {
		return ""
	}
	return h.Attempt.Fingerprint
}

// DecodeRegistration reads a module's registration strictly; every name in it
// must be one the bus can key.
func DecodeRegistration(raw []byte) (Registration, error) {
	var r Registration
	if err := registrationSchema.DecodeStrict(raw, &r); err != nil {
		return Registration{}, fmt.Errorf("registration: %w", err)
	}
	names := append(append([]string{r.Module}, r.Nodes...), r.Providers...)
	if err := keyable(names...); err != nil {
		return Registration{}, fmt.Errorf("registration of %q: %w", r.Module, err)
	}
	for _, p := range r.Providers {
		if p == r.Module {
			return Registration{}, fmt.Errorf("registration of %q: the module names itself a provider", r.Module)
		}
	}
	return r, nil
}

// DecodeBuild reads build.<module>.<fingerprint> strictly.
func DecodeBuild(raw []byte) (Build, error) {
	var b Build
	if err := buildSchema.DecodeStrict(raw, &b); err != nil {
		return Build{}, fmt.Errorf("build: %w", err)
	}
	return b, keyable(b.Module, b.Fingerprint)
}

// DecodeHold reads hold.<module>.<fingerprint> strictly.
func DecodeHold(raw []byte) (Hold, error) {
	var h Hold
	if err := holdSchema.DecodeStrict(raw, &h); err != nil {
		return Hold{}, fmt.Errorf("hold: %w", err)
	}
	return h, keyable(h.Module, h.Fingerprint)
}

// DecodeGrant reads grant.<module>.<fingerprint> strictly.
func DecodeGrant(raw []byte) (Grant, error) {
	var g Grant
	if err := grantSchema.DecodeStrict(raw, &g); err != nil {
		return Grant{}, fmt.Errorf("grant: %w", err)
	}
	return g, keyable(g.Module, g.Fingerprint)
}

// DecodeComposed reads a composition key strictly: it holds the envelope or
// names an object, never both nor neither.
func DecodeComposed(raw []byte) (Composed, error) {
	var c Composed
	if err := composedSchema.DecodeStrict(raw, &c); err != nil {
		return Composed{}, fmt.Errorf("composition entry: %w", err)
	}
	if (len(c.Envelope) == 0) == (c.Object == "") {
		return Composed{}, fmt.Errorf("composition entry of %q at %q: holds an envelope or names an object, exactly one", c.Module, c.Fingerprint)
	}
	if len(c.Envelope) > 0 && len(c.Envelope) != c.Size {
		return Composed{}, fmt.Errorf("composition entry of %q at %q: size %d, envelope %d bytes", c.Module, c.Fingerprint, c.Size, len(c.Envelope))
	}
	return c, keyable(c.Module, c.Fingerprint, c.Node)
}

// DecodeWant reads want.<node>.<module> strictly.
func DecodeWant(raw []byte) (Want, error) {
	var w Want
	if err := wantSchema.DecodeStrict(raw, &w); err != nil {
		return Want{}, fmt.Errorf("want: %w", err)
	}
	return w, keyable(w.Fingerprint)
}

// DecodeHave reads have.<node>.<module> strictly.
func DecodeHave(raw []byte) (Have, error) {
	var h Have
	if err := haveSchema.DecodeStrict(raw, &h); err != nil {
		return Have{}, fmt.Errorf("have: %w", err)
	}
	return h, nil
}

// Encode is a document as the bus holds it.
func Encode(doc any) []byte {
	raw, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("a bus document does not encode: %v", err)) // only plain fields
	}
	return raw
}

func keyable(names ...string) error {
	for _, n := range names {
		if _, err := EncodeName(n); err != nil {
			return err
		}
	}
	return nil
}
