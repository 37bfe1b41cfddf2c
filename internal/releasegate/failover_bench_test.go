package releasegate_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// BenchmarkFailover measures, with the default Lease timings, how long after
// the leader is stopped the other replica leads: 20 failovers by SIGTERM
// (the Lease released) and 20 by SIGKILL (the Lease left to expire), each
// reported as p50 and max. docs/benchmarks.md records the figures.
//
//	go test -run '^$' -bench Failover -benchtime 1x ./internal/releasegate/
func BenchmarkFailover(b *testing.B) {
	cp := testenv.Own(b)
	leader := releasegate.DefaultLeader
	p := newPair(b, cp, leader)
	a, c := p.start(), p.start()
	current := p.leaderAmong(time.Minute, a, c)
	follower := map[*replica]*replica{a: c, c: a}[current]
	for b.Loop() {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			var took []time.Duration
			for range 20 {
				var d time.Duration
				current, follower, d = p.failover(current, follower, sig, leader.LeaseDuration+leader.RetryPeriod+10*time.Second)
				took = append(took, d)
			}
			slices.Sort(took)
			name := map[syscall.Signal]string{syscall.SIGTERM: "sigterm", syscall.SIGKILL: "sigkill"}[sig]
			b.ReportMetric(took[len(took)/2].Seconds(), name+"-p50-s")
			b.ReportMetric(took[len(took)-1].Seconds(), name+"-max-s")
		}
	}
}
