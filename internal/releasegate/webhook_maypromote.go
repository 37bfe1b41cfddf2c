package releasegate

import (
	"context"
	"fmt"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// mayPromote answers confirm-promotion: the barrier.
type mayPromote struct{ g *Gate }

func (mayPromote) route() string { return WebhookMayPromote }

func (mayPromote) shows() routeOptions { return routeOptions{noted: true, configMaps: true} }

// read lists the Deployments beside the common reads: the asking member's
// template is held to may-start's rule, and a member that may not have
// changed has its copies compared.
func (w mayPromote) read(ctx context.Context, q release.Question) decide {
	g := w.g
	deployments := g.readDeployments(ctx, q)
	steps := g.readSteps(ctx, q, deployments)
	return func(a asked) (Answer, error) {
		if started, err := steps.answer(a); err != nil || started.Outcome != Yes {
			return started, err
		}
		members := g.members(a)
		configs := release.ConfigsByName(a.configMaps)
		for i, m := range members {
			if m.Process == a.q.Process || !m.HasCanary || PassedOnRecord(a.q, m) {
				continue
			}
			if _, ok := memberOfRelease(a.q, m); !ok {
				continue
			}
			if m.Canary.Phase != flaggerv1.CanaryPhaseInitialized && m.Canary.Phase != flaggerv1.CanaryPhaseSucceeded {
				continue
			}
			ds, err := deployments.get()
			if err != nil {
				return Answer{}, err
			}
			members[i].Target = deploymentNamed(ds, m.Process)
			members[i].Primary = deploymentNamed(ds, m.Process+release.PrimarySuffix)
			if t, p := members[i].Target, members[i].Primary; t != nil && p != nil {
				members[i].MovedConfigs = release.MovedConfigs(*t, *p, configs)
			}
		}
		return g.checkProtected(ctx, a, members, MayPromote(a.q, a.in, members))
	}
}

// MayPromote answers confirm-promotion, the barrier: yes when every member
// has passed its analysis for this revision or did not change in it. The
// asking member is held to its own record: waiting for promotion, or
// analysed with every iteration counted.
func MayPromote(q release.Question, in *release.Inputs, members []release.MemberState) Answer {
	var waiting []string
	for _, m := range members {
		if m.Process == q.Process {
			c := m.Canary
			analysed := c.Phase == flaggerv1.CanaryPhaseProgressing && c.Iterations >= in.Analysis.Iterations
			if c.Phase != flaggerv1.CanaryPhaseWaitingPromotion && !analysed {
				waiting = append(waiting, fmt.Sprintf("%s is %s (%d of %d iterations)",
					m.Process, release.PhaseName(c.Phase), c.Iterations, in.Analysis.Iterations))
			}
			continue
		}
		if a, ok := memberOfRelease(q, m); !ok {
			if a.Outcome == Unanswerable {
				return a
			}
			waiting = append(waiting, a.Reason)
			continue
		}
		if PassedOnRecord(q, m) {
			continue
		}
		if ok, why := release.Unchanged(m); !ok {
			// A Succeeded member is either unchanged or promoted at this
			// revision; Unchanged says best why it is neither.
			if passedPhase(m.Canary.Phase) && m.Canary.Phase != flaggerv1.CanaryPhaseSucceeded {
				why = "is " + string(m.Canary.Phase) + " but has not asked at " + q.Tag()
			}
			waiting = append(waiting, m.Process+" "+why)
		}
	}
	if len(waiting) > 0 {
		return notYet("barrier closed: %s", list(waiting))
	}
	return yes("barrier open: every member of %s passed %s or did not change", q.Application, q.Tag())
}

// passedPhase is a Canary that waits for promotion or is past it.
func passedPhase(phase flaggerv1.CanaryPhase) bool {
	switch phase {
	case flaggerv1.CanaryPhaseWaitingPromotion, flaggerv1.CanaryPhasePromoting, flaggerv1.CanaryPhaseFinalising, flaggerv1.CanaryPhaseSucceeded:
		return true
	default:
		return false
	}
}

// PassedOnRecord reports whether a member counts as passed from its Canary
// and the gate's notes alone: it waits for promotion or is past it, and it
// asked at this revision, so the phase is not the previous release's.
func PassedOnRecord(q release.Question, m release.MemberState) bool {
	return m.HasCanary && passedPhase(m.Canary.Phase) && m.Asked == q.Revision
}

// checkProtected holds an open barrier to the protected path's anonymous
// request, where the inputs name one.
func (g *Gate) checkProtected(ctx context.Context, a asked, members []release.MemberState, barrier Answer) (Answer, error) {
	target, answer, request := PlanProtected(a.q, a.in, members, barrier)
	if !request {
		return answer, nil
	}
	v, err := g.sender.Protected(ctx, target.Base, target.Process, target.Path)
	if err != nil {
		return Answer{}, fmt.Errorf("protected path on %s: %w", target.Process, err)
	}
	return ProtectedAnswer(answer, v), nil
}

// ProtectedTarget is the one anonymous request the barrier makes before it
// opens: Path at the Canary service Base of member Process.
type ProtectedTarget struct {
	Process string
	Base    string
	Path    string
}

// PlanProtected decides /may-promote up to the protected path. barrier is
// MayPromote's answer: only an open barrier asks. Inputs that name a path
// but no member, a member that is not one, or a path that is not URL path
// segments are a question the gate cannot answer. A protectedBy member that
// did not change in the release is not asked (its copy was proven when it
// was released), nor one already promoted in it (proven when it asked for
// its promotion); one that changed is asked at its Canary service, whose
// port must be set. request is false when the answer is already decided.
func PlanProtected(q release.Question, in *release.Inputs, members []release.MemberState, barrier Answer) (target ProtectedTarget, answer Answer, request bool) {
	if in.ProtectedPath == "" && in.ProtectedBy == "" {
		return ProtectedTarget{}, barrier, false
	}
	switch {
	case in.ProtectedBy == "":
		return ProtectedTarget{}, unanswerable("inputs name protectedPath %q but no protectedBy member", in.ProtectedPath), false
	case in.ProtectedPath == "":
		return ProtectedTarget{}, unanswerable("inputs name protectedBy %s but no protectedPath", in.ProtectedBy), false
	}
	if _, ok := in.Member(in.ProtectedBy); !ok {
		return ProtectedTarget{}, unanswerable("protectedBy %s is no member of Application %s", in.ProtectedBy, q.Application), false
	}
	if err := owntraffic.CheckPath(in.ProtectedPath); err != nil {
		return ProtectedTarget{}, unanswerable("inputs protectedPath: %v", err), false
	}
	if barrier.Outcome != Yes {
		return ProtectedTarget{}, barrier, false
	}
	var m release.MemberState
	for _, s := range members {
		if s.Process == in.ProtectedBy {
			m = s
		}
	}
	if m.Process == "" {
		return ProtectedTarget{}, unanswerable("member %s was not read", in.ProtectedBy), false
	}
	changed := m.Process == q.Process || PassedOnRecord(q, m)
	if !changed {
		if unchanged, _ := release.Unchanged(m); unchanged {
			return ProtectedTarget{}, barrier, false
		}
	}
	if m.Process != q.Process && PassedOnRecord(q, m) && m.Canary.Phase != flaggerv1.CanaryPhaseWaitingPromotion {
		// Promoted at this revision, or being promoted: it passed this very
		// check when it asked for its own promotion, and Flagger has scaled
		// its new copy down or is about to, so its Canary service may answer
		// nothing now.
		return ProtectedTarget{}, barrier, false
	}
	base, err := owntraffic.CanaryBase(m.Process, q.Namespace, m.Canary.Port)
	if err != nil {
		return ProtectedTarget{}, unanswerable("Canary %s: %v", m.Process, err), false
	}
	return ProtectedTarget{Process: m.Process, Base: base, Path: in.ProtectedPath}, barrier, true
}

// ProtectedAnswer turns the protected path's verdict into the barrier's
// answer: a failing verdict holds the release with its reason.
func ProtectedAnswer(barrier Answer, v owntraffic.Verdict) Answer {
	if !v.Pass {
		return notYet("%s", v.Reason)
	}
	return yes("%s; %s", barrier.Reason, v.Reason)
}
