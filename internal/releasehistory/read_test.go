package releasehistory_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  rh.Filter
		bad   string
	}{
		{"", rh.Filter{Limit: rh.DefaultLimit}, ""},
		{"app=docs&env=prod&cluster=prod-eu&state=healthy&limit=5", rh.Filter{App: "docs", Env: "prod", Cluster: "prod-eu", State: rr.StateHealthy, Limit: 5}, ""},
		{"app=docs.site", rh.Filter{App: "docs.site", Limit: rh.DefaultLimit}, ""},
		{"limit=10000", rh.Filter{Limit: 10000}, ""},
		{"env=prod.eu", rh.Filter{}, "env"},
		{"app=Docs", rh.Filter{}, "app"},
		{"state=happy", rh.Filter{}, "state"},
		{"limit=0", rh.Filter{}, "limit"},
		{"limit=10001", rh.Filter{}, "limit"},
		{"limit=ten", rh.Filter{}, "limit"},
		{"app=docs&app=shop", rh.Filter{}, "2 times"},
		{"image=x", rh.Filter{}, "unknown parameter"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := rh.ParseFilter(q)
			if tc.bad != "" {
				if !errors.Is(err, rh.ErrBadQuery) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %+v %v, want a bad query naming %s", got, err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseEligibility(t *testing.T) {
	full := "app=docs&env=prod&cluster=prod-eu&image=ghcr.io/acme/docs:4"
	for _, tc := range []struct{ query, bad string }{
		{full, ""},
		{"env=prod&cluster=prod-eu&image=x", "app is required"},
		{"app=docs&cluster=prod-eu&image=x", "env is required"},
		{"app=docs&env=prod&image=x", "cluster is required"},
		{"app=docs&env=prod&cluster=prod-eu", "image is required"},
		{"app=docs&env=prod&cluster=prod-eu&image=", "image is required"},
		{"app=docs&env=prod&cluster=prod-eu&image=" + strings.Repeat("x", rh.MostImage+1), "longer"},
		{full + "&state=healthy", "unknown parameter"},
	} {
		t.Run(tc.query[:min(len(tc.query), 60)], func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			svc, image, err := rh.ParseEligibility(q)
			if tc.bad == "" {
				if err != nil || svc != (rh.ServiceKey{App: "docs", Env: "prod", Cluster: "prod-eu"}) || image != "ghcr.io/acme/docs:4" {
					t.Fatalf("%+v %q %v", svc, image, err)
				}
				return
			}
			if !errors.Is(err, rh.ErrBadQuery) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("got %v, want a bad query naming %q", err, tc.bad)
			}
		})
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "app=docs&env=prod", "limit=5&state=healthy", "app=%ZZ", "image=a&image=b", "cluster=prod-eu&image=x&app=docs&env=prod",
		"within=7d&q=docs&page=2&refresh=0", "within=90m&refresh=5&state=", "page=10000&within=366d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if f, err := rh.ParseFilter(q); err == nil {
			if f.Limit < 1 || f.Limit > rh.MostLimit {
				t.Fatalf("limit %d taken", f.Limit)
			}
		} else if !errors.Is(err, rh.ErrBadQuery) {
			t.Fatalf("an error not a bad query: %v", err)
		}
		if svc, image, err := rh.ParseEligibility(q); err == nil && (svc.App == "" || svc.Env == "" || svc.Cluster == "" || image == "") {
			t.Fatalf("a question missing a part was taken: %+v %q", svc, image)
		}
		// The page's query: what it takes is in bounds, and its own links
		// read back as the same query.
		if p, err := rh.ParsePageQuery(q); err == nil {
			if p.Page < 1 || p.Page > rh.MostLimit || p.Refresh < 0 || p.Refresh > rh.MostRefresh || p.Within < 0 || p.Within > rh.MostWithin {
				t.Fatalf("out of bounds taken: %+v", p)
			}
			back, err := rh.ParsePageQuery(p.Values(p.Page))
			if back.Release = p.Release; err != nil || back != p {
				t.Fatalf("%+v reads back as %+v (%v)", p, back, err)
			}
		} else if !errors.Is(err, rh.ErrBadQuery) {
			t.Fatalf("an error not a bad query: %v", err)
		}
	})
}

func TestSelectNewestFirst(t *testing.T) {
	recs := []rr.Record{
		rec(t, "1", rr.StateSuperseded, ago(3*time.Hour), ago(2*time.Hour)),
		rec(t, "3", rr.StateProgressing, ago(time.Hour), ago(time.Minute)),
		rec(t, "2", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)),
	}
	rh.NewestFirst(recs)
	got, truncated := rh.Select(recs, rh.Filter{Limit: 2})
	if len(got) != 2 || got[0].ReleaseID != "docs@3:prod-eu/prod" || got[1].ReleaseID != "docs@2:prod-eu/prod" || !truncated {
		t.Fatalf("%v %v", got, truncated)
	}
	if got, truncated := rh.Select(recs, rh.Filter{State: rr.StateHealthy, Limit: 5}); len(got) != 1 || got[0].ReleaseID != "docs@2:prod-eu/prod" || truncated {
		t.Fatalf("%v", got)
	}
	if got, _ := rh.Select(recs, rh.Filter{Env: "stage", Limit: 5}); len(got) != 0 || got == nil {
		t.Fatalf("another env: %v", got)
	}
}

// fakeRecords answers from a slice, one record as unreadable.
type fakeRecords struct {
	recs []rr.Record
	err  error
}

func (f *fakeRecords) Records(context.Context) ([]rr.Record, int, error) {
	return append([]rr.Record(nil), f.recs...), 1, f.err
}

// fakeClock stands still at.
type fakeClock struct{ at time.Time }

func (c *fakeClock) Now() time.Time { return c.at }

// TestCacheReadsNewestFirst: the cache's snapshot is the records newest
// first, with the count that did not decode and when the read began. The
// rule of one read per MaxAge is sharedread's, tested there.
func TestCacheReadsNewestFirst(t *testing.T) {
	src := &fakeRecords{recs: []rr.Record{
		rec(t, "1", rr.StateHealthy, ago(2*time.Hour), ago(time.Hour)),
		rec(t, "2", rr.StateHealthy, ago(time.Hour), ago(time.Minute)),
	}}
	snap, err := rh.NewCache(src, 5*time.Second, (&fakeClock{at: now}).Now).Read(context.Background())
	if err != nil || len(snap.Records) != 2 || snap.Unreadable != 1 || !snap.ReadAt.Equal(now) {
		t.Fatalf("%+v, %v", snap, err)
	}
	if snap.Records[0].ReleaseID != "docs@2:prod-eu/prod" {
		t.Fatalf("first is %s, want the newest", snap.Records[0].ReleaseID)
	}
}

// history is a small estate: two services, markup in a message.
func history(t *testing.T) []rr.Record {
	failedRec := rec(t, "2", rr.StateAborted, ago(3*time.Hour), ago(2*time.Hour))
	failedRec.LastError = `<img src=x onerror="document.title='injected'">`
	failedRec.SyncStartedAt, failedRec.ObjectGeneration = ago(3*time.Hour), "Rollout/docs/docs=2"
	shop, err := rr.NewReleaseID("shop", "9", "prod-eu", "prod")
	if err != nil {
		t.Fatal(err)
	}
	return []rr.Record{
		healthy(rec(t, "1", rr.StateSuperseded, ago(5*time.Hour), ago(3*time.Hour)), ago(4*time.Hour)),
		failedRec,
		healthy(rec(t, "3", rr.StateHealthy, ago(90*time.Minute), ago(time.Hour)), ago(time.Hour)),
		rec(t, "4", rr.StateProgressing, ago(10*time.Minute), ago(5*time.Minute)),
		rr.NewRecord(rr.Release{ID: shop, Image: "ghcr.io/acme/shop:9"}, ago(20*time.Minute)),
	}
}

func api(t *testing.T, src rh.Records) http.Handler {
	t.Helper()
	a := &rh.API{Cache: rh.NewCache(src, 5*time.Second, (&fakeClock{at: now}).Now), KeepHealthy: 5, Logger: discard, Now: (&fakeClock{at: now}).Now,
		Scrapers: scrapersAt(t, httptestAddr)}
	mux := http.NewServeMux()
	a.Routes(mux)
	return mux
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

// TestReadAPIAnswers asks every route every kind of question: each JSON
// answer holds to its schema, each refusal is one line with the reason.
func TestReadAPIAnswers(t *testing.T) {
	h := api(t, &fakeRecords{recs: history(t)})
	for _, tc := range []struct {
		target string
		status int
		schema *jsondoc.Schema
		check  func(t *testing.T, body string)
	}{
		{"/v1/releases", 200, rh.ReleasesAnswer, func(t *testing.T, body string) {
			var got rh.Releases
			_ = json.Unmarshal([]byte(body), &got)
			ids := []string{}
			for _, v := range got.Releases {
				ids = append(ids, v.ReleaseID)
			}
			if strings.Join(ids, " ") != "docs@4:prod-eu/prod shop@9:prod-eu/prod docs@3:prod-eu/prod docs@2:prod-eu/prod docs@1:prod-eu/prod" ||
				got.Truncated || got.Unreadable != 1 {
				t.Fatalf("newest first: %v %+v", ids, got)
			}
		}},
		{"/v1/releases?app=docs&state=healthy", 200, rh.ReleasesAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"releaseId":"docs@3:prod-eu/prod"`) || strings.Count(body, `"releaseId"`) != 1 || !strings.Contains(body, `"leadTimeSeconds":1800`) {
				t.Fatal(body)
			}
		}},
		{"/v1/releases/docs@3:prod-eu/prod", 200, rh.ReleaseAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"syncStartedAt":null`) || !strings.Contains(body, `"objectGeneration":""`) {
				t.Fatal(body)
			}
		}},
		{"/v1/releases?limit=1", 200, rh.ReleasesAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"truncated":true`) {
				t.Fatal(body)
			}
		}},
		{"/v1/releases?env=stage", 200, rh.ReleasesAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"releases":[]`) {
				t.Fatal(body)
			}
		}},
		{"/v1/releases?state=happy", 400, nil, nil},
		{"/v1/releases?colour=red", 400, nil, nil},
		{"/v1/releases/docs@2:prod-eu/prod", 200, rh.ReleaseAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"outcome":"failed"`) || !strings.Contains(body, `"healthyAt":null`) || !strings.Contains(body, `\u003cimg`) ||
				!strings.Contains(body, `"syncStartedAt":"2026-11-20T09:00:00Z"`) || !strings.Contains(body, `"objectGeneration":"Rollout/docs/docs=2"`) {
				t.Fatal(body)
			}
		}},
		{"/v1/releases/docs@2:prod-eu%2Fprod", 200, rh.ReleaseAnswer, nil},
		{"/v1/releases/docs@7:prod-eu/prod", 404, nil, nil},
		{"/v1/releases/not-a-release", 400, nil, nil},
		{"/v1/releases/docs@2:prod-eu/prod?x=1", 400, nil, nil},
		{"/v1/rollback-eligible?app=docs&env=prod&cluster=prod-eu&image=ghcr.io/acme/docs:1", 200, rh.EligibilityAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"eligible":true`) || !strings.Contains(body, `"releaseId":"docs@1:prod-eu/prod"`) {
				t.Fatal(body)
			}
		}},
		{"/v1/rollback-eligible?app=docs&env=prod&cluster=prod-eu&image=ghcr.io/acme/docs:2", 200, rh.EligibilityAnswer, func(t *testing.T, body string) {
			if !strings.Contains(body, `"eligible":false`) || !strings.Contains(body, "none of the newest") {
				t.Fatal(body)
			}
		}},
		{"/v1/rollback-eligible?app=docs&env=prod&cluster=prod-eu", 400, nil, nil},
		{"/v1/rollback-eligible?app=docs&env=prod&image=x", 400, nil, nil},
	} {
		t.Run(tc.target, func(t *testing.T) {
			w := get(t, h, tc.target)
			body := w.Body.String()
			if w.Code != tc.status {
				t.Fatalf("%d %s, want %d", w.Code, body, tc.status)
			}
			if tc.schema == nil {
				if w.Header().Get("Content-Type") != "text/plain; charset=utf-8" || strings.Count(body, "\n") != 1 || len(body) < 10 {
					t.Fatalf("a refusal is one line with its reason: %q", body)
				}
				return
			}
			doc, err := jsondoc.Parse(w.Body.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.schema.Validate(doc); err != nil {
				t.Fatalf("off its schema: %v\n%s", err, body)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

// TestReadAPIUnreadable: a read that fails answers 503, saying so.
func TestReadAPIUnreadable(t *testing.T) {
	h := api(t, &fakeRecords{err: errors.New("connection refused")})
	for _, target := range []string{"/v1/releases", "/v1/releases/docs@1:prod-eu/prod", "/v1/rollback-eligible?app=docs&env=prod&cluster=prod-eu&image=x", "/", "/metrics"} {
		if w := get(t, h, target); w.Code/100 != 5 {
			t.Errorf("%s: %d %s", target, w.Code, w.Body)
		}
	}
}

// ServiceRBAC is the release record service's grant, which the read side
// runs under, and serviceAccount the ServiceAccount it grants.
const (
	ServiceRBAC    = "../../deploy/release-record/rbac.yaml"
	serviceAccount = "release-record"
)

var discard = slog.New(slog.DiscardHandler)

// TestKubeRecords reads records written as the release record writes them,
// under the service's own grant, leaving out one that does not decode.
func TestKubeRecords(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, ServiceRBAC, serviceAccount)
	put(t, cp.Kube, ns, history(t)...)
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "release-0123", Namespace: ns, Labels: map[string]string{rr.LabelManagedBy: rr.ManagedBy}},
		Data: map[string]string{"state": "healthy"}}
	if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := rh.NewKubeSweep(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	recs, unreadable, err := rh.KubeRecords{List: list.List}.Records(context.Background())
	if err != nil || len(recs) != len(history(t)) || unreadable != 1 {
		t.Fatalf("%d records, %d unreadable, %v", len(recs), unreadable, err)
	}
	h := api(t, rh.KubeRecords{List: list.List})
	if w := get(t, h, "/v1/releases/docs@2:prod-eu/prod"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"state":"aborted"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
