package releasegate

import (
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

func TestRollback(t *testing.T) {
	own := func(phase flaggerv1.CanaryPhase, pods ...release.Pod) release.MemberState {
		return release.MemberState{Process: "auth-api", Canary: canary("auth-api", phase), HasCanary: true, Pods: pods}
	}
	other := func(phase flaggerv1.CanaryPhase, pods ...release.Pod) []release.MemberState {
		m := ui(phase, rev)
		m.Pods = pods
		return []release.MemberState{m}
	}
	otherRev := other(flaggerv1.CanaryPhaseFailed)
	otherRev[0].Canary.Webhooks = hooks("auth", prevRev)
	otherApp := other(flaggerv1.CanaryPhaseProgressing)
	otherApp[0].Canary.Webhooks = hooks("billing", rev)
	cases := []struct {
		name    string
		own     release.MemberState
		others  []release.MemberState
		outcome Outcome
		reason  string
	}{
		{"own pod restarted 3 times while analysed", own(flaggerv1.CanaryPhaseProgressing, pod("a", false, 3)), nil, Yes, "pod a of new copy auth-api restarted 3 times"},
		{"own pods restarted less than 3 times", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 2)), other(flaggerv1.CanaryPhaseProgressing), NotYet, "can still pass"},
		{"another member failed at this revision", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)), other(flaggerv1.CanaryPhaseFailed), Yes, "auth-ui failed its analysis"},
		{"another member's pod restarted 3 times", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)), other(flaggerv1.CanaryPhaseProgressing, pod("u", true, 4)), Yes, "pod u of new copy auth-ui restarted 4 times"},
		{"another member failed at another revision", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)), otherRev, NotYet, "can still pass"},
		{"another member failed at this revision without asking anything (its copy never became ready)", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)),
			func() []release.MemberState { m := other(flaggerv1.CanaryPhaseFailed); m[0].Asked = ""; return m }(), Yes, "auth-ui failed its analysis"},
		{"another member's Canary belongs to another Application", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)), otherApp, Unanswerable, "Canary auth-ui belongs to Application billing"},
		{"at the barrier with a ready new copy", own(flaggerv1.CanaryPhaseWaitingPromotion, pod("a", true, 0)), other(flaggerv1.CanaryPhaseFailed), Yes, "auth-ui failed"},
		{"at the barrier without a ready new copy", own(flaggerv1.CanaryPhaseWaitingPromotion, pod("a", false, 5)), other(flaggerv1.CanaryPhaseFailed), NotYet, "waits at the barrier without a ready new copy"},
		{"at the barrier with no pod", own(flaggerv1.CanaryPhaseWaitingPromotion), other(flaggerv1.CanaryPhaseFailed), NotYet, "without a ready new copy"},
		{"waiting to start", own(flaggerv1.CanaryPhaseWaiting, pod("a", false, 5)), other(flaggerv1.CanaryPhaseFailed), NotYet, "auth-api is Waiting, neither analysed nor at the barrier"},
		{"succeeded", own(flaggerv1.CanaryPhaseSucceeded), other(flaggerv1.CanaryPhaseFailed), NotYet, "neither analysed"},
		{"failed already", own(flaggerv1.CanaryPhaseFailed), nil, NotYet, "neither analysed"},
		{"without a phase", own(""), nil, NotYet, "without a phase"},
		{"own pod being deleted still counts its restarts", own(flaggerv1.CanaryPhaseProgressing, deleting(pod("a", true, 3))), nil, Yes, "pod a of new copy auth-api restarted 3 times"},
		{"another member's pod being deleted still counts its restarts", own(flaggerv1.CanaryPhaseProgressing, pod("a", true, 0)),
			other(flaggerv1.CanaryPhaseProgressing, deleting(pod("u", true, 3))), Yes, "pod u of new copy auth-ui restarted 3 times"},
		{"at the barrier with only a pod being deleted: no ready new copy", own(flaggerv1.CanaryPhaseWaitingPromotion, deleting(pod("a", true, 0))),
			other(flaggerv1.CanaryPhaseFailed), NotYet, "without a ready new copy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, Rollback(ask, c.own, c.others), c.outcome, c.reason) })
	}
}
