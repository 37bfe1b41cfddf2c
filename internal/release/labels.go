package release

// Flagger's Canary phases the gate reads.
const (
	PhaseInitialized      = "Initialized"
	PhaseWaiting          = "Waiting"
	PhaseProgressing      = "Progressing"
	PhaseWaitingPromotion = "WaitingPromotion"
	PhasePromoting        = "Promoting"
	PhaseFinalising       = "Finalising"
	PhaseSucceeded        = "Succeeded"
	PhaseFailed           = "Failed"
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
