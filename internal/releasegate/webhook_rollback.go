package releasegate

import (
	"context"
	"fmt"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// rollback answers rollback: must the release be rolled back.
type rollback struct{ g *Gate }

func (rollback) route() string { return WebhookRollback }

// shows that the question needs no ConfigMaps: the inputs are read alone.
func (rollback) shows() routeOptions { return routeOptions{noted: true} }

// read lists the Deployments and the pods of every member at once beside
// the common reads: the rule looks at each member's new copy, not the asking
// member's alone.
func (w rollback) read(ctx context.Context, q release.Question) decide {
	g := w.g
	reads := g.readCopies(ctx, q, byApplication(q))
	return func(a asked) (Answer, error) {
		own := release.MemberState{Process: a.q.Process, Canary: a.own, HasCanary: true}
		if p := a.own.Phase; p != flaggerv1.CanaryPhaseProgressing && p != flaggerv1.CanaryPhaseWaitingPromotion {
			return Rollback(a.q, own, nil), nil
		}
		ds, pods, ownPods, _, err := reads.newCopy(q)
		if err != nil {
			return Answer{}, err
		}
		own.Pods = ownPods
		ownCopy := ReadCopy(own.Pods)
		if ok, _ := RollbackEligible(own, ownCopy); !ok || ownCopy.MostRestarts >= RollbackRestarts {
			return Rollback(a.q, own, nil), nil
		}
		others := make([]release.MemberState, 0, len(a.in.Members))
		for _, m := range g.members(a) {
			if m.Process == a.q.Process {
				continue
			}
			if _, ok := memberOfRelease(a.q, m); ok && m.Canary.Phase != flaggerv1.CanaryPhaseFailed {
				if d := deploymentNamed(ds, m.Process); d != nil {
					m.Pods = selectPods(pods, d.Selector)
				}
			}
			others = append(others, m)
		}
		return Rollback(a.q, own, others), nil
	}
}

// RollbackRestarts is how many restarts of one pod of a new copy mean the
// release can no longer pass.
const RollbackRestarts = 3

// RollbackEligible reports whether the asking member may be rolled back at
// all: while it is analysed, or while it waits at the barrier with its new
// copy ready. Otherwise the answer is no without reading anything more.
func RollbackEligible(own release.MemberState, ownCopy CopyState) (bool, string) {
	switch own.Canary.Phase {
	case flaggerv1.CanaryPhaseProgressing:
		return true, ""
	case flaggerv1.CanaryPhaseWaitingPromotion:
		if ownCopy.ready() {
			return true, ""
		}
		return false, fmt.Sprintf("%s waits at the barrier without a ready new copy", own.Process)
	default:
		return false, fmt.Sprintf("%s is %s, neither analysed nor at the barrier", own.Process, release.PhaseName(own.Canary.Phase))
	}
}

// Rollback answers rollback: yes when the release can no longer pass, because
// a pod of the member's new copy restarted RollbackRestarts times or more, or
// another member's Canary carries this revision and has failed or has such a
// pod. Any other answer leaves the release where it is.
func Rollback(q release.Question, own release.MemberState, others []release.MemberState) Answer {
	ownCopy := ReadCopy(own.Pods)
	if ok, why := RollbackEligible(own, ownCopy); !ok {
		return notYet("no rollback: %s", why)
	}
	if ownCopy.MostRestarts >= RollbackRestarts {
		return yes("roll back: pod %s of new copy %s restarted %d times", ownCopy.MostRestarted, own.Process, ownCopy.MostRestarts)
	}
	for _, m := range others {
		if a, ok := memberOfRelease(q, m); !ok {
			if a.Outcome == Unanswerable {
				return a // a Canary of another Application, as for the barrier
			}
			continue // not in this release: its state says nothing about it
		}
		if m.Canary.Phase == flaggerv1.CanaryPhaseFailed {
			return yes("roll back: %s failed its analysis at %s", m.Process, q.Tag())
		}
		if s := ReadCopy(m.Pods); s.MostRestarts >= RollbackRestarts {
			return yes("roll back: pod %s of new copy %s restarted %d times", s.MostRestarted, m.Process, s.MostRestarts)
		}
	}
	return notYet("no rollback: the release can still pass")
}
