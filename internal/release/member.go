package release

import (
	"fmt"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// MemberState is what a reader read of one member: its Canary and its
// Deployments where it needed them, which Unchanged judges, and for the
// gate's barrier and rollback the new copy's pods and the revision the member
// last asked at.
type MemberState struct {
	Process string
	Canary  Canary
	// HasCanary is false when the member's Canary is not there.
	HasCanary bool
	// Target and Primary are the Deployments <process> and <process>-primary;
	// nil when not read or not there.
	Target, Primary *Deployment
	// Pods are the new copy's pods, for the rollback.
	Pods []Pod
	// Asked is the revision the member last asked the gate at; "" when it has
	// not asked since the gate started.
	Asked string
	// MovedConfigs are the ConfigMaps the new copy takes environment from
	// whose data Flagger's copy for the primary does not hold yet
	// (MovedConfigs); nil when not read.
	MovedConfigs []string
}

// CanaryRelease is the Application and revision a Canary's webhooks carry.
// A Canary whose webhooks disagree names no one release, and the gate cannot
// answer for it.
func CanaryRelease(c Canary) (application, revision string, err error) {
	for _, md := range c.Webhooks {
		app, rev := md["application"], md["revision"]
		if app == "" && rev == "" {
			continue // a webhook that is not the gate's
		}
		if application == "" && revision == "" {
			application, revision = app, rev
			continue
		}
		if app != application || rev != revision {
			return "", "", fmt.Errorf("Canary %s carries two releases in its webhooks: %s@%s and %s@%s",
				c.Name, application, revision, app, rev)
		}
	}
	return application, revision, nil
}

// Unchanged reports whether a member did not change in the release: Flagger
// records it as serving what it last saw, and its primary runs what its
// Deployment holds. Flagger's record alone is a tick behind a Deployment that
// just changed, so both must hold. The reason says which does not.
func Unchanged(m MemberState) (bool, string) {
	c := m.Canary
	if c.Phase != flaggerv1.CanaryPhaseInitialized && c.Phase != flaggerv1.CanaryPhaseSucceeded {
		return false, "is " + PhaseName(c.Phase)
	}
	if c.LastAppliedSpec != c.LastPromotedSpec {
		return false, "has a spec Flagger has not promoted"
	}
	if m.Target == nil {
		return false, "has no Deployment " + m.Process
	}
	if m.Primary == nil {
		return false, "has no primary " + m.Process + PrimarySuffix
	}
	if diff := SameProgram(*m.Target, *m.Primary); diff != "" {
		return false, "primary does not run what its Deployment holds (" + diff + ")"
	}
	if len(m.MovedConfigs) > 0 {
		return false, "primary does not run what its Deployment holds (configMap " + strings.Join(m.MovedConfigs, ", ") + " changed)"
	}
	return true, ""
}
