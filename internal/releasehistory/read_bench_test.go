package releasehistory_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// readRepeats is how many times each answer is timed; the median is said.
const readRepeats = 15

// BenchmarkReadAPI answers the read API, /metrics and the page over the
// sweep benchmark's 10,000 records on the real API server, under the
// service's own grant at the pace its client keeps, beside one ConfigMap
// list of the same records. Cold is an answer that reads (the paged
// list); the others answer from the cache, over HTTP.
func BenchmarkReadAPI(b *testing.B) {
	for range b.N {
		cp := testenv.Shared(b)
		ns, cfg := cp.GrantRecords(b, ServiceRBAC, serviceAccount)
		now := time.Now().Truncate(time.Second)
		seedRecords(b, cp, ns, now)
		cfg.QPS, cfg.Burst = 0, 0
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		selector := labels.SelectorFromSet(labels.Set{rr.LabelManagedBy: rr.ManagedBy}).String()
		list := median(b, func() {
			got, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil || len(got.Items) != benchApps*benchPerApp {
				b.Fatalf("one list: %v", err)
			}
		})
		b.ReportMetric(ms(list), "list-ms")

		sweep, err := rh.NewKubeSweep(cfg, ns)
		if err != nil {
			b.Fatal(err)
		}
		var clock time.Time
		cache := rh.NewCache(rh.KubeRecords{List: sweep.List}, rh.DefaultMaxAge, func() time.Time { return clock })
		a := &rh.API{Cache: cache, KeepHealthy: 5, Logger: discard, Now: func() time.Time { return now }, Scrapers: scrapersAt(b, "127.0.0.1")}
		mux := http.NewServeMux()
		a.Routes(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		ask := func(path string) func() {
			return func() {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", path, resp.StatusCode)
				}
			}
		}
		// Each cold answer is at a clock past the last read's MaxAge.
		cold := median(b, func() { clock = clock.Add(rh.DefaultMaxAge); ask("/v1/releases")() })
		b.ReportMetric(ms(cold), "cold-ms")
		for _, q := range []struct{ unit, path string }{
			{"releases-1000-ms", "/v1/releases"},
			{"releases-10000-ms", "/v1/releases?limit=10000"},
			{"releases-app-ms", "/v1/releases?app=app-042&env=prod&cluster=prod-eu"},
			{"release-ms", "/v1/releases/app-042@1.0.7:prod-eu/prod"},
			{"eligible-ms", "/v1/rollback-eligible?app=app-042&env=prod&cluster=prod-eu&image=x"},
			{"metrics-ms", "/metrics"},
			{"page-ms", "/"},
		} {
			b.ReportMetric(ms(median(b, ask(q.path))), q.unit)
		}
	}
}

func median(b *testing.B, f func()) time.Duration {
	b.Helper()
	var took []time.Duration
	for range readRepeats {
		start := time.Now()
		f()
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
