package releasegate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestReleasesAtItsCap seeds one gated Application more than /releases
// lists, in an API server of its own so no other test's Applications count:
// the first ReleasesMost are answered in order, the answer says it is
// truncated, and however often it is asked it reads once per 15 s.
func TestReleasesAtItsCap(t *testing.T) {
	cp := testenv.Own(t)
	ns := cp.Namespace(t)
	seedInputs(t, cp, ns, releasegate.ReleasesMost+1)

	cfg, counter := testenv.Counting(cp.Grant(t, gateRBAC, gateNS, gateSA))
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h := releasegate.NewReconciler(kube, gateNS, nil, nil, now).ReleasesHandler()
	// A new API server may still answer its first list of a custom resource
	// with a retry; the read counted is the steady one.
	if _, err := kube.Canaries(context.Background()); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	var got releasegate.Releases
	for range 10 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/releases", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("/releases: %d %s", w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.Applications) != releasegate.ReleasesMost || !got.Truncated {
		t.Fatalf("/releases lists %d Applications, truncated %v; want %d and true", len(got.Applications), got.Truncated, releasegate.ReleasesMost)
	}
	for i, a := range got.Applications {
		if want := fmt.Sprintf("app-%04d", i); a.Namespace != ns || a.Application != want {
			t.Fatalf("Application %d is %s/%s, want %s/%s: the first %d in order", i, a.Namespace, a.Application, ns, want, releasegate.ReleasesMost)
		}
	}
	if reads := counter.Matching("GET", "canaries"); reads != 1 {
		t.Fatalf("10 answers within 15 s listed the Canaries %d times, want once: %v", reads, counter.Requests())
	}
	mu.Lock()
	clock = clock.Add(releasegate.ReleasesMaxAge)
	mu.Unlock()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/releases", nil))
	if reads := counter.Matching("GET", "canaries"); reads != 2 {
		t.Fatalf("an answer 15 s later listed the Canaries %d times in all, want a second read", reads)
	}
}

// seedInputs creates n gated Applications' inputs, app-0000 to app-<n-1>,
// in namespace ns, as the render labels them.
func seedInputs(t *testing.T, cp *testenv.ControlPlane, ns string, n int) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("app-%04d", i)
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: release.InputsConfigMap(name), Namespace: ns,
						Labels: map[string]string{"app.kubernetes.io/part-of": name, "app.kubernetes.io/managed-by": "deploy-kit"}},
					Data: map[string]string{release.InputsKey: renderedInputs([]string{name}, "")},
				}
				if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestReleasesReadsOncePer15s asks /releases from many callers at once and
// across a clock that moves: one read answers everyone for 15 s, and only one
// read runs at a time.
func TestReleasesReadsOncePer15s(t *testing.T) {
	cp := testenv.Shared(t)
	cfg, counter := testenv.Counting(cp.Grant(t, gateRBAC, gateNS, gateSA))
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	(&app{ns: ns, name: "notes", members: []member{{process: "notes", phase: "Initialized", applied: "n", promoted: "n", image: "n:1", primaryImage: "n:1"}}}).apply(t, cp)
	var mu sync.Mutex
	clock := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }
	h := releasegate.NewReconciler(kube, gateNS, nil, nil, now).ReleasesHandler()
	ask := func() string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/releases", nil))
		if w.Code != http.StatusOK {
			t.Errorf("/releases: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	reads := func() int { return counter.Matching("GET", "canaries") }
	counter.Reset()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); ask() }()
	}
	wg.Wait()
	if reads() != 1 {
		t.Fatalf("20 callers at once made %d reads", reads())
	}
	advance(14 * time.Second)
	if body := ask(); reads() != 1 || !strings.Contains(body, `"readAt":"2026-11-30T10:00:00Z"`) || !strings.Contains(body, ns) {
		t.Fatalf("after 14 s: %d reads, %s", reads(), body)
	}
	advance(2 * time.Second)
	if body := ask(); reads() != 2 || !strings.Contains(body, `"readAt":"2026-11-30T10:00:16Z"`) {
		t.Fatalf("after 16 s: %d reads, %s", reads(), body)
	}

	// A read that fails answers as long: callers asking often of a cluster
	// the gate cannot read make one read per 15 s, not one each.
	refused, refusedCount := testenv.Counting(cp.As(gateNS, "not-the-gate"))
	stranger, err := releasegate.NewKube(refused)
	if err != nil {
		t.Fatal(err)
	}
	h = releasegate.NewReconciler(stranger, gateNS, nil, nil, now).ReleasesHandler()
	askRefused := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/releases", nil))
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("/releases unreadable: %d %s", w.Code, w.Body)
		}
	}
	askRefused()
	one := refusedCount.Total()
	if one == 0 {
		t.Fatal("the refused read made no request")
	}
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); askRefused() }()
	}
	wg.Wait()
	advance(14 * time.Second)
	askRefused()
	if n := refusedCount.Total(); n != one {
		t.Fatalf("21 more callers within 15 s of a failed read made %d requests, want none", n-one)
	}
	advance(2 * time.Second)
	askRefused()
	if n := refusedCount.Total(); n <= one {
		t.Fatal("a failed read answered past 15 s")
	}
}
