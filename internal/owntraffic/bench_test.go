package owntraffic

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkOwnTraffic measures what the own-traffic check adds to a /checks
// answer: 10 paths, 3 rounds, against a member that takes 20 ms per answer,
// as a ratio to one round trip to the same member measured in the same run.
// Both start without a kept-alive connection, as the first iteration of a
// release does.
func BenchmarkOwnTraffic(b *testing.B) {
	const serverTime = 20 * time.Millisecond
	m := newMemberB(b, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(serverTime)
		_, _ = w.Write([]byte("ok"))
	})
	paths := make([]string, 10)
	for i := range paths {
		paths[i] = "/path/" + strconv.Itoa(i)
	}
	base, err := CanaryBase("shop-api", "shop", 8080)
	if err != nil {
		b.Fatal(err)
	}
	dial := WithDial(clusterDial(m.srv.Listener.Addr().String()))
	var roundTrip, check time.Duration
	for b.Loop() {
		start := time.Now()
		one := New(dial)
		if a := get(b.Context(), one.client, one.timeout, base+"/"); a.Status != http.StatusOK {
			b.Fatalf("baseline answer %v", a)
		}
		roundTrip += time.Since(start)

		start = time.Now()
		traffic, err := New(dial).OwnTraffic(b.Context(), base, paths)
		if err != nil || traffic.Requests != 30 || traffic.Failed != 0 {
			b.Fatalf("traffic %+v, %v", traffic, err)
		}
		check += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(roundTrip.Microseconds())/1000/n, "roundtrip-ms")
	b.ReportMetric(float64(check.Microseconds())/1000/n, "check-ms")
	b.ReportMetric(float64(check)/float64(roundTrip), "check/roundtrip")
}
