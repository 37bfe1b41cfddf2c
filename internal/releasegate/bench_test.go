package releasegate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// benchApplications is how many gated Applications the benchmark puts in the
// API server, each in its own namespace as each project has its own.
const benchApplications = 1000

// BenchmarkWebhooks answers each webhook for every one of 1,000 gated
// Applications in the real API server, one answer at a time as Flagger's
// per-Canary loop asks, and reports answers per second, p50/p99 latency and
// API requests per answer. The baselines, measured in the same run, are one
// GET of a ConfigMap and the four reads of /checks side by side, through the
// gate's own client under its identity.
func BenchmarkWebhooks(b *testing.B) {
	cp, gate, counter := countedGate(b)

	start := time.Now()
	namespaces := seedApplications(b, cp, benchApplications)
	seeded := time.Since(start).Round(time.Millisecond)

	client := &http.Client{Timeout: 15 * time.Second}
	post := func(path, body string) int {
		resp, err := client.Post(gate.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// Baselines: one API read as the gate makes it (its identity, its
	// client settings), the unit every answer is made of; and the four
	// reads a /checks answer makes, side by side as the gate makes them,
	// with nothing of the gate around them: the floor of an answer that
	// reads the cluster when it is asked.
	gateKube, err := releasegate.NewKube(cp.Grant(b, gateRBAC, gateNS, gateSA))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var baseline, checksReads figures
	b.Run("baseline-one-configmap-get", func(b *testing.B) {
		baseline = measure(namespaces, func(ns string) {
			if _, err := gateKube.ConfigMap(ctx, ns, "auth-release-gate"); err != nil {
				b.Fatal(err)
			}
		})
		report(b, baseline, baseline, "reads/s")
		b.Logf("seeded %d Applications in %s; baseline: one ConfigMap GET under the gate's identity: p50 %s  p99 %s",
			len(namespaces), seeded, baseline.p50, baseline.p99)
	})
	b.Run("baseline-checks-reads-side-by-side", func(b *testing.B) {
		instance := labels.SelectorFromSet(labels.Set{release.LabelInstance: "auth-api"})
		checksReads = measure(namespaces, func(ns string) {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			wg.Go(func() { _, errs[0] = gateKube.ConfigMap(ctx, ns, "auth-release-gate") })
			wg.Go(func() { _, errs[1] = gateKube.CanariesIn(ctx, ns) })
			wg.Go(func() { _, errs[2] = gateKube.DeploymentsIn(ctx, ns) })
			wg.Go(func() { _, errs[3] = gateKube.Pods(ctx, ns, instance) })
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
		})
		report(b, checksReads, baseline, "rounds/s")
		b.Logf("baseline: the four reads of /checks side by side: p50 %s  p99 %s (%.1fx one read at p50)",
			checksReads.p50, checksReads.p99, float64(checksReads.p50)/float64(baseline.p50))
	})

	for _, wh := range []struct {
		path    string
		process string
		want    int
	}{
		{"/may-start", "auth-api", http.StatusOK},
		{"/checks", "auth-api", http.StatusOK},
		{"/may-promote", "auth-api", http.StatusOK},
		{"/rollback", "auth-api", http.StatusConflict},
	} {
		b.Run(strings.TrimPrefix(wh.path, "/"), func(b *testing.B) {
			counter.Reset()
			r := measure(namespaces, func(ns string) {
				if code := post(wh.path, payload(ns, wh.process, rev)); code != wh.want {
					b.Fatalf("%s in %s: %d, want %d", wh.path, ns, code, wh.want)
				}
			})
			per := float64(counter.Total()) / float64(len(namespaces))
			report(b, r, baseline, "answers/s")
			b.ReportMetric(float64(r.p99)/float64(checksReads.p99), "p99/checks-reads-p99")
			b.ReportMetric(per, "API-requests/answer")
			var kinds []string
			for _, kind := range []string{"/pods", "/configmaps", "/canaries", "/deployments", "/jobs"} {
				kinds = append(kinds, fmt.Sprintf("%s %.1f", strings.TrimPrefix(kind, "/"), float64(counter.Matching(kind))/float64(len(namespaces))))
			}
			b.Logf("%s: %.0f answers/s  p50 %s  p99 %s  (%.1fx one read at p50; %.2fx the /checks reads at p99)  %.1f API requests/answer: %s",
				wh.path, r.perSecond, r.p50, r.p99, float64(r.p50)/float64(baseline.p50), float64(r.p99)/float64(checksReads.p99), per, strings.Join(kinds, ", "))
		})
	}
	webhooksInFlight(b, gate.url, gateKube, namespaces, counter)
}

// webhooksInFlight asks each webhook for every Application with 50 and then
// 200 questions in flight, as Flagger asks when many Canaries are analysed
// at once, each on a new connection as Flagger makes them. The floor of
// each is the bare reads its answer makes, side by side, under the same
// concurrency in the same run.
func webhooksInFlight(b *testing.B, url string, gateKube *releasegate.Kube, namespaces []string, counter *testenv.RequestCounter) {
	ctx := context.Background()
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// unanswered counts the answers that ran out of the gate's 5 s budget
	// (503): counted, not failed, since they are what this measures.
	var unanswered atomic.Int64
	post := func(path, ns string, want int) error {
		resp, err := client.Post(url+path, "application/json", strings.NewReader(payload(ns, "auth-api", rev)))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case want:
			return nil
		case http.StatusServiceUnavailable:
			unanswered.Add(1)
			return nil
		}
		return fmt.Errorf("%s in %s: %d, want %d", path, ns, resp.StatusCode, want)
	}
	instance := labels.SelectorFromSet(labels.Set{release.LabelInstance: "auth-api"})
	partOf := labels.SelectorFromSet(labels.Set{release.LabelPartOf: "auth"})
	jobsOf := labels.SelectorFromSet(labels.Set{release.LabelPartOf: "auth", release.LabelManagedBy: release.ManagedBy})
	inputs := func(ns string) func() error {
		return func() error { _, err := gateKube.ConfigMap(ctx, ns, "auth-release-gate"); return err }
	}
	configMaps := func(ns string) func() error {
		return func() error { _, err := gateKube.ConfigMapsIn(ctx, ns); return err }
	}
	canaries := func(ns string) func() error {
		return func() error { _, err := gateKube.CanariesIn(ctx, ns); return err }
	}
	deployments := func(ns string) func() error {
		return func() error { _, err := gateKube.DeploymentsIn(ctx, ns); return err }
	}
	pods := func(ns string, sel labels.Selector) func() error {
		return func() error { _, err := gateKube.Pods(ctx, ns, sel); return err }
	}
	jobs := func(ns string) func() error {
		return func() error { _, err := gateKube.Jobs(ctx, ns, jobsOf); return err }
	}
	record := func(ns string) func() error {
		return func() error {
			_, err := gateKube.ConfigMap(ctx, gateNS, release.RecordConfigMap(ns, "auth"))
			if errors.Is(err, release.ErrNotFound) {
				return nil
			}
			return err
		}
	}
	for _, wh := range []struct {
		path  string
		want  int
		reads func(ns string) []func() error
	}{
		{"/may-start", http.StatusOK, func(ns string) []func() error {
			return []func() error{configMaps(ns), canaries(ns), deployments(ns), jobs(ns), record(ns)}
		}},
		{"/checks", http.StatusOK, func(ns string) []func() error {
			return []func() error{configMaps(ns), canaries(ns), deployments(ns), pods(ns, instance), jobs(ns), record(ns)}
		}},
		{"/may-promote", http.StatusOK, func(ns string) []func() error {
			return []func() error{configMaps(ns), canaries(ns), deployments(ns), jobs(ns), record(ns)}
		}},
		{"/rollback", http.StatusConflict, func(ns string) []func() error {
			return []func() error{inputs(ns), canaries(ns), deployments(ns), pods(ns, partOf)}
		}},
	} {
		for _, inFlight := range []int{50, 200} {
			b.Run(fmt.Sprintf("%s-%d-in-flight", strings.TrimPrefix(wh.path, "/"), inFlight), func(b *testing.B) {
				floor, err := measureInFlight(namespaces, inFlight, func(ns string) error { return sideBySide(wh.reads(ns)...) })
				if err != nil {
					b.Fatal(err)
				}
				counter.Reset()
				unanswered.Store(0)
				r, err := measureInFlight(namespaces, inFlight, func(ns string) error { return post(wh.path, ns, wh.want) })
				if err != nil {
					b.Fatal(err)
				}
				per := float64(counter.Total()) / float64(len(namespaces))
				b.ReportMetric(r.perSecond, "answers/s")
				b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(r.p99)/float64(floor.p99), "p99/floor-p99")
				b.ReportMetric(per, "API-requests/answer")
				b.ReportMetric(float64(unanswered.Load()), "answers-out-of-budget")
				b.Logf("%s, %d in flight: %.0f answers/s  p50 %s  p99 %s  max %s, %d of %d out of the 5 s budget (503); floor (its %d reads side by side, %d in flight) p50 %s  p99 %s  max %s: p99 %.2fx the floor; %.1f API requests/answer",
					wh.path, inFlight, r.perSecond, r.p50, r.p99, r.max, unanswered.Load(), len(namespaces), len(wh.reads(namespaces[0])), inFlight,
					floor.p50, floor.p99, floor.max, float64(r.p99)/float64(floor.p99), per)
			})
		}
	}
}

// sideBySide runs the reads at once, as an answer makes them, and waits for all.
func sideBySide(reads ...func() error) error {
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Go(func() { errs[i] = read() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measureInFlight runs do once per namespace, inFlight at a time, and stops
// at the first error.
func measureInFlight(namespaces []string, inFlight int, do func(ns string) error) (figures, error) {
	lat := make([]time.Duration, len(namespaces))
	errs := make([]error, len(namespaces))
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range inFlight {
		wg.Go(func() {
			for i := range work {
				t0 := time.Now()
				errs[i] = do(namespaces[i])
				lat[i] = time.Since(t0)
			}
		})
	}
	for i := range namespaces {
		work <- i
	}
	close(work)
	wg.Wait()
	total := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return figures{}, err
	}
	slices.Sort(lat)
	return figures{
		perSecond: float64(len(lat)) / total.Seconds(),
		p50:       lat[len(lat)/2],
		p99:       lat[len(lat)*99/100],
		max:       lat[len(lat)-1],
	}, nil
}

// report records f's rate and latencies, and its p50 against baseline's.
func report(b *testing.B, f, baseline figures, rate string) {
	b.ReportMetric(f.perSecond, rate)
	b.ReportMetric(float64(f.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(f.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(f.p50)/float64(baseline.p50), "p50/baseline")
}

type figures struct {
	perSecond     float64
	p50, p99, max time.Duration
}

// measure runs do once per namespace, one after another.
func measure(namespaces []string, do func(ns string)) figures {
	lat := make([]time.Duration, 0, len(namespaces))
	start := time.Now()
	for _, ns := range namespaces {
		t0 := time.Now()
		do(ns)
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	slices.Sort(lat)
	return figures{
		perSecond: float64(len(lat)) / total.Seconds(),
		p50:       lat[len(lat)/2],
		p99:       lat[len(lat)*99/100],
	}
}

// seedApplications creates n auth-like Applications, each in its own
// namespace: inputs with a migration, a completed migration Job, auth-api
// analysed and waiting at the barrier with two ready pods, and auth-ui
// unchanged. Typed clients and a few workers keep the seeding to seconds.
func seedApplications(b *testing.B, cp *testenv.ControlPlane, n int) []string {
	b.Helper()
	namespaces := make([]string, n)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("bench-auth-%04d", i)
	}
	work := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ns := range work {
				if err := seedOne(context.Background(), cp, ns); err != nil {
					errs <- fmt.Errorf("%s: %w", ns, err)
				}
			}
		}()
	}
	for _, ns := range namespaces {
		work <- ns
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	sort.Strings(namespaces)
	return namespaces
}

func seedOne(ctx context.Context, cp *testenv.ControlPlane, ns string) error {
	kube := cp.Kube
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labelled := func(name string, l map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}
	}
	partOf := map[string]string{"app.kubernetes.io/part-of": "auth", "app.kubernetes.io/managed-by": "deploy-kit"}
	inputs := `{"analysis":{"interval":"30s","iterations":4,"threshold":3},"deadline":"1800s","endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080","errorRate":0.05,"latency":"500ms","members":[{"checks":["error-rate","latency"],"process":"auth-api","readiness":{"path":"/ready","port":8081}},{"process":"auth-ui","readiness":{"path":"/","port":8080}}],"migration":{"identity":"auth-migration","nonTransactional":false}}`
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: labelled("auth-release-gate", partOf), Data: map[string]string{"releaseGate.json": inputs}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	now := metav1.Now()
	jobLabels := map[string]string{"app.kubernetes.io/name": "auth-migration", "app.kubernetes.io/part-of": "auth", "app.kubernetes.io/managed-by": "deploy-kit"}
	j := &batchv1.Job{ObjectMeta: labelled("auth-migration-"+tag, jobLabels), Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "auth-migration"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "migration", Image: "migration:1"}}}},
	}}
	j, err := kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}}
	if _, err := kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		return err
	}

	for _, m := range []struct {
		process, phase, applied, promoted, image, primaryImage string
		iterations, pods                                       int
	}{
		{"auth-api", "WaitingPromotion", "new", "old", "api:2", "api:1", 4, 2},
		{"auth-ui", "Succeeded", "ui", "ui", "ui:1", "ui:1", 0, 0},
	} {
		for _, d := range []struct{ name, image string }{{m.process, m.image}, {m.process + "-primary", m.primaryImage}} {
			sel := map[string]string{"app.kubernetes.io/instance": d.name, "app.kubernetes.io/part-of": "auth"}
			meta := labelled(d.name, partOf)
			if d.name != m.process {
				// Flagger gives a primary only its selector's label.
				meta = labelled(d.name, map[string]string{"app.kubernetes.io/instance": d.name})
			}
			dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": d.name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: d.image, Args: []string{"serve"}, Env: []corev1.EnvVar{{Name: "MODE", Value: "live"}}},
				}}},
			}}
			if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		for i := range m.pods {
			p := &corev1.Pod{ObjectMeta: labelled(fmt.Sprintf("%s-%d", m.process, i), map[string]string{"app.kubernetes.io/instance": m.process, "app.kubernetes.io/part-of": "auth"}),
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: m.image}}}}
			p, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			ip := fmt.Sprintf("10.2.0.%d", i+1)
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: m.image, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
			if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		// Flux applies the Canary, a custom resource, after the rest.
		md := map[string]string{"application": "auth", "process": m.process, "revision": rev}
		var hooks []flaggerv1.CanaryWebhook
		for _, h := range []struct {
			name string
			typ  flaggerv1.HookType
		}{{"may-start", flaggerv1.ConfirmRolloutHook}, {"checks", flaggerv1.RolloutHook}, {"may-promote", flaggerv1.ConfirmPromotionHook}, {"rollback", flaggerv1.RollbackHook}} {
			hooks = append(hooks, flaggerv1.CanaryWebhook{Name: h.name, Type: h.typ, URL: "http://release-gate.delivery-system.svc.cluster.local:8080/" + h.name, Metadata: &md})
		}
		c := &flaggerv1.Canary{ObjectMeta: labelled(m.process, partOf), Spec: flaggerv1.CanarySpec{
			Provider:  "kubernetes",
			TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: m.process},
			Service:   flaggerv1.CanaryService{Port: 8080},
			Analysis:  &flaggerv1.CanaryAnalysis{Interval: "30s", Iterations: 4, Threshold: 3, Webhooks: hooks},
		}}
		if err := cp.Client.Create(ctx, c); err != nil {
			return err
		}
		c.Status = flaggerv1.CanaryStatus{Phase: flaggerv1.CanaryPhase(m.phase), Iterations: m.iterations, LastAppliedSpec: m.applied, LastPromotedSpec: m.promoted}
		if err := cp.Client.Status().Update(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
