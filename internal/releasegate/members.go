package releasegate

import (
	"sync"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// members is every member's state as the namespace's Canaries and the notes
// hold it.
func (g *Gate) members(a asked) []release.MemberState {
	out := make([]release.MemberState, 0, len(a.in.Members))
	for _, m := range a.in.Members {
		s := release.MemberState{Process: m.Process, Asked: g.notes.lastAsked(a.q, m.Process)}
		s.Canary, s.HasCanary = canaryNamed(a.canaries, m.Process)
		out = append(out, s)
	}
	return out
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

// memberKey names a member across Applications and namespaces.
type memberKey struct{ namespace, application, process string }

// notes hold the revision each member last asked at, once in the release
// (any webhook but /may-start). They only ever withhold:
// a member read as waiting counts only once it has asked at this revision, so
// a gate that restarted with no notes reopens the barrier as members ask
// again, which Flagger does every tick. One entry per member that asked,
// bounded by the Canaries in the cluster.
type notes struct {
	mu    sync.Mutex
	asked map[memberKey]string
}

func (n *notes) note(q release.Question) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked[memberKey{q.Namespace, q.Application, q.Process}] = q.Revision
}

// lastAsked returns the revision process, a member of q's Application, last asked at.
func (n *notes) lastAsked(q release.Question, process string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.asked[memberKey{q.Namespace, q.Application, process}]
}
