package releaserecord_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	cdevents "github.com/cdevents/sdk-go/pkg/api"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// timedSink is the CloudEvents sink, timing each event from its fact's
// start (in the context) to its delivery.
type timedSink struct {
	rr.Sink
	mu    sync.Mutex
	times []time.Duration
}

type startKey struct{}

func (s *timedSink) Send(ctx context.Context, ev cdevents.CDEventV04) error {
	err := s.Sink.Send(ctx, ev)
	if start, ok := ctx.Value(startKey{}).(time.Time); ok && err == nil {
		s.mu.Lock()
		s.times = append(s.times, time.Since(start))
		s.mu.Unlock()
	}
	return err
}

func (s *timedSink) percentile(p float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.times) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), s.times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[int(p*float64(len(sorted)-1))]
}

// walk is one app's two releases as facts, in order: the first merged,
// progressing twice, healthy twice; the second merged (superseding the
// first), progressing, healthy twice. 9 facts, 7 state changes (the
// supersede among them), 3 repeats.
func walk(t testing.TB, app string) []rr.Fact {
	var out []rr.Fact
	for _, step := range []struct {
		version string
		phases  []rr.Phase
	}{
		{"1.0.0", []rr.Phase{rr.PhaseMerged, rr.PhaseProgressing, rr.PhaseProgressing, rr.PhaseHealthy, rr.PhaseHealthy}},
		{"1.1.0", []rr.Phase{rr.PhaseMerged, rr.PhaseProgressing, rr.PhaseHealthy, rr.PhaseHealthy}},
	} {
		id, err := rr.NewReleaseID(app, step.version, "prod-eu", "prod")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range step.phases {
			out = append(out, rr.Fact{Release: rr.Release{ID: id}, Phase: p, PodHash: "h-" + step.version})
		}
	}
	return out
}

const (
	factsPerWalk   = 9
	changesPerWalk = 7
)

// BenchmarkFacts takes the facts of 150 apps' releases through two
// replicas sharing one namespace of records on the real API server, with
// the events sent to a real CloudEvents receiver. Pushed: each fact reaches
// one replica, the replicas alternating. Observed: each fact reaches both
// replicas at once, as both look at the same unit.
func BenchmarkFacts(b *testing.B) {
	const apps, workers = 150, 16
	for _, mode := range []string{"pushed", "observed"} {
		b.Run(mode, func(b *testing.B) {
			for i := range b.N {
				ns, cfg := testenv.Shared(b).GrantRecords(b, rbacFile, serviceAccount)
				counted, counter := testenv.Counting(cfg)
				recv := cdeventstest.Start(b)
				inner, _ := rr.NewCloudEventsSink(recv.URL)
				sink := &timedSink{Sink: inner}
				var replicas []*rr.Service
				for range 2 {
					store, err := rr.NewKubeStore(counted, ns)
					if err != nil {
						b.Fatal(err)
					}
					replicas = append(replicas, &rr.Service{Store: store, Sink: sink, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
				}
				work := make(chan []rr.Fact)
				var wg sync.WaitGroup
				errs := make(chan error, apps*factsPerWalk*2)
				take := func(svc *rr.Service, f rr.Fact) {
					ctx := context.WithValue(context.Background(), startKey{}, time.Now())
					if _, err := svc.Take(ctx, f); err != nil {
						errs <- err
					}
				}
				for w := range workers {
					wg.Go(func() {
						for facts := range work {
							for k, f := range facts {
								if mode == "pushed" {
									take(replicas[(w+k)%2], f)
									continue
								}
								var both sync.WaitGroup
								for _, svc := range replicas {
									both.Go(func() { take(svc, f) })
								}
								both.Wait()
							}
						}
					})
				}
				start := time.Now()
				for a := range apps {
					work <- walk(b, fmt.Sprintf("app%d-%03d", i, a))
				}
				close(work)
				wg.Wait()
				took := time.Since(start)
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				facts := apps * factsPerWalk
				writes := counter.Matching("PUT", "/configmaps") + counter.Matching("POST", "/configmaps")
				reads := counter.Matching("GET", "/configmaps")
				// The repeats again, now every release is recorded: no write.
				counter.Reset()
				for a := range apps {
					f := walk(b, fmt.Sprintf("app%d-%03d", i, a))
					take(replicas[a%2], f[len(f)-1])
				}
				repeatWrites := counter.Matching("PUT", "/configmaps") + counter.Matching("POST", "/configmaps")
				if got, want := len(recv.Events()), apps*4; mode == "pushed" && got != want {
					b.Fatalf("%d events, want %d", got, want)
				}
				b.ReportMetric(float64(facts)/took.Seconds(), "facts/s")
				b.ReportMetric(float64(writes)/float64(facts), "writes/fact")
				b.ReportMetric(float64(writes)/float64(apps*changesPerWalk), "writes/change")
				b.ReportMetric(float64(repeatWrites)/float64(apps), "writes/repeat")
				b.ReportMetric(float64(reads)/float64(facts), "reads/fact")
				b.ReportMetric(float64(sink.percentile(0.5).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(sink.percentile(0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(len(recv.Events()))/float64(apps*4), "sends/event")
			}
		})
	}
}
