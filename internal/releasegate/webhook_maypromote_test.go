package releasegate

import (
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// barrier builds the two members of auth for the barrier: the asking auth-api
// and the other member auth-ui.
func barrier(own release.Canary, other release.MemberState) []release.MemberState {
	return []release.MemberState{{Process: "auth-api", Canary: own, HasCanary: true, Asked: rev}, other}
}

func ui(phase flaggerv1.CanaryPhase, asked string) release.MemberState {
	return release.MemberState{Process: "auth-ui", Canary: canary("auth-ui", phase), HasCanary: true, Asked: asked}
}

func unchangedUI() release.MemberState {
	m := ui(flaggerv1.CanaryPhaseSucceeded, "")
	m.Target = deployment("auth-ui", container("ui:1"))
	m.Primary = deployment("auth-ui-primary", container("ui:1"))
	return m
}

func TestMayPromote(t *testing.T) {
	waiting := canary("auth-api", flaggerv1.CanaryPhaseWaitingPromotion)
	analysed := canary("auth-api", flaggerv1.CanaryPhaseProgressing)
	analysed.Iterations = 4
	midway := canary("auth-api", flaggerv1.CanaryPhaseProgressing)
	midway.Iterations = 2
	changedUI := unchangedUI()
	changedUI.Target = deployment("auth-ui", container("ui:2"))
	unpromotedUI := unchangedUI()
	unpromotedUI.Canary.LastAppliedSpec = "b"
	initialisedUI := unchangedUI()
	initialisedUI.Canary.Phase = flaggerv1.CanaryPhaseInitialized
	noPrimaryUI := unchangedUI()
	noPrimaryUI.Primary = nil
	noTargetUI := unchangedUI()
	noTargetUI.Target = nil
	otherRevUI := ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)
	otherRevUI.Canary.Webhooks = hooks("auth", prevRev)
	otherAppUI := ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)
	otherAppUI.Canary.Webhooks = hooks("billing", rev)

	cases := []struct {
		name    string
		members []release.MemberState
		outcome Outcome
		reason  string
	}{
		{"every member passed for this revision", barrier(waiting, ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)), Yes, "barrier open"},
		{"a member past promotion counts as passed", barrier(waiting, ui(flaggerv1.CanaryPhasePromoting, rev)), Yes, "barrier open"},
		{"a member finalising counts as passed", barrier(waiting, ui(flaggerv1.CanaryPhaseFinalising, rev)), Yes, "barrier open"},
		{"a member promoted at this revision counts as passed", barrier(waiting, ui(flaggerv1.CanaryPhaseSucceeded, rev)), Yes, "barrier open"},
		{"the asking member analysed with every iteration counted", barrier(analysed, ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)), Yes, "barrier open"},
		{"the asking member still analysed", barrier(midway, ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)), NotYet, "auth-api is Progressing (2 of 4 iterations)"},
		{"another member still analysed", barrier(waiting, ui(flaggerv1.CanaryPhaseProgressing, rev)), NotYet, "auth-ui is Progressing"},
		{"another member failed", barrier(waiting, ui(flaggerv1.CanaryPhaseFailed, rev)), NotYet, "auth-ui is Failed"},
		{"a waiting member that has not asked at this revision", barrier(waiting, ui(flaggerv1.CanaryPhaseWaitingPromotion, prevRev)), NotYet, "auth-ui is WaitingPromotion but has not asked at " + tag},
		{"a waiting member after the gate restarted", barrier(waiting, ui(flaggerv1.CanaryPhaseWaitingPromotion, "")), NotYet, "has not asked"},
		{"a member that did not change", barrier(waiting, unchangedUI()), Yes, "barrier open"},
		{"a member initialised and unchanged", barrier(waiting, initialisedUI), Yes, "barrier open"},
		{"a member whose Deployment just changed, a tick ahead of Flagger", barrier(waiting, changedUI), NotYet, "primary does not run what its Deployment holds (container app image)"},
		{"a member whose spec Flagger has not promoted", barrier(waiting, unpromotedUI), NotYet, "has a spec Flagger has not promoted"},
		{"a member with no primary", barrier(waiting, noPrimaryUI), NotYet, "has no primary auth-ui-primary"},
		{"a member with no Deployment", barrier(waiting, noTargetUI), NotYet, "has no Deployment auth-ui"},
		{"a member with no Canary", barrier(waiting, release.MemberState{Process: "auth-ui"}), NotYet, "auth-ui has no Canary"},
		{"a member whose Canary carries another revision", barrier(waiting, otherRevUI), NotYet, "auth-ui does not carry revision " + tag},
		{"a member whose Canary is another Application's", barrier(waiting, otherAppUI), Unanswerable, "belongs to Application billing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, MayPromote(ask, inputs(false), c.members), c.outcome, c.reason) })
	}
}

// protectedInputs names auth-ui's /admin as the protected path.
func protectedInputs() *release.Inputs {
	in := inputs(false)
	in.ProtectedPath, in.ProtectedBy = "/admin", "auth-ui"
	return in
}

func TestPlanProtected(t *testing.T) {
	open := yes("barrier open: every member of auth passed %s or did not change", tag)
	closed := notYet("barrier closed: auth-ui is Progressing")
	ownWaiting := canary("auth-api", flaggerv1.CanaryPhaseWaitingPromotion)
	ownWaiting.Port = 8080
	changedUI := ui(flaggerv1.CanaryPhaseWaitingPromotion, rev)
	changedUI.Canary.Port = 3000
	unchanged := unchangedUI()
	unchanged.Canary.Port = 3000
	rows := []struct {
		name    string
		in      func() *release.Inputs
		ui      release.MemberState
		barrier Answer
		request bool
		base    string
		outcome Outcome
		reason  string
	}{
		{name: "no protected path: the barrier's answer stands",
			in: func() *release.Inputs { return inputs(false) }, ui: changedUI, barrier: open, outcome: Yes, reason: "barrier open"},
		{name: "a changed protectedBy member is asked before the barrier opens",
			in: protectedInputs, ui: changedUI, barrier: open, request: true,
			base: "http://auth-ui-canary.auth-system.svc.cluster.local:3000", outcome: Yes},
		{name: "the asking member as protectedBy is asked",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedBy = "auth-api"; return in },
			ui: changedUI, barrier: open, request: true,
			base: "http://auth-api-canary.auth-system.svc.cluster.local:8080", outcome: Yes},
		{name: "a protectedBy member that did not change in the release is not asked",
			in: protectedInputs, ui: unchanged, barrier: open, outcome: Yes, reason: "barrier open"},
		{name: "a protectedBy member promoted in this release is not asked: its copy may be gone",
			in: protectedInputs, ui: func() release.MemberState {
				m := ui(flaggerv1.CanaryPhaseSucceeded, rev)
				m.Canary.Port = 3000
				return m
			}(),
			barrier: open, outcome: Yes, reason: "barrier open"},
		{name: "nor one Flagger is promoting",
			in: protectedInputs, ui: func() release.MemberState {
				m := ui(flaggerv1.CanaryPhaseFinalising, rev)
				m.Canary.Port = 3000
				return m
			}(),
			barrier: open, outcome: Yes, reason: "barrier open"},
		{name: "a closed barrier asks nothing",
			in: protectedInputs, ui: changedUI, barrier: closed, outcome: NotYet, reason: "barrier closed"},
		{name: "a path and no member cannot be answered",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedBy = ""; return in },
			ui: changedUI, barrier: open, outcome: Unanswerable, reason: "no protectedBy member"},
		{name: "a member and no path cannot be answered",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedPath = ""; return in },
			ui: changedUI, barrier: open, outcome: Unanswerable, reason: "but no protectedPath"},
		{name: "a protectedBy that is no member cannot be answered",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedBy = "auth-admin"; return in },
			ui: changedUI, barrier: open, outcome: Unanswerable, reason: "auth-admin is no member"},
		{name: "a protected path that is not URL path segments cannot be answered",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedPath = "/admin/../x"; return in },
			ui: changedUI, barrier: open, outcome: Unanswerable, reason: `".." segment`},
		{name: "bad inputs cannot be answered even with the barrier closed",
			in: func() *release.Inputs { in := protectedInputs(); in.ProtectedPath = "//evil.example"; return in },
			ui: changedUI, barrier: closed, outcome: Unanswerable, reason: "empty segment"},
		{name: "a changed protectedBy member with no service port cannot be answered",
			in: protectedInputs, ui: func() release.MemberState { m := changedUI; m.Canary.Port = 0; return m }(),
			barrier: open, outcome: Unanswerable, reason: "service port 0"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			members := barrier(ownWaiting, r.ui)
			target, answer, request := PlanProtected(ask, r.in(), members, r.barrier)
			if request != r.request {
				t.Fatalf("request %v, want %v (answer %+v)", request, r.request, answer)
			}
			want(t, answer, r.outcome, r.reason)
			if request && (target.Base != r.base || target.Path != r.in().ProtectedPath) {
				t.Fatalf("target %+v, want %s", target, r.base)
			}
		})
	}
	if _, a, _ := PlanProtected(ask, protectedInputs(), barrier(ownWaiting, release.MemberState{}), open); a.Outcome != Unanswerable {
		t.Fatalf("a protectedBy member not read answered %+v", a)
	}
}

func TestProtectedAnswer(t *testing.T) {
	open := yes("barrier open")
	rows := []struct {
		name    string
		answer  owntraffic.Answer
		outcome Outcome
		reason  string
	}{
		{name: "a 2xx holds the release", answer: owntraffic.Answer{Path: "/admin", Status: 200},
			outcome: NotYet, reason: "E_CLIENT_OPEN: auth-ui serves /admin to anyone"},
		{name: "a 401 passes", answer: owntraffic.Answer{Path: "/admin", Status: 401}, outcome: Yes, reason: "barrier open; auth-ui answers /admin with 401"},
		{name: "a redirect to sign in passes", answer: owntraffic.Answer{Path: "/admin", Status: 302}, outcome: Yes, reason: "with 302"},
		{name: "no answer holds the release", answer: owntraffic.Answer{Path: "/admin", Cause: "connection refused"},
			outcome: NotYet, reason: "did not answer /admin (connection refused)"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			want(t, ProtectedAnswer(open, owntraffic.ProtectedVerdict("auth-ui", r.answer)), r.outcome, r.reason)
		})
	}
}
