package owntraffic

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func answered(path string, status int, latency time.Duration) Answer {
	return Answer{Path: path, Status: status, Latency: latency}
}

func TestRequestFailed(t *testing.T) {
	cases := []struct {
		status int
		failed bool
	}{
		{0, true}, // no answer
		{500, true},
		{502, true},
		{503, true},
		{599, true},
		{200, false},
		{204, false},
		{301, false},
		{302, false},
		{308, false},
		{401, false},
		{403, false},
		{404, false},
		{429, false},
	}
	for _, c := range cases {
		if got := RequestFailed(c.status); got != c.failed {
			t.Errorf("RequestFailed(%d) = %v, want %v", c.status, got, c.failed)
		}
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	var twenty []Answer
	for i := 1; i <= 20; i++ {
		twenty = append(twenty, answered("/p", 200, time.Duration(i)*ms))
	}
	var many []Answer
	for range 7 {
		many = append(many, Answer{Path: fmt.Sprintf("/d%d", len(many)), Cause: "connection refused"})
	}
	cases := []struct {
		name     string
		answers  []Answer
		want     Traffic
		failures []string
	}{
		{name: "nothing requested", want: Traffic{}},
		{
			name:    "p95 is the nearest rank of twenty",
			answers: twenty,
			want:    Traffic{Requests: 20, Answered: 20, P95: 19 * ms},
		},
		{
			name:    "p95 of one answer is that answer",
			answers: []Answer{answered("/", 200, 7*ms)},
			want:    Traffic{Requests: 1, Answered: 1, P95: 7 * ms},
		},
		{
			name: "a 5xx is answered and failed, no answer is neither answered nor timed",
			answers: []Answer{
				answered("/a", 200, 10*ms), answered("/b", 503, 30*ms),
				{Path: "/c", Cause: "no answer within 2s"}, answered("/d", 404, 20*ms),
			},
			want:     Traffic{Requests: 4, Answered: 3, Failed: 2, P95: 30 * ms},
			failures: []string{"/b: 503", "/c: no answer within 2s"},
		},
		{
			name:     "only the first failures are kept, in request order",
			answers:  many,
			want:     Traffic{Requests: 7, Failed: 7},
			failures: []string{"/d0: connection refused", "/d1: connection refused", "/d2: connection refused", "/d3: connection refused", "/d4: connection refused"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Summarize(c.answers)
			var failures []string
			for _, f := range got.Failures {
				failures = append(failures, f.String())
			}
			got.Failures = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Summarize = %+v, want %+v", got, c.want)
			}
			if strings.Join(failures, "|") != strings.Join(c.failures, "|") {
				t.Errorf("failures = %q, want %q", failures, c.failures)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	ms := time.Millisecond
	th := Thresholds{ErrorRate: 0.1, Latency: 200 * ms}
	first := []Answer{{Path: "/api", Status: 503}}
	cases := []struct {
		name    string
		traffic Traffic
		th      Thresholds
		pass    bool
		reason  string
	}{
		{
			name:    "every request succeeded fast",
			traffic: Traffic{Requests: 30, Answered: 30, P95: 25 * ms},
			th:      th, pass: true,
			reason: "own traffic: 0 of 30 requests failed, p95 25ms",
		},
		{
			name:    "failed share exactly at the error rate passes",
			traffic: Traffic{Requests: 30, Answered: 30, Failed: 3, P95: 25 * ms, Failures: first},
			th:      th, pass: true,
			reason: "own traffic: 3 of 30 requests failed, p95 25ms",
		},
		{
			name:    "failed share over the error rate fails",
			traffic: Traffic{Requests: 30, Answered: 30, Failed: 4, P95: 25 * ms, Failures: first},
			th:      th,
			reason:  "own traffic: failed share 13.33% over 10% (4 of 30 requests failed, p95 25ms; first /api: 503)",
		},
		{
			name:    "p95 exactly at the latency passes",
			traffic: Traffic{Requests: 30, Answered: 30, P95: 200 * ms},
			th:      th, pass: true,
			reason: "own traffic: 0 of 30 requests failed, p95 200ms",
		},
		{
			name:    "p95 over the latency fails",
			traffic: Traffic{Requests: 30, Answered: 30, P95: 200*ms + 1},
			th:      th,
			reason:  "own traffic: p95 200.000001ms over 200ms (0 of 30 requests failed, p95 200.000001ms)",
		},
		{
			name:    "both over: both named",
			traffic: Traffic{Requests: 30, Answered: 30, Failed: 30 - 1, P95: time.Second, Failures: first},
			th:      th,
			reason:  "own traffic: failed share 96.67% over 10%, p95 1s over 200ms (29 of 30 requests failed, p95 1s; first /api: 503)",
		},
		{
			name:    "no request succeeded: no data is no, even with every failure allowed",
			traffic: Traffic{Requests: 30, Failed: 30, Failures: []Answer{{Path: "/", Cause: "connection refused"}}},
			th:      Thresholds{ErrorRate: 1, Latency: time.Hour},
			reason:  "own traffic: no request succeeded (30 of 30 requests failed, p95 0s; first /: connection refused)",
		},
		{
			name:    "no request at all is no data",
			traffic: Traffic{},
			th:      th,
			reason:  "own traffic: no request succeeded (0 of 0 requests failed, p95 0s)",
		},
		{
			name:    "a zero error rate passes only no failure",
			traffic: Traffic{Requests: 30, Answered: 30, Failed: 1, P95: ms, Failures: first},
			th:      Thresholds{ErrorRate: 0, Latency: time.Second},
			reason:  "own traffic: failed share 3.33% over 0% (1 of 30 requests failed, p95 1ms; first /api: 503)",
		},
		{
			name:    "a third failed at an error rate of a third passes",
			traffic: Traffic{Requests: 9, Answered: 9, Failed: 3, P95: ms},
			th:      Thresholds{ErrorRate: 1.0 / 3, Latency: time.Second},
			pass:    true,
			reason:  "own traffic: 3 of 9 requests failed, p95 1ms",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Judge(c.traffic, c.th)
			if got.Pass != c.pass || got.Reason != c.reason {
				t.Errorf("Judge = %+v\nwant pass=%v reason %q", got, c.pass, c.reason)
			}
		})
	}
}

func TestFailedShare(t *testing.T) {
	cases := []struct {
		traffic Traffic
		want    float64
	}{
		{Traffic{}, 0},
		{Traffic{Requests: 30, Failed: 3}, 0.1},
		{Traffic{Requests: 9, Failed: 9}, 1},
	}
	for _, c := range cases {
		if got := c.traffic.FailedShare(); got != c.want {
			t.Errorf("%+v.FailedShare() = %v, want %v", c.traffic, got, c.want)
		}
	}
}

func TestThresholdsValidate(t *testing.T) {
	cases := []struct {
		th Thresholds
		ok bool
	}{
		{Thresholds{ErrorRate: 0.05, Latency: 500 * time.Millisecond}, true},
		{Thresholds{ErrorRate: 0, Latency: time.Millisecond}, true},
		{Thresholds{ErrorRate: 1, Latency: time.Hour}, true},
		{Thresholds{ErrorRate: -0.01, Latency: time.Second}, false},
		{Thresholds{ErrorRate: 1.5, Latency: time.Second}, false},
		{Thresholds{ErrorRate: math.NaN(), Latency: time.Second}, false},
		{Thresholds{ErrorRate: 0.1}, false},
		{Thresholds{ErrorRate: 0.1, Latency: -time.Second}, false},
	}
	for _, c := range cases {
		if err := c.th.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v.Validate() = %v, want ok=%v", c.th, err, c.ok)
		}
	}
}

func TestProtectedVerdict(t *testing.T) {
	cases := []struct {
		answer Answer
		pass   bool
		reason string
	}{
		{answered("/admin", 200, 0), false, "E_CLIENT_OPEN: shop-api serves /admin to anyone"},
		{answered("/admin", 204, 0), false, "E_CLIENT_OPEN: shop-api serves /admin to anyone"},
		{answered("/admin", 299, 0), false, "E_CLIENT_OPEN: shop-api serves /admin to anyone"},
		{answered("/admin", 401, 0), true, "shop-api answers /admin with 401"},
		{answered("/admin", 403, 0), true, "shop-api answers /admin with 403"},
		{answered("/admin", 302, 0), true, "shop-api answers /admin with 302"},
		{answered("/admin", 404, 0), true, "shop-api answers /admin with 404"},
		{answered("/admin", 503, 0), true, "shop-api answers /admin with 503"},
		{Answer{Path: "/admin", Cause: "connection refused"}, false, "shop-api did not answer /admin (connection refused), so it is not shown protected"},
	}
	for _, c := range cases {
		got := ProtectedVerdict("shop-api", c.answer)
		if got.Pass != c.pass || got.Reason != c.reason {
			t.Errorf("ProtectedVerdict(%v) = %+v, want pass=%v %q", c.answer, got, c.pass, c.reason)
		}
	}
}

func TestCanaryBase(t *testing.T) {
	cases := []struct {
		process, namespace string
		port               int32
		want               string
	}{
		{"shop-api", "shop", 8080, "http://shop-api-canary.shop.svc.cluster.local:8080"},
		{"ui", "team-a", 1, "http://ui-canary.team-a.svc.cluster.local:1"},
		{"ui", "team-a", 65535, "http://ui-canary.team-a.svc.cluster.local:65535"},
		{"ui", "team-a", 0, ""}, // a Canary with no service port
		{"ui", "team-a", -1, ""},
		{"ui", "team-a", 65536, ""},
		{"Shop", "shop", 80, ""},
		{"shop.api", "shop", 80, ""},
		{"shop/../x", "shop", 80, ""},
		{strings.Repeat("a", 57), "shop", 80, ""},
		{"shop", "", 80, ""},
		{"shop", "evil.com:80/#", 80, ""},
	}
	for _, c := range cases {
		got, err := CanaryBase(c.process, c.namespace, c.port)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("CanaryBase(%q, %q, %d) = %q, %v; want %q", c.process, c.namespace, c.port, got, err, c.want)
		}
	}
}

func TestCheckBase(t *testing.T) {
	cases := []struct {
		base string
		ok   bool
	}{
		{"http://shop-canary.shop.svc.cluster.local:8080", true},
		{"https://shop.example.com", true},
		{"http://127.0.0.1:9", true},
		{"http://shop:8080/", false},
		{"http://shop:8080/x", false},
		{"http://shop:8080?x", false},
		{"http://shop:8080?", false},
		{"http://shop:8080#x", false},
		{"http://user:pw@shop:8080", false},
		{"ftp://shop", false},
		{"shop:8080", false},
		{"http://", false},
		{"http://shop\x7f", false},
		{"", false},
	}
	for _, c := range cases {
		if _, err := checkBase(c.base); (err == nil) != c.ok {
			t.Errorf("checkBase(%q) = %v, want ok=%v", c.base, err, c.ok)
		}
	}
}
