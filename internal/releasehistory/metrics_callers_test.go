package releasehistory_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
)

// httptestAddr is the address httptest.NewRequest calls from.
const httptestAddr = "192.0.2.1"

// metricsStack is the metrics stack as the base names it.
var metricsStack = podcallers.ScraperIdentity{Namespace: "observability-system", Selector: "app.kubernetes.io/instance=prometheus", ServiceAccount: "prometheus"}

// scraperPod is a Running pod of the metrics stack at ip.
func scraperPod(ip string) release.Pod {
	return release.Pod{Name: "prometheus-0", Running: true, ServiceAccount: "prometheus", IPs: []string{ip}}
}

// scrapersAt are Scrapers whose one pod is at ip, for the tests that read
// /metrics from there.
func scrapersAt(t testing.TB, ip string) *podcallers.Scrapers {
	t.Helper()
	s, err := rh.NewScrapers(metricsStack, func(context.Context, string, labels.Selector) ([]release.Pod, error) {
		return []release.Pod{scraperPod(ip)}, nil
	}, discard)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMetricsAnswerTheScraperAlone holds the record's /metrics to the
// scraper rule (podcallers holds its every case): the scraper's pod is
// answered, another address is refused in the release record's words, and
// an API with no Scrapers refuses every scrape.
func TestMetricsAnswerTheScraperAlone(t *testing.T) {
	api := &rh.API{Cache: rh.NewCache(&fakeRecords{}, time.Minute, (&fakeClock{at: now}).Now), Logger: discard, Scrapers: scrapersAt(t, httptestAddr)}
	scrape := func(a *rh.API, from string) (int, string) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if from != "" {
			r.RemoteAddr = from
		}
		w := httptest.NewRecorder()
		a.MetricsHandler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if code, body := scrape(api, ""); code != http.StatusOK {
		t.Errorf("the scraper's pod: %d %q", code, body)
	}
	if code, body := scrape(api, "192.0.2.9:4000"); code != http.StatusForbidden || !strings.Contains(body, "the release record's metrics answer the metrics stack alone") {
		t.Errorf("another address: %d %q", code, body)
	}
	none := &rh.API{Cache: api.Cache, Logger: discard}
	if code, body := scrape(none, ""); code != http.StatusForbidden || !strings.Contains(body, "the release record's metrics answer the metrics stack alone") {
		t.Errorf("no Scrapers: %d %q, want every scrape refused", code, body)
	}
}

// TestScrapersRefuseAHalfSetIdentity: the three are set together, and a
// selector selects some pods, as the gate holds its own to.
func TestScrapersRefuseAHalfSetIdentity(t *testing.T) {
	for _, id := range []podcallers.ScraperIdentity{
		{Namespace: "observability-system"},
		{Namespace: "observability-system", Selector: "app in (", ServiceAccount: "prometheus"},
		{Namespace: "observability-system", Selector: " , ", ServiceAccount: "prometheus"},
	} {
		if _, err := rh.NewScrapers(id, nil, discard); err == nil || !strings.Contains(err.Error(), "METRICS_SCRAPER_") {
			t.Errorf("%+v: %v", id, err)
		}
		env := map[string]string{"METRICS_SCRAPER_NAMESPACE": id.Namespace, "METRICS_SCRAPER_SELECTOR": id.Selector, "METRICS_SCRAPER_SERVICE_ACCOUNT": id.ServiceAccount}
		if _, err := rh.ScrapersFrom(func(k string) string { return env[k] }, discard); err == nil {
			t.Errorf("%+v from the environment: started", id)
		}
	}
}
