package releasepath

import (
	"errors"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// UnitPrefix names a Project's unit: the Kustomization project-<project>.
const UnitPrefix = "project-"

// ErrNotFound is a read of an object that is not there, or of a pin that
// names no digest: what a unit names is missing, which a reader reports as a
// skipped unit rather than a failure of its own.
var ErrNotFound = errors.New("not found")

// Condition is a Kubernetes condition as the path's readers read it.
type Condition struct {
	// Status is "True", "False", "Unknown", or "" when the condition is absent.
	Status, Reason, Message string
}

// Unit is what a Project's Flux Kustomization shows.
type Unit struct {
	// AppliedRevision and AttemptedRevision are status.lastAppliedRevision and
	// status.lastAttemptedRevision: the source artifact's revision,
	// "<tag>@sha256:<hex>" or "sha256:<hex>".
	AppliedRevision, AttemptedRevision string
	Ready                              Condition
}

// UnitObject is a Project's unit as listed.
type UnitObject struct {
	Name        string
	Project     string
	Annotations map[string]string
	// Source is the object the unit applies: its kind, namespace and name.
	SourceKind string
	Source     types.NamespacedName
	Unit       Unit
	// Canaries are the Flagger Canaries in the unit's inventory.
	Canaries []types.NamespacedName
}

// Source is what the path's readers read of an OCIRepository.
type Source struct {
	// Pin is spec.ref.digest.
	Pin string
	// Ready is its Ready condition once the source controller has seen the
	// spec that pins Pin; before that it speaks of an earlier spec, so it is
	// empty.
	Ready Condition
}

// Member is a blue-green member of the unit: a Canary in its inventory, held
// to the gate's barrier test through its MemberState.
type Member struct {
	// Namespace is the Canary's.
	Namespace string
	// State is the Canary and its Deployments <target> and <target>-primary.
	State release.MemberState
	// Iterations is the analysis's number of iterations (spec.analysis.iterations).
	Iterations int
	// Message is Flagger's message on the Canary's Promoted condition.
	Message string
	// ChangedAt is when the Canary's phase last changed (release.PhaseChangedAt).
	ChangedAt time.Time
}

// InventoryCanary reads a Flux inventory id, <namespace>_<name>_<group>_<kind>,
// and reports whether it names a Flagger Canary.
func InventoryCanary(id string) (types.NamespacedName, bool) {
	parts := strings.Split(id, "_")
	if len(parts) != 4 || parts[2] != flaggerv1.SchemeGroupVersion.Group || parts[3] != flaggerv1.CanaryKind || parts[0] == "" || parts[1] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: parts[0], Name: parts[1]}, true
}

// RevisionDigest is the digest a Flux artifact revision names:
// "latest@sha256:abc" and "sha256:abc" both name "sha256:abc".
func RevisionDigest(revision string) string {
	if i := strings.LastIndex(revision, "@"); i >= 0 {
		return revision[i+1:]
	}
	return revision
}
