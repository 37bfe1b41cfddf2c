package release

import flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

// Flagger's Canary phases the gate and the release path read, Flagger's own
// values (flaggerv1.CanaryPhase), held as the plain strings Canary.Phase
// keeps so that the rules compare them without a conversion at every turn.
const (
	PhaseInitialized      = string(flaggerv1.CanaryPhaseInitialized)
	PhaseWaiting          = string(flaggerv1.CanaryPhaseWaiting)
	PhaseProgressing      = string(flaggerv1.CanaryPhaseProgressing)
	PhaseWaitingPromotion = string(flaggerv1.CanaryPhaseWaitingPromotion)
	PhasePromoting        = string(flaggerv1.CanaryPhasePromoting)
	PhaseFinalising       = string(flaggerv1.CanaryPhaseFinalising)
	PhaseSucceeded        = string(flaggerv1.CanaryPhaseSucceeded)
	PhaseFailed           = string(flaggerv1.CanaryPhaseFailed)
)

// PhaseName is a phase as a reason names it.
func PhaseName(phase string) string {
	if phase == "" {
		return "without a phase"
	}
	return phase
}

// Labels deploy-kit puts on every object it renders.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "deploy-kit"
)

// PrimarySuffix ends the names Flagger gives what it makes for a member's
// primary: the Deployment <process>-primary, and its copies of the
// ConfigMaps and Secrets the member's Deployment takes environment from.
const PrimarySuffix = "-primary"

// RevisionAnnotation is the pod template annotation a render may set to the
// Application revision the template belongs to. Where it is set, /may-start
// knows the template's revision exactly; where it is not, the gate judges from
// what it can see (releasegate.TemplateOfRevision).
const RevisionAnnotation = "delivery.jorisjonkers.dev/revision"
