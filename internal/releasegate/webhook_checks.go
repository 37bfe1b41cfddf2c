package releasegate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// checks answers rollout, once per analysis iteration: does the member's new
// copy pass.
type checks struct{ g *Gate }

func (checks) route() string { return WebhookChecks }

func (checks) shows() routeOptions { return routeOptions{noted: true, configMaps: true} }

// read lists the asking member's copies beside may-start's reads: its
// template is held to may-start's rule, and its new copy's pods decide.
func (w checks) read(ctx context.Context, q release.Question) decide {
	g := w.g
	reads := g.readCopies(ctx, q, byInstance(q))
	steps := g.readSteps(ctx, q, reads.deployments)
	return func(a asked) (Answer, error) {
		if started, err := steps.answer(a); err != nil || started.Outcome != Yes {
			return started, err
		}
		pods, err := g.newCopyPods(ctx, q, reads)
		if err != nil {
			return Answer{}, err
		}
		return g.checkOwnTraffic(ctx, a, pods)
	}
}

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

// checkOwnTraffic decides /checks from the new copy's pods and, where the
// member's Canary hands paths, its own traffic. A request the sender refuses
// (a hostile path or base) or one cut short by the answer's deadline is a
// question the gate cannot answer.
func (g *Gate) checkOwnTraffic(ctx context.Context, a asked, pods []release.Pod) (Answer, error) {
	plan, answer, request := PlanTraffic(a.q, a.in, a.own, pods, g.config.OwnTraffic)
	if !request {
		return answer, nil
	}
	traffic, err := g.sender.OwnTraffic(ctx, plan.Base, plan.Paths)
	if err != nil {
		return Answer{}, fmt.Errorf("own traffic to %s: %w", a.q.Process, err)
	}
	return TrafficAnswer(a.q, answer, owntraffic.Judge(traffic, plan.Thresholds)), nil
}

// MetadataPaths is the key of a Canary webhook's metadata that hands the gate
// the member's Route paths: a JSON array of URL paths, encoded as one string
// because Flagger's metadata is a map of strings. A Canary without it hands
// no path.
const MetadataPaths = "paths"

// CanaryPaths reads the Route paths a Canary's webhooks hand the gate. Every
// webhook that carries the key must carry the same list, and each path must
// be URL path segments (owntraffic.CheckPath): the gate holds API access, so it
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
	if len(paths) > owntraffic.MaxPaths {
		return nil, fmt.Errorf("Canary %s hands %d paths, more than %d", c.Name, len(paths), owntraffic.MaxPaths)
	}
	for _, p := range paths {
		if err := owntraffic.CheckPath(p); err != nil {
			return nil, fmt.Errorf("Canary %s: %w", c.Name, err)
		}
	}
	return paths, nil
}

// OwnTrafficThresholds are the own-traffic thresholds a member is held to:
// the inputs' errorRate and latency where they carry them, the platform's
// (the gate's own settings) otherwise. Inputs whose latency does not parse,
// or whose thresholds no traffic could be judged by, are an error.
func OwnTrafficThresholds(in *release.Inputs, platform owntraffic.Thresholds) (owntraffic.Thresholds, error) {
	th := platform
	if in.ErrorRate != nil {
		th.ErrorRate = *in.ErrorRate
	}
	if in.Latency != "" {
		latency, err := time.ParseDuration(in.Latency)
		if err != nil {
			return owntraffic.Thresholds{}, fmt.Errorf("inputs latency: %w", err)
		}
		th.Latency = latency
	}
	if err := th.Validate(); err != nil {
		return owntraffic.Thresholds{}, fmt.Errorf("inputs thresholds: %w", err)
	}
	return th, nil
}

// TrafficPlan is what the gate requests of a member's new copy on one
// iteration: every path at Base, Rounds times over, judged by Thresholds.
type TrafficPlan struct {
	Base       string
	Paths      []string
	Thresholds owntraffic.Thresholds
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
func PlanTraffic(q release.Question, in *release.Inputs, c release.Canary, pods []release.Pod, platform owntraffic.Thresholds) (plan TrafficPlan, answer Answer, request bool) {
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
		if err := owntraffic.CheckPath(m.Readiness.Path); err != nil {
			return TrafficPlan{}, unanswerable("member %s readiness: %v", q.Process, err), false
		}
		paths = append(paths, m.Readiness.Path)
	}
	base, err := owntraffic.CanaryBase(q.Process, q.Namespace, c.Port)
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
func TrafficAnswer(q release.Question, pods Answer, v owntraffic.Verdict) Answer {
	if !v.Pass {
		return notYet("new copy %s: %s", q.Process, v.Reason)
	}
	return yes("%s; %s", pods.Reason, v.Reason)
}
