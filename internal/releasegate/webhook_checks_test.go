package releasegate

import (
	"slices"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

func TestChecks(t *testing.T) {
	cases := []struct {
		name    string
		pods    []release.Pod
		outcome Outcome
		reason  string
	}{
		{"a new copy with no pod", nil, NotYet, "has no pod"},
		{"a pod not ready", []release.Pod{pod("a", true, 0), pod("b", false, 0)}, NotYet, "pod b not ready (1 of 2 ready)"},
		{"a pod that restarted", []release.Pod{pod("a", true, 0), pod("b", true, 1)}, NotYet, "pod b restarted 1 times"},
		{"every pod ready, none restarted", []release.Pod{pod("a", true, 0), pod("b", true, 0)}, Yes, "2 pods ready"},
		{"the only pod ready but being deleted: no pod", []release.Pod{deleting(pod("a", true, 0))}, NotYet, "has no pod"},
		{"a pod being deleted is not counted ready", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 0)), pod("c", false, 0)},
			NotYet, "pod c not ready (1 of 2 ready)"},
		{"a pod being deleted beside ready ones is left out", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 0))}, Yes, "1 pods ready"},
		{"a pod being deleted still counts its restarts against a yes", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 2))},
			NotYet, "pod b restarted 2 times"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, Checks(ask, c.pods), c.outcome, c.reason) })
	}
}

// withThresholds is inputs(false) with the platform's thresholds.
func withThresholds() *release.Inputs {
	in := inputs(false)
	in.ErrorRate, in.Latency = new(0.05), "500ms"
	return in
}

// pathsCanary is auth-api's Canary handing paths in every webhook.
func pathsCanary(paths string) release.Canary {
	c := canary("auth-api", flaggerv1.CanaryPhaseProgressing)
	c.Port = 8080
	c.Webhooks = nil
	for range 3 {
		c.Webhooks = append(c.Webhooks, map[string]string{"application": "auth", "process": "auth-api", "revision": rev, MetadataPaths: paths})
	}
	return c
}

var readyPods = []release.Pod{pod("auth-api-0", true, 0), pod("auth-api-1", true, 0)}

// platform are the gate's own thresholds in these tests: not the inputs'.
var platform = owntraffic.Thresholds{ErrorRate: 0.01, Latency: time.Second}

// inputsThresholds are withThresholds' own.
var inputsThresholds = owntraffic.Thresholds{ErrorRate: 0.05, Latency: 500 * time.Millisecond}

func TestPlanTraffic(t *testing.T) {
	const base = "http://auth-api-canary.auth-system.svc.cluster.local:8080"
	rows := []struct {
		name    string
		in      func() *release.Inputs
		canary  func() release.Canary
		pods    []release.Pod
		request bool
		paths   []string
		// thresholds the plan holds; the inputs' when zero.
		thresholds owntraffic.Thresholds
		outcome    Outcome
		reason     string
	}{
		{name: "a member whose checks name a metric is requested every path its Canary hands, then the readiness path",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/","/api/v1"]`) }, pods: readyPods,
			request: true, paths: []string{"/", "/api/v1", "/ready"}, outcome: Yes},
		{name: "a member whose pods are not all ready is not requested",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/"]`) },
			pods:    []release.Pod{pod("auth-api-0", true, 0), pod("auth-api-1", false, 0)},
			outcome: NotYet, reason: "pod auth-api-1 not ready"},
		{name: "a member with no pod is not requested",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/"]`) },
			outcome: NotYet, reason: "has no pod"},
		{name: "a member whose pod restarted is not requested",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/"]`) },
			pods: []release.Pod{pod("auth-api-0", true, 1)}, outcome: NotYet, reason: "restarted 1 times"},
		{name: "a member the Canary hands no path is held to its pods alone",
			in: withThresholds, canary: func() release.Canary { c := pathsCanary(""); c.Webhooks = hooks("auth", rev); return c },
			pods: readyPods, outcome: Yes, reason: "2 pods ready, none restarted"},
		{name: "an empty list of paths is no path",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`[]`) },
			pods: readyPods, outcome: Yes, reason: "2 pods ready"},
		{name: "a member whose checks name no metric is requested all the same",
			in:     func() *release.Inputs { in := withThresholds(); in.Members[0].Checks = nil; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, request: true, paths: []string{"/", "/ready"}, outcome: Yes},
		{name: "latency alone asks for the same requests",
			in:     func() *release.Inputs { in := withThresholds(); in.Members[0].Checks = []string{"latency"}; return in },
			canary: func() release.Canary { return pathsCanary(`["/a"]`) }, pods: readyPods, request: true, paths: []string{"/a", "/ready"}, outcome: Yes},
		{name: "error-rate alone asks for the same requests",
			in: func() *release.Inputs {
				in := withThresholds()
				in.Members[0].Checks = []string{"error-rate"}
				return in
			},
			canary: func() release.Canary { return pathsCanary(`["/a"]`) }, pods: readyPods, request: true, paths: []string{"/a", "/ready"}, outcome: Yes},
		{name: "a member with a TCP readiness probe is requested its Route paths alone",
			in: func() *release.Inputs {
				in := withThresholds()
				in.Members[0].Readiness = release.Readiness{TCP: 8080}
				return in
			},
			canary: func() release.Canary { return pathsCanary(`["/a"]`) }, pods: readyPods, request: true, paths: []string{"/a"}, outcome: Yes},
		{name: "inputs with no thresholds hold the member to the platform's",
			in: func() *release.Inputs { return inputs(false) }, canary: func() release.Canary { return pathsCanary(`["/"]`) },
			pods: readyPods, request: true, paths: []string{"/", "/ready"}, thresholds: platform, outcome: Yes},
		{name: "a member with no metric check and no thresholds in its inputs is held to the platform's",
			in:     func() *release.Inputs { in := inputs(false); in.Members[0].Checks = nil; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) },
			pods:   readyPods, request: true, paths: []string{"/", "/ready"}, thresholds: platform, outcome: Yes},
		{name: "an error rate alone in the inputs takes the platform's latency",
			in:     func() *release.Inputs { in := withThresholds(); in.Latency = ""; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, request: true, paths: []string{"/", "/ready"},
			thresholds: owntraffic.Thresholds{ErrorRate: 0.05, Latency: time.Second}, outcome: Yes},
		{name: "a latency alone in the inputs takes the platform's error rate",
			in:     func() *release.Inputs { in := withThresholds(); in.ErrorRate = nil; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, request: true, paths: []string{"/", "/ready"},
			thresholds: owntraffic.Thresholds{ErrorRate: 0.01, Latency: 500 * time.Millisecond}, outcome: Yes},
		{name: "a latency that does not parse cannot be answered",
			in:     func() *release.Inputs { in := withThresholds(); in.Latency = "soon"; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, outcome: Unanswerable, reason: "inputs latency"},
		{name: "thresholds that do not parse cannot be answered even with its pods not ready",
			in:     func() *release.Inputs { in := withThresholds(); in.Latency = "soon"; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, outcome: Unanswerable, reason: "inputs latency"},
		{name: "a being-deleted pod is no pod of the copy",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/"]`) },
			pods: []release.Pod{{Name: "auth-api-0", Ready: true, Running: true, Terminating: true}}, outcome: NotYet, reason: "has no pod"},
		{name: "a zero latency threshold cannot be answered",
			in:     func() *release.Inputs { in := withThresholds(); in.Latency = "0s"; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, outcome: Unanswerable, reason: "not positive"},
		{name: "a Canary with no service port cannot be answered",
			in: withThresholds, canary: func() release.Canary { c := pathsCanary(`["/"]`); c.Port = 0; return c },
			pods: readyPods, outcome: Unanswerable, reason: "service port 0"},
		{name: "a path with // cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a//b"]`) }, pods: readyPods, outcome: Unanswerable, reason: "empty segment"},
		{name: "a path with .. cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a/../admin"]`) }, pods: readyPods, outcome: Unanswerable, reason: `".." segment`},
		{name: "a path with a scheme and host cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["http://evil.example/"]`) }, pods: readyPods, outcome: Unanswerable, reason: "does not start with /"},
		{name: "a path with a query cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a?b=1"]`) }, pods: readyPods, outcome: Unanswerable, reason: "not allowed"},
		{name: "a path with a fragment cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a#b"]`) }, pods: readyPods, outcome: Unanswerable, reason: "not allowed"},
		{name: "a path with a space cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a b"]`) }, pods: readyPods, outcome: Unanswerable, reason: "not allowed"},
		{name: "a path with a control character cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`["/a\u0000"]`) }, pods: readyPods, outcome: Unanswerable, reason: "not allowed"},
		{name: "a readiness path that is not URL path segments cannot be answered",
			in:     func() *release.Inputs { in := withThresholds(); in.Members[0].Readiness.Path = "/ready/.."; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, outcome: Unanswerable, reason: "readiness"},
		{name: "paths that are not a JSON array cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`"/"`) }, pods: readyPods, outcome: Unanswerable, reason: "not a JSON array"},
		{name: "paths given as null cannot be answered either",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`null`) }, pods: readyPods, outcome: Unanswerable, reason: "not a JSON array of paths: null"},
		{name: "webhooks that hand two lists cannot be answered",
			in: withThresholds, canary: func() release.Canary {
				c := pathsCanary(`["/"]`)
				c.Webhooks[2] = map[string]string{MetadataPaths: `["/x"]`}
				return c
			},
			pods: readyPods, outcome: Unanswerable, reason: "two lists of paths"},
		{name: "more paths than the sender takes cannot be answered",
			in: withThresholds, canary: func() release.Canary { return pathsCanary(`[` + manyPaths(owntraffic.MaxPaths+1) + `]`) },
			pods: readyPods, outcome: Unanswerable, reason: "more than"},
		{name: "a process that is no member cannot be answered",
			in:     func() *release.Inputs { in := withThresholds(); in.Members = in.Members[1:]; return in },
			canary: func() release.Canary { return pathsCanary(`["/"]`) }, pods: readyPods, outcome: Unanswerable, reason: "no member"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			plan, answer, request := PlanTraffic(ask, r.in(), r.canary(), r.pods, platform)
			if request != r.request {
				t.Fatalf("request %v, want %v (answer %+v)", request, r.request, answer)
			}
			want(t, answer, r.outcome, r.reason)
			if !request {
				return
			}
			if plan.Base != base || !slices.Equal(plan.Paths, r.paths) {
				t.Fatalf("plan %+v, want %s %v", plan, base, r.paths)
			}
			th := r.thresholds
			if th == (owntraffic.Thresholds{}) {
				th = inputsThresholds
			}
			if plan.Thresholds != th {
				t.Fatalf("thresholds %+v, want %+v", plan.Thresholds, th)
			}
		})
	}
}

func manyPaths(n int) string {
	out := ""
	for i := range n {
		if i > 0 {
			out += ","
		}
		out += `"/p` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `"`
	}
	return out
}

func TestTrafficAnswer(t *testing.T) {
	th := owntraffic.Thresholds{ErrorRate: 0.1, Latency: 200 * time.Millisecond}
	pods := yes("new copy auth-api: 2 pods ready, none restarted")
	fail := owntraffic.Answer{Path: "/api", Status: 503}
	rows := []struct {
		name    string
		traffic owntraffic.Traffic
		outcome Outcome
		reason  string
	}{
		{name: "a failed share at the threshold passes",
			traffic: owntraffic.Traffic{Requests: 30, Failed: 3, Answered: 30, P95: 50 * time.Millisecond, Failures: []owntraffic.Answer{fail}},
			outcome: Yes, reason: "2 pods ready, none restarted; own traffic: 3 of 30 requests failed, p95 50ms"},
		{name: "a failed share over the threshold is not yet, with the figures",
			traffic: owntraffic.Traffic{Requests: 30, Failed: 4, Answered: 30, P95: 50 * time.Millisecond, Failures: []owntraffic.Answer{fail}},
			outcome: NotYet, reason: "new copy auth-api: own traffic: failed share 13.33% over 10% (4 of 30 requests failed, p95 50ms; first /api: 503)"},
		{name: "a p95 at the threshold passes",
			traffic: owntraffic.Traffic{Requests: 30, Answered: 30, P95: 200 * time.Millisecond}, outcome: Yes, reason: "p95 200ms"},
		{name: "a p95 over the threshold is not yet",
			traffic: owntraffic.Traffic{Requests: 30, Answered: 30, P95: 201 * time.Millisecond}, outcome: NotYet, reason: "p95 201ms over 200ms"},
		{name: "no request succeeded is no",
			traffic: owntraffic.Traffic{Requests: 3, Failed: 3, Failures: []owntraffic.Answer{{Path: "/", Cause: "connection refused"}}},
			outcome: NotYet, reason: "no request succeeded"},
		{name: "no request at all is no",
			traffic: owntraffic.Traffic{}, outcome: NotYet, reason: "no request succeeded"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			want(t, TrafficAnswer(ask, pods, owntraffic.Judge(r.traffic, th)), r.outcome, r.reason)
		})
	}
}

func TestThresholds(t *testing.T) {
	in := inputs(false)
	if th, err := OwnTrafficThresholds(in, platform); err != nil || th != platform {
		t.Fatalf("inputs with no thresholds read as %+v, %v; want the platform's", th, err)
	}
	in.ErrorRate, in.Latency = new(1.0), "2s"
	th, err := OwnTrafficThresholds(in, platform)
	if err != nil || th.ErrorRate != 1 || th.Latency != 2*time.Second {
		t.Fatalf("thresholds %+v %v", th, err)
	}
	in.ErrorRate = new(1.5)
	if _, err := OwnTrafficThresholds(in, platform); err == nil {
		t.Fatal("an error rate over 1 was accepted")
	}
	in.ErrorRate, in.Latency = new(0.1), "soon"
	if _, err := OwnTrafficThresholds(in, platform); err == nil {
		t.Fatal("a latency that is no duration was accepted")
	}
}

func FuzzCanaryPaths(f *testing.F) {
	for _, s := range []string{`["/","/api"]`, `[]`, `"/"`, `["//x"]`, `["/a/../b"]`, `["http://x/"]`, `["/a?b"]`, `["/a#b"]`, `["/a b"]`, "[\"/\\u0001\"]", `[1]`, `["/%2e%2e/"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		paths, err := CanaryPaths(release.Canary{Name: "x", Webhooks: []map[string]string{{MetadataPaths: raw}}})
		if err != nil {
			return
		}
		for _, p := range paths {
			if owntraffic.CheckPath(p) != nil {
				t.Fatalf("accepted path %q the sender refuses", p)
			}
		}
	})
}
