package releasegate_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// BenchmarkChecksOwnTraffic measures what own traffic adds to a whole /checks
// answer: the gate under its grant against the real API server, a member
// whose Canary hands 9 Route paths (10 with the readiness path, 30 requests)
// to a new copy that takes 20 ms per answer. Baselines in the same run: the
// same member's /checks held to its pods alone, and one round trip to the
// copy on a fresh connection.
func BenchmarkChecksOwnTraffic(b *testing.B) {
	const serverTime = 20 * time.Millisecond
	cp := testenv.Shared(b)
	flaggerNS := cp.Namespace(b)
	flaggerPod(b, cp, flaggerNS, "flagger-0", flagger)
	services := newCanaryServices()
	gate := serveWithOwnTraffic(b, cp.Grant(b, gateRBAC, gateNS, gateSA), flaggerNS, services, owntraffic.WithRequestTimeout(owntraffic.DefaultRequestTimeout))
	copySrv := newCopyServer(b, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(serverTime)
		_, _ = w.Write([]byte("ok"))
	})

	paths := make([]string, 9)
	for i := range paths {
		paths[i] = `"/route/` + strconv.Itoa(i) + `"`
	}
	podsOnly, withTraffic := cp.Namespace(b), cp.Namespace(b)
	for _, ns := range []string{podsOnly, withTraffic} {
		a := authApp(ns)
		checked := map[string]bool{}
		if ns == withTraffic {
			a.member("auth-api").paths = "[" + strings.Join(paths, ",") + "]"
			checked["auth-api"] = true
		}
		a.inputs = checkedInputs(a, checked, `,"errorRate":0.05,"latency":"500ms"`)
		a.apply(b, cp)
		services.route(ns, "auth-api", copySrv.srv.Listener.Addr().String())
	}

	var pods, traffic, roundTrip time.Duration
	for b.Loop() {
		start := time.Now()
		if code, reason := gate.ask(b, flagger, "/checks", payload(podsOnly, "auth-api", rev)); code != http.StatusOK {
			b.Fatalf("pods alone: %d %s", code, reason)
		}
		pods += time.Since(start)

		start = time.Now()
		code, reason := gate.ask(b, flagger, "/checks", payload(withTraffic, "auth-api", rev))
		if code != http.StatusOK || !strings.Contains(reason, "0 of 30 requests failed") {
			b.Fatalf("own traffic: %d %s", code, reason)
		}
		traffic += time.Since(start)

		start = time.Now()
		client := &http.Client{Transport: &http.Transport{}}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, copySrv.srv.URL+"/", http.NoBody)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		client.CloseIdleConnections()
		roundTrip += time.Since(start)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	added := traffic - pods
	b.ReportMetric(ms(pods), "pods-alone-ms")
	b.ReportMetric(ms(traffic), "own-traffic-ms")
	b.ReportMetric(ms(added), "added-ms")
	b.ReportMetric(ms(roundTrip), "roundtrip-ms")
	b.ReportMetric(float64(added)/float64(roundTrip), "added/roundtrip")
	b.Logf("/checks pods alone %.1f ms, with 30 own requests %.1f ms: %.1f ms added, %.2f round trips of %.1f ms",
		ms(pods), ms(traffic), ms(added), float64(added)/float64(roundTrip), ms(roundTrip))
}
