package release

import flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

// PhaseName is a Canary's phase as a reason names it.
func PhaseName(phase flaggerv1.CanaryPhase) string {
	if phase == "" {
		return "without a phase"
	}
	return string(phase)
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
