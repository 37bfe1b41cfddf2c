package releasegate

import (
	"context"
	"fmt"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
)

// Prober makes the gate's own requests to members' Canary services;
// *probe.Prober is the one the binary uses.
type Prober interface {
	// OwnTraffic requests every path at base, probe.Rounds times over.
	OwnTraffic(ctx context.Context, base string, paths []string) (probe.Traffic, error)
	// Protected requests path at base once with no credentials and decides.
	Protected(ctx context.Context, base, process, path string) (probe.Verdict, error)
}

// UseProber replaces the prober New built (production settings). Call it
// before the gate serves; tests hand one whose dialer reaches loopback
// servers.
func (g *Gate) UseProber(p Prober) {
	if p != nil {
		g.prober = p
	}
}

// checkOwnTraffic decides /checks from the new copy's pods and, where the
// member's Canary hands paths, its own traffic. A request the prober refuses
// (a hostile path or base) or one cut short by the answer's deadline is a
// question the gate cannot answer.
func (g *Gate) checkOwnTraffic(ctx context.Context, a asked, pods []release.Pod) (Answer, error) {
	plan, answer, request := PlanTraffic(a.q, a.in, a.own, pods, g.config.OwnTraffic)
	if !request {
		return answer, nil
	}
	traffic, err := g.prober.OwnTraffic(ctx, plan.Base, plan.Paths)
	if err != nil {
		return Answer{}, fmt.Errorf("own traffic to %s: %w", a.q.Process, err)
	}
	return TrafficAnswer(a.q, answer, probe.Judge(traffic, plan.Thresholds)), nil
}

// checkProtected holds an open barrier to the protected path's anonymous
// request, where the inputs name one.
func (g *Gate) checkProtected(ctx context.Context, a asked, members []release.MemberState, barrier Answer) (Answer, error) {
	target, answer, request := PlanProtected(a.q, a.in, members, barrier)
	if !request {
		return answer, nil
	}
	v, err := g.prober.Protected(ctx, target.Base, target.Process, target.Path)
	if err != nil {
		return Answer{}, fmt.Errorf("protected path on %s: %w", target.Process, err)
	}
	return ProtectedAnswer(answer, v), nil
}
