package releasegate

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Outcome is how the gate answers a question.
type Outcome int

// The three outcomes; the HTTP handlers map them to 200, 409 and 503.
const (
	Yes Outcome = iota
	NotYet
	Unanswerable
)

// Answer is a decision: its outcome and one line saying why. For Unanswerable
// the reason is the cause the gate logs; the caller is told only that the gate
// could not answer.
type Answer struct {
	Outcome Outcome
	Reason  string
}

func yes(format string, args ...any) Answer {
	return Answer{Outcome: Yes, Reason: fmt.Sprintf(format, args...)}
}

func notYet(format string, args ...any) Answer {
	return Answer{Outcome: NotYet, Reason: fmt.Sprintf(format, args...)}
}

func unanswerable(format string, args ...any) Answer {
	return Answer{Outcome: Unanswerable, Reason: fmt.Sprintf(format, args...)}
}

// RollbackRestarts is how many restarts of one pod of a new copy mean the
// release can no longer pass.
const RollbackRestarts = 3

// FlaggerIdentity says which pods are Flagger: the only callers the gate answers.
type FlaggerIdentity struct {
	Namespace      string
	Selector       string
	ServiceAccount string
}

// IsFlagger reports whether addr, a connection's source address, belongs to a
// pod of Flagger among pods (the pods of Flagger's namespace its selector
// matches): Running, not terminating, not on the host network (where its
// address would be the node's, shared with everything else there) and under
// Flagger's ServiceAccount.
func IsFlagger(addr netip.Addr, pods []release.Pod, serviceAccount string) bool {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return false
	}
	for _, p := range pods {
		if !p.Running || p.Terminating || p.HostNetwork || p.ServiceAccount != serviceAccount {
			continue
		}
		for _, ip := range p.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Unmap() == addr {
				return true
			}
		}
	}
	return false
}

// staleReason is the one refusal for a question about a Canary that is not
// there and one about a render that has been replaced: they read the same, so
// an answer says nothing about which Canaries exist.
func staleReason(q release.Question) string {
	return fmt.Sprintf("Canary %s does not carry revision %s", q.Process, q.Tag())
}

// Identify decides whether a question is about the asking member's current
// release: its Canary must be there, be this Application's and carry this
// revision. found is false when the Canary was not there.
func Identify(q release.Question, in *release.Inputs, c release.Canary, found bool) (Answer, bool) {
	if _, ok := in.Member(q.Process); !ok {
		return unanswerable("process %s is no member of Application %s", q.Process, q.Application), false
	}
	if !found {
		return notYet("%s", staleReason(q)), false
	}
	app, rev, err := release.CanaryRelease(c)
	if err != nil {
		return unanswerable("%v", err), false
	}
	if app != "" && app != q.Application {
		return unanswerable("Canary %s belongs to Application %s, not %s", c.Name, app, q.Application), false
	}
	if app == "" || rev != q.Revision {
		return notYet("%s", staleReason(q)), false
	}
	return Answer{}, true
}

// jobTag matches the 12 hex digits a release Job's name ends in.
var jobTag = regexp.MustCompile(`^[a-f0-9]{12}$`)

// isReleaseJob reports whether j is a release Job of its identity, named
// <identity>-<tag>; down Jobs (<identity>-down-<tag>) and scheduled ones are not.
func isReleaseJob(j release.Job) bool {
	if j.Scheduled || j.Identity == "" {
		return false
	}
	tag, ok := strings.CutPrefix(j.Name, j.Identity+"-")
	return ok && jobTag.MatchString(tag)
}

// MayStart answers confirm-rollout: yes once the member's Deployment holds
// this revision's template (TemplateOfRevision) and every step of this
// revision has completed. Every identity that has a release Job of the
// Application is a step, and so is the inputs' migration before its first
// Job exists; each step's Job of this revision must be there and complete.
func MayStart(q release.Question, in *release.Inputs, jobs []release.Job, render Render) Answer {
	if a, ok := TemplateOfRevision(q, render); !ok {
		return a
	}
	steps := map[string]bool{}
	if in.Migration != nil {
		steps[in.Migration.Identity] = true
	}
	byName := make(map[string]release.Job, len(jobs))
	for _, j := range jobs {
		byName[j.Name] = j
		if isReleaseJob(j) {
			steps[j.Identity] = true
		}
	}
	if len(steps) == 0 {
		return yes("Application %s has no release step", q.Application)
	}
	identities := make([]string, 0, len(steps))
	for id := range steps {
		identities = append(identities, id)
	}
	slices.Sort(identities)
	var waiting []string
	for _, id := range identities {
		name := id + "-" + q.Tag()
		j, ok := byName[name]
		switch {
		case !ok || j.Identity != id:
			waiting = append(waiting, "job "+name+" not applied")
		case j.Failed:
			waiting = append(waiting, "job "+name+" failed")
		case !j.Complete:
			waiting = append(waiting, "job "+name+" not complete")
		}
	}
	if len(waiting) > 0 {
		return notYet("waiting for %s", list(waiting))
	}
	return yes("every step of %s completed (%s)", q.Tag(), list(identities))
}

// CopyState is what a member's new copy shows: how many pods, how many ready
// and the pod that restarted most.
type CopyState struct {
	Pods, Ready   int
	MostRestarted string
	MostRestarts  int
	FirstNotReady string
}

// ReadCopy sums up the pods of a new copy. A pod being deleted is no pod of
// the copy, as a ReplicaSet does not count it ready: it stays until its
// kubelet confirms, and will serve no one. Its restarts still count, since
// they say how the new code ran.
func ReadCopy(pods []release.Pod) CopyState {
	var s CopyState
	for _, p := range pods {
		if p.Restarts > s.MostRestarts {
			s.MostRestarts, s.MostRestarted = p.Restarts, p.Name
		}
		if p.Terminating {
			continue
		}
		s.Pods++
		if p.Ready {
			s.Ready++
		} else if s.FirstNotReady == "" {
			s.FirstNotReady = p.Name
		}
	}
	return s
}

// ready is a new copy with at least one pod, every one of them ready.
func (s CopyState) ready() bool { return s.Pods > 0 && s.Ready == s.Pods }

// Checks answers rollout, once per analysis iteration: yes when the member's
// new copy has a pod, every pod is ready and none has restarted.
func Checks(q release.Question, pods []release.Pod) Answer {
	s := ReadCopy(pods)
	switch {
	case s.Pods == 0:
		return notYet("new copy %s has no pod", q.Process)
	case s.Ready < s.Pods:
		return notYet("new copy %s: pod %s not ready (%d of %d ready)", q.Process, s.FirstNotReady, s.Ready, s.Pods)
	case s.MostRestarts > 0:
		return notYet("new copy %s: pod %s restarted %d times", q.Process, s.MostRestarted, s.MostRestarts)
	}
	return yes("new copy %s: %d pods ready, none restarted", q.Process, s.Pods)
}

// passedPhase is a Canary that waits for promotion or is past it.
func passedPhase(phase string) bool {
	switch phase {
	case release.PhaseWaitingPromotion, release.PhasePromoting, release.PhaseFinalising, release.PhaseSucceeded:
		return true
	}
	return false
}

// PassedOnRecord reports whether a member counts as passed from its Canary
// and the gate's notes alone: it waits for promotion or is past it, and it
// asked at this revision, so the phase is not the previous release's.
func PassedOnRecord(q release.Question, m release.MemberState) bool {
	return m.HasCanary && passedPhase(m.Canary.Phase) && m.Asked == q.Revision
}

// memberOfRelease reports why a member's Canary is not part of this release,
// or "" when it is.
func memberOfRelease(q release.Question, m release.MemberState) (Answer, bool) {
	if !m.HasCanary {
		return notYet("%s has no Canary", m.Process), false
	}
	app, rev, err := release.CanaryRelease(m.Canary)
	if err != nil {
		return unanswerable("%v", err), false
	}
	if app != "" && app != q.Application {
		return unanswerable("Canary %s belongs to Application %s, not %s", m.Process, app, q.Application), false
	}
	if rev != q.Revision {
		return notYet("%s does not carry revision %s yet", m.Process, q.Tag()), false
	}
	return Answer{}, true
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
			analysed := c.Phase == release.PhaseProgressing && c.Iterations >= in.Analysis.Iterations
			if c.Phase != release.PhaseWaitingPromotion && !analysed {
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
			if passedPhase(m.Canary.Phase) && m.Canary.Phase != release.PhaseSucceeded {
				why = "is " + m.Canary.Phase + " but has not asked at " + q.Tag()
			}
			waiting = append(waiting, m.Process+" "+why)
		}
	}
	if len(waiting) > 0 {
		return notYet("barrier closed: %s", list(waiting))
	}
	return yes("barrier open: every member of %s passed %s or did not change", q.Application, q.Tag())
}

// RollbackEligible reports whether the asking member may be rolled back at
// all: while it is analysed, or while it waits at the barrier with its new
// copy ready. Otherwise the answer is no without reading anything more.
func RollbackEligible(own release.MemberState, ownCopy CopyState) (bool, string) {
	switch own.Canary.Phase {
	case release.PhaseProgressing:
		return true, ""
	case release.PhaseWaitingPromotion:
		if ownCopy.ready() {
			return true, ""
		}
		return false, fmt.Sprintf("%s waits at the barrier without a ready new copy", own.Process)
	}
	return false, fmt.Sprintf("%s is %s, neither analysed nor at the barrier", own.Process, release.PhaseName(own.Canary.Phase))
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
		if m.Canary.Phase == release.PhaseFailed {
			return yes("roll back: %s failed its analysis at %s", m.Process, q.Tag())
		}
		if s := ReadCopy(m.Pods); s.MostRestarts >= RollbackRestarts {
			return yes("roll back: pod %s of new copy %s restarted %d times", s.MostRestarted, m.Process, s.MostRestarts)
		}
	}
	return notYet("no rollback: the release can still pass")
}

// list joins what a reason names, keeping the reply to one short line.
func list(items []string) string {
	const most = 5
	if len(items) > most {
		return strings.Join(items[:most], "; ") + "; and " + strconv.Itoa(len(items)-most) + " more"
	}
	return strings.Join(items, "; ")
}
