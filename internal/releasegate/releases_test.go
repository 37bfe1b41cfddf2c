package releasegate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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

	cfg, counter := testenv.Counting(grant(t, cp))
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h := releasegate.NewTender(kube, gateNS, nil, nil, now).ReleasesHandler()
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
