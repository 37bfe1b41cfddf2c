package releasegate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// BenchmarkRound runs one round over 1,000 gated Applications in the real
// API server, under the gate's own grant, and reports its wall time and API
// requests: the first round (which writes every record) and a steady one
// (which writes nothing). The baseline is what one read per Application
// would cost: 1,000 GETs of an inputs ConfigMap, measured in the same run.
// Then /releases is asked at 200 requests/s for 3 s over a loopback listener.
func BenchmarkRound(b *testing.B) {
	cp := testenv.Own(b)
	cfg, counter := testenv.Counting(cp.Grant(b, gateRBAC, gateNS, gateSA))
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	namespaces := seedApplications(b, cp, benchApplications)
	b.Logf("seeded %d Applications in %v", len(namespaces), time.Since(start).Round(time.Millisecond))

	gateKube, err := kubernetes.NewForConfig(cp.Grant(b, gateRBAC, gateNS, gateSA))
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	for _, ns := range namespaces {
		if _, err := gateKube.CoreV1().ConfigMaps(ns).Get(context.Background(), "auth-release-gate", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	baseline := time.Since(start)
	b.Logf("baseline: %d GETs, one per Application, in %v", len(namespaces), baseline.Round(time.Millisecond))

	reconciler := releasegate.NewReconciler(kube, gateNS, nil, slog.New(slog.DiscardHandler), time.Now)
	for i, name := range []string{"first round (writes every record)", "steady round"} {
		counter.Reset()
		start := time.Now()
		if err := reconciler.Round(context.Background()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.Logf("%s: %v (%.2f of the baseline), %d API requests: %s", name, took.Round(time.Millisecond),
			took.Seconds()/baseline.Seconds(), counter.Total(), byKind(counter))
		if i == 1 && counter.Matching("GET", "/namespaces/bench-") > 0 {
			b.Errorf("the round read an Application's object by name: %v", counter.Requests())
		}
	}
	last := reconciler.Last()
	pinned := 0
	for _, a := range last.Applications {
		if a.Unanswerable != "" {
			b.Fatalf("%s/%s unanswerable: %s", a.Namespace, a.Application, a.Unanswerable)
		}
		pinned++
	}
	if pinned != benchApplications {
		b.Fatalf("reconciled %d Applications, want %d", pinned, benchApplications)
	}

	// What each list costs alone, one after another.
	for _, l := range []struct {
		name string
		list func(context.Context) error
	}{
		{"inputs ConfigMaps", func(ctx context.Context) error { _, err := kube.GatedInputs(ctx); return err }},
		{"records", func(ctx context.Context) error { _, err := kube.Records(ctx, gateNS); return err }},
		{"Canaries", func(ctx context.Context) error { _, err := kube.Canaries(ctx); return err }},
		{"Jobs", func(ctx context.Context) error { _, err := kube.MigrationJobs(ctx); return err }},
		{"Deployments", func(ctx context.Context) error { _, err := kube.Deployments(ctx); return err }},
	} {
		start := time.Now()
		if err := l.list(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Logf("list %s alone: %v", l.name, time.Since(start).Round(time.Millisecond))
	}

	releasesAt200PerSecond(b, reconciler, counter)
}

// releasesAt200PerSecond asks /releases 200 times a second for 3 s over a
// loopback listener and reports the answers' latency and what they cost the
// API server.
func releasesAt200PerSecond(b *testing.B, reconciler *releasegate.Reconciler, counter *testenv.RequestCounter) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /releases", reconciler.ReleasesHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	counter.Reset()
	client := &http.Client{Timeout: 15 * time.Second}
	var latencies []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed atomic.Int32
	var size atomic.Int64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 600 {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			resp, err := client.Get("http://" + ln.Addr().String() + "/releases")
			if err != nil {
				failed.Add(1)
				return
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
			size.Store(n)
			mu.Lock()
			latencies = append(latencies, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d answers failed", failed.Load())
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.Logf("/releases: 600 answers at 200/s in 3 s, p50 %v, p99 %v, max %v, %d bytes each; API requests %d: %s",
		latencies[len(latencies)/2].Round(time.Microsecond), latencies[len(latencies)*99/100].Round(time.Microsecond),
		latencies[len(latencies)-1].Round(time.Microsecond), size.Load(), counter.Total(), byKind(counter))
}

// byKind sums the counted requests by verb and resource kind.
func byKind(c *testenv.RequestCounter) string {
	kinds := map[string]int{}
	for _, r := range c.Requests() {
		verb, path, _ := strings.Cut(r, " ")
		parts := strings.Split(strings.Trim(path, "/"), "/")
		kind := parts[len(parts)-1]
		for i, p := range parts {
			if p == "namespaces" && i+2 < len(parts) {
				kind = parts[i+2]
			}
		}
		kinds[verb+" "+kind] += c.Count(r)
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	return strings.Join(out, ", ")
}
