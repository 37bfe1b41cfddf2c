package releasegate

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/probe"
)

// MetadataPaths is the key of a Canary webhook's metadata that hands the gate
// the member's Route paths: a JSON array of URL paths, encoded as one string
// because Flagger's metadata is a map of strings. A Canary without it hands
// no path.
const MetadataPaths = "paths"

// CanaryPaths reads the Route paths a Canary's webhooks hand the gate. Every
// webhook that carries the key must carry the same list, and each path must
// be URL path segments (probe.CheckPath): the gate holds API access, so it
// checks what anyone who can write a Canary wrote.
func CanaryPaths(c release.Canary) ([]string, error) {
	var raw string
	found := false
	for _, md := range c.Webhooks {
		v, ok := md[MetadataPaths]
		if !ok {
			continue
		}
		if found && v != raw {
			return nil, fmt.Errorf("Canary %s carries two lists of paths in its webhooks", c.Name)
		}
		raw, found = v, true
	}
	if !found {
		return nil, nil
	}
	var paths []string
	if err := json.Unmarshal([]byte(raw), &paths); err != nil || paths == nil {
		// null decodes to no list at all, which would skip the check
		// rather than refuse the metadata.
		cause := "null"
		if err != nil {
			cause = jsondoc.OneLine(err)
		}
		return nil, fmt.Errorf("Canary %s: metadata %s is not a JSON array of paths: %s", c.Name, MetadataPaths, cause)
	}
	if len(paths) > probe.MaxPaths {
		return nil, fmt.Errorf("Canary %s hands %d paths, more than %d", c.Name, len(paths), probe.MaxPaths)
	}
	for _, p := range paths {
		if err := probe.CheckPath(p); err != nil {
			return nil, fmt.Errorf("Canary %s: %w", c.Name, err)
		}
	}
	return paths, nil
}

// OwnTrafficThresholds are the own-traffic thresholds a member is held to:
// the inputs' errorRate and latency where they carry them, the platform's
// (the gate's own settings) otherwise. Inputs whose latency does not parse, or whose
// thresholds no traffic could be judged by, are an error.
func OwnTrafficThresholds(in *release.Inputs, platform probe.Thresholds) (probe.Thresholds, error) {
	th := platform
	if in.ErrorRate != nil {
		th.ErrorRate = *in.ErrorRate
	}
	if in.Latency != "" {
		latency, err := time.ParseDuration(in.Latency)
		if err != nil {
			return probe.Thresholds{}, fmt.Errorf("inputs latency: %w", err)
		}
		th.Latency = latency
	}
	if err := th.Validate(); err != nil {
		return probe.Thresholds{}, fmt.Errorf("inputs thresholds: %w", err)
	}
	return th, nil
}

// TrafficPlan is what the gate requests of a member's new copy on one
// iteration: every path at Base, Rounds times over, judged by Thresholds.
type TrafficPlan struct {
	Base       string
	Paths      []string
	Thresholds probe.Thresholds
}

// PlanTraffic decides /checks up to the own traffic. It starts from the pod
// rule (Checks): a new copy whose pods are not all ready, or that restarted,
// is not requested. A member its Canary hands no path is held to its pods
// alone; every other member is held to the same requests, whatever metric
// checks its runtime profile names: the Canary's paths and then the
// readiness path, at the Canary service, judged by the inputs' thresholds
// or else platform's. Thresholds that do not parse, a path that is not URL
// path segments, or a Canary with no service port is a question the gate
// cannot answer, whatever its pods show. request is false when the answer is
// already decided.
func PlanTraffic(q release.Question, in *release.Inputs, c release.Canary, pods []release.Pod, platform probe.Thresholds) (plan TrafficPlan, answer Answer, request bool) {
	m, ok := in.Member(q.Process)
	if !ok {
		return TrafficPlan{}, unanswerable("process %s is no member of Application %s", q.Process, q.Application), false
	}
	podsAnswer := Checks(q, pods)
	paths, err := CanaryPaths(c)
	if err != nil {
		return TrafficPlan{}, unanswerable("%v", err), false
	}
	if len(paths) == 0 {
		return TrafficPlan{}, podsAnswer, false
	}
	th, err := OwnTrafficThresholds(in, platform)
	if err != nil {
		return TrafficPlan{}, unanswerable("%v", err), false
	}
	if m.Readiness.Path != "" {
		if err := probe.CheckPath(m.Readiness.Path); err != nil {
			return TrafficPlan{}, unanswerable("member %s readiness: %v", q.Process, err), false
		}
		paths = append(paths, m.Readiness.Path)
	}
	base, err := probe.CanaryBase(q.Process, q.Namespace, c.Port)
	if err != nil {
		return TrafficPlan{}, unanswerable("Canary %s: %v", c.Name, err), false
	}
	if podsAnswer.Outcome != Yes {
		return TrafficPlan{}, podsAnswer, false
	}
	return TrafficPlan{Base: base, Paths: paths, Thresholds: th}, podsAnswer, true
}

// TrafficAnswer turns the own traffic's verdict into the /checks answer: a
// failing verdict is not yet, with its figures; a passing one is yes, with
// what the pods showed and the figures.
func TrafficAnswer(q release.Question, pods Answer, v probe.Verdict) Answer {
	if !v.Pass {
		return notYet("new copy %s: %s", q.Process, v.Reason)
	}
	return yes("%s; %s", pods.Reason, v.Reason)
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
	if err := probe.CheckPath(in.ProtectedPath); err != nil {
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
	if m.Process != q.Process && PassedOnRecord(q, m) && m.Canary.Phase != release.PhaseWaitingPromotion {
		// Promoted at this revision, or being promoted: it passed this very
		// check when it asked for its own promotion, and Flagger has scaled
		// its new copy down or is about to, so its Canary service may answer
		// nothing now.
		return ProtectedTarget{}, barrier, false
	}
	base, err := probe.CanaryBase(m.Process, q.Namespace, m.Canary.Port)
	if err != nil {
		return ProtectedTarget{}, unanswerable("Canary %s: %v", m.Process, err), false
	}
	return ProtectedTarget{Process: m.Process, Base: base, Path: in.ProtectedPath}, barrier, true
}

// ProtectedAnswer turns the protected path's verdict into the barrier's
// answer: a failing verdict holds the release with its reason.
func ProtectedAnswer(barrier Answer, v probe.Verdict) Answer {
	if !v.Pass {
		return notYet("%s", v.Reason)
	}
	return yes("%s; %s", barrier.Reason, v.Reason)
}
