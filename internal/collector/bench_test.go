package collector_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/collector"
	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

// The benchmark's cluster: 10,000 deploy-kit pods of 1,000 processes, ten
// replicas each spread over 50 nodes, and 2,000 local volumes bound to claims.
const (
	benchPods      = 10_000
	benchProcesses = 1_000
	benchVolumes   = 2_000
	benchNodes     = 50
	setupWorkers   = 32
)

// parallel runs n jobs on setupWorkers goroutines and returns the first error.
func parallel(n int, job func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range setupWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := job(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

func populate(b *testing.B, cp *testenv.ControlPlane) {
	b.Helper()
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling while filling the cluster
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	namespaces := make([]string, 20)
	for i := range namespaces {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("project-%02d-system", i)}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		namespaces[i] = ns.Name
	}
	start := time.Now()
	err = parallel(benchPods, func(i int) error {
		process := fmt.Sprintf("process-%04d", i/10)
		ns := namespaces[(i/10)%len(namespaces)]
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", process, i%10), Labels: map[string]string{
				collector.LabelManagedBy: collector.ManagedBy, collector.LabelName: process,
				"app.kubernetes.io/instance": process, "app.kubernetes.io/part-of": "bench", "app.kubernetes.io/component": "web",
			}},
			Spec: corev1.PodSpec{
				NodeName: fmt.Sprintf("node-%02d", i%benchNodes),
				Containers: []corev1.Container{{
					Name: "main", Image: "registry.example/bench/" + process + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					Env:       []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "LOG_LEVEL", Value: "info"}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}},
			},
		}
		created, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "192.168.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	err = parallel(benchVolumes, func(i int) error {
		ns := namespaces[i%len(namespaces)]
		claim := fmt.Sprintf("data-%04d", i)
		size := resource.MustParse("10Gi")
		pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				VolumeName:  "pv-" + claim,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		_, err = kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/srv/" + claim}},
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim, UID: pvc.UID},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("node-%02d", i%benchNodes)}}},
				}}}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pvc.Status.Phase = corev1.ClaimBound
		_, err = kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d pods and %d bound volumes in %s", benchPods, benchVolumes, time.Since(start).Round(time.Second))
}

// processCPU is the CPU time this process has used (the Collector and the
// in-process fake GitHub; the API server runs in its own process). On a
// shared machine it varies far less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakHeap samples the live heap while f runs and returns the highest value
// above the heap in use when it started.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > base && s.HeapAlloc-base > peak.Load() {
				peak.Store(s.HeapAlloc - base)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkCapture measures one capture over 10,000 pods and 2,000 volumes in
// a real API server: the first (committing the snapshot), an unchanged one
// (reading it and writing nothing), and, as the baseline for paging, the same
// committing capture listed in one page per kind.
func BenchmarkCapture(b *testing.B) {
	cp := testenv.Own(b)
	populate(b, cp)
	fake := fakegithub.New(b)
	fake.AddRepository(estateRepo)
	gh, err := githubapp.New(githubapp.Config{AppID: fake.AppID, InstallationID: fake.InstallationID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	repo, _ := githubapp.ParseRepository(estateRepo)
	ctx := context.Background()

	run := func(b *testing.B, pageSize int64, committing bool) {
		counted, counter := testenv.Counting(cp.Config)
		kube, err := collector.NewKube(counted)
		if err != nil {
			b.Fatal(err)
		}
		kube.PageSize = pageSize
		b.ReportAllocs()
		var peak uint64
		var elapsed, cpu time.Duration
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			path := fmt.Sprintf("bench/%s/%d/cluster-state.yml", b.Name(), i)
			c := &collector.Collector{Cluster: "production", Inventory: kube, File: gh.File(repo, path, ""), Now: time.Now}
			if !committing {
				if _, err := c.Capture(ctx); err != nil {
					b.Fatal(err)
				}
			}
			counter.Reset()
			fake.ResetCalls()
			b.StartTimer()
			var out collector.Outcome
			start, cpuStart := time.Now(), processCPU()
			peak = max(peak, peakHeap(func() { out, err = c.Capture(ctx) }))
			elapsed += time.Since(start)
			cpu += processCPU() - cpuStart
			if err != nil || out.Committed != committing || len(out.Facts.Placements) != benchPods || len(out.Facts.Bindings) != benchVolumes {
				b.Fatalf("capture: committed=%v placements=%d bindings=%d err=%v", out.Committed, len(out.Facts.Placements), len(out.Facts.Bindings), err)
			}
		}
		b.ReportMetric(float64(counter.Total()), "api-requests/op")
		b.ReportMetric(float64(len(fake.Calls())), "github-requests/op")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/capture")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/capture")
		if load, err := os.ReadFile("/proc/loadavg"); err == nil {
			b.Logf("load average while measuring: %s", strings.TrimSpace(string(load)))
		}
	}
	b.Run("committing", func(b *testing.B) { run(b, collector.DefaultPageSize, true) })
	b.Run("unchanged", func(b *testing.B) { run(b, collector.DefaultPageSize, false) })
	b.Run("committing-one-page", func(b *testing.B) { run(b, 1_000_000, true) })
}
