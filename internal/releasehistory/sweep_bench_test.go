package releasehistory_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// The records the benchmark sweeps: 100 apps of 100 records each. Of an
// app's, one is merged an hour ago with no fact since (a stall), one is
// progressing with a fact ten minutes ago, and 98 finished healthy, one
// every 0.2 days back from 0.4 to 19.8 days ago: 30 of them past the TTL
// of 14 days, the newest five the rollback window.
const (
	benchApps       = 100
	benchPerApp     = 100
	benchSeedWorker = 16
)

func benchRecords(b *testing.B, app string, now time.Time) []rr.Record {
	var out []rr.Record
	for k := range benchPerApp {
		id, err := rr.NewReleaseID(app, fmt.Sprintf("1.0.%d", k), "prod-eu", "prod")
		if err != nil {
			b.Fatal(err)
		}
		var r rr.Record
		switch k {
		case 0:
			r = rr.NewRecord(rr.Release{ID: id}, now.Add(-time.Hour))
		case 1:
			r = rr.NewRecord(rr.Release{ID: id}, now.Add(-2*time.Hour))
			r.State, r.StateAt, r.LastFactAt = rr.StateProgressing, now.Add(-time.Hour), now.Add(-10*time.Minute)
		default:
			at := now.Add(-time.Duration(k) * day / 5)
			r = rr.NewRecord(rr.Release{ID: id}, at.Add(-time.Hour))
			r.State, r.StateAt, r.LastFactAt, r.HealthyAt = rr.StateSuperseded, at, at, at.Add(-30*time.Minute)
		}
		out = append(out, r)
	}
	return out
}

// seedRecords writes the records as the cluster's admin, 16 at a time.
func seedRecords(b *testing.B, cp *testenv.ControlPlane, ns string, now time.Time) {
	work := make(chan rr.Record)
	errs := make(chan error, benchSeedWorker)
	var wg sync.WaitGroup
	for range benchSeedWorker {
		wg.Go(func() {
			for r := range work {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name(), Namespace: ns, Labels: r.Labels()}, Data: r.Data()}
				if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for a := range benchApps {
		for _, r := range benchRecords(b, fmt.Sprintf("app-%03d", a), now) {
			work <- r
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkSweep sweeps 10,000 records on the real API server under the
// sweep's own grant, at the pace the CronJob's client keeps (kubeclient's
// 50 requests a second with a burst of 100): first with a backlog of 3,000
// records past the TTL and 100 stalls to say, then again, when nothing is
// left to do. API requests are counted at the client.
func BenchmarkSweep(b *testing.B) {
	p := rh.SweepPolicy{StallAfter: 45 * time.Minute, TTL: 14 * day, KeepHealthy: 5}
	for range b.N {
		cp := testenv.Shared(b)
		ns, cfg := cp.GrantRecords(b, SweepRBAC, sweepAccount)
		now := time.Now().Truncate(time.Second)
		seedRecords(b, cp, ns, now)
		// The pod's in-cluster config sets no pace, so kubeclient's is the
		// one the CronJob runs at; the test's config carries envtest's.
		cfg.QPS, cfg.Burst = 0, 0
		counted, counter := testenv.Counting(cfg)
		cluster, err := rh.NewKubeSweep(counted, ns)
		if err != nil {
			b.Fatal(err)
		}
		s := &rh.Sweeper{Cluster: cluster, Out: io.Discard, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		start := time.Now()
		swept, err := s.Sweep(context.Background(), p, now)
		first := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if want := (rh.Swept{Records: benchApps * benchPerApp, Raised: benchApps, Deleted: 30 * benchApps}); swept != want {
			b.Fatalf("swept %+v, want %+v", swept, want)
		}
		firstRequests, lists := counter.Total(), counter.Matching("GET", "/configmaps")
		counter.Reset()
		start = time.Now()
		swept, err = s.Sweep(context.Background(), p, now)
		next := time.Since(start)
		if err != nil || swept.Raised != 0 || swept.Deleted != 0 {
			b.Fatalf("the next sweep: %+v %v", swept, err)
		}
		b.ReportMetric(first.Seconds(), "first-s")
		b.ReportMetric(float64(firstRequests), "first-requests")
		b.ReportMetric(float64(lists), "first-lists")
		b.ReportMetric(next.Seconds(), "next-s")
		b.ReportMetric(float64(counter.Total()), "next-requests")
	}
}
