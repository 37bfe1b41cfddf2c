package releasehistory_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// TestDORAMetrics: the four figures of the history, per service, as a
// scrape reads them; a drift after healthy is no change failure.
func TestDORAMetrics(t *testing.T) {
	recs := history(t)
	drifted := healthy(rec(t, "5", rr.StateHealthy, ago(30*time.Minute), ago(20*time.Minute)), ago(20*time.Minute))
	drifted.Drift, drifted.EmittedLive = "degraded after it was healthy: pods crash", []string{"deploying", "upgraded"}
	recs = append(recs, drifted)
	c := rh.Collector{Cache: rh.NewCache(&fakeRecords{recs: recs}, 5*time.Second, (&fakeClock{at: now}).Now)}
	want := `
# HELP release_record_change_failures_total Deployments aborted or degraded before healthy; a drift after healthy is not one.
# TYPE release_record_change_failures_total counter
release_record_change_failures_total{app="docs",cluster="prod-eu",env="prod"} 1
# HELP release_record_deployments_total Finished deployments, by outcome: succeeded (reached healthy without failing first), failed (aborted or degraded before healthy) or abandoned.
# TYPE release_record_deployments_total counter
release_record_deployments_total{app="docs",cluster="prod-eu",env="prod",outcome="abandoned"} 0
release_record_deployments_total{app="docs",cluster="prod-eu",env="prod",outcome="failed"} 1
release_record_deployments_total{app="docs",cluster="prod-eu",env="prod",outcome="succeeded"} 3
# HELP release_record_unreadable_records Records left out of the figures: they do not decode, or hold no state.
# TYPE release_record_unreadable_records gauge
release_record_unreadable_records 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "release_record_deployments_total", "release_record_change_failures_total",
		"release_record_unreadable_records"); err != nil {
		t.Fatal(err)
	}
	// Lead times 1 h (v1), 30 min (v3), 10 min (v5); v2 failed at 10:00
	// and v3 turned healthy at 11:00: one restore of an hour. Each row is
	// docs' cumulative count at every bucket's upper bound, then the sum.
	for _, h := range []struct {
		name, help string
		counts     [11]int
		sum        int
	}{
		{"release_record_lead_time_seconds", "Time from a release's merge to its first healthy.", [11]int{0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 3}, 6000},
		{"release_record_restore_time_seconds", "Time from a change failure to the service's next healthy release.", [11]int{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, 3600},
	} {
		series := `{app="docs",cluster="prod-eu",env="prod"`
		want := fmt.Sprintf("# HELP %[1]s %[2]s\n# TYPE %[1]s histogram\n", h.name, h.help)
		for i, le := range []string{"60", "300", "600", "1800", "3600", "7200", "21600", "86400", "259200", "604800", "+Inf"} {
			want += fmt.Sprintf("%s_bucket%s,le=%q} %d\n", h.name, series, le, h.counts[i])
		}
		want += fmt.Sprintf("%[1]s_sum%[2]s} %[3]d\n%[1]s_count%[2]s} %[4]d\n", h.name, series, h.sum, h.counts[10])
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), h.name); err != nil {
			t.Errorf("%s: %v", h.name, err)
		}
	}
	// The shop's release is in flight: no figures for it yet.
	if n := testutil.CollectAndCount(c, "release_record_deployments_total"); n != 3 {
		t.Fatalf("%d deployment series, want docs' three", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestDORAMetricsRecomputed: a new cache over the same records (a restart)
// says the same figures.
func TestDORAMetricsRecomputed(t *testing.T) {
	src := &fakeRecords{recs: history(t)}
	first := testutil.ToFloat64(onlyDocsFailed(rh.Collector{Cache: rh.NewCache(src, time.Second, (&fakeClock{at: now}).Now)}))
	again := testutil.ToFloat64(onlyDocsFailed(rh.Collector{Cache: rh.NewCache(src, time.Second, (&fakeClock{at: now}).Now)}))
	if first != 1 || again != 1 {
		t.Fatalf("failed deployments %v then %v, want 1 and 1", first, again)
	}
}

// onlyDocsFailed is the one series of docs' change failures.
func onlyDocsFailed(c rh.Collector) prometheus.Collector {
	return filtered{c, "release_record_change_failures_total"}
}

type filtered struct {
	rh.Collector
	name string
}

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.Collector.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}

// TestDORAMetricsUnreadable: a failed read fails the scrape rather than
// say no deployments.
func TestDORAMetricsUnreadable(t *testing.T) {
	c := rh.Collector{Cache: rh.NewCache(&fakeRecords{err: errors.New("down")}, time.Second, (&fakeClock{at: now}).Now)}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "down") {
		t.Fatalf("gather: %v", err)
	}
}
