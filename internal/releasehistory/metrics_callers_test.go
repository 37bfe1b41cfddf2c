package releasehistory_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
)

// httptestAddr is the address httptest.NewRequest calls from.
const httptestAddr = "192.0.2.1"

// metricsStack is the metrics stack as the base names it.
var metricsStack = releasegate.ScraperIdentity{Namespace: "observability-system", Selector: "app.kubernetes.io/instance=prometheus", ServiceAccount: "prometheus"}

// scraperPod is a Running pod of the metrics stack at ip.
func scraperPod(ip string) release.Pod {
	return release.Pod{Name: "prometheus-0", Running: true, ServiceAccount: "prometheus", IPs: []string{ip}}
}

// scrapersAt are Scrapers whose one pod is at ip, for the tests that read
// /metrics from there.
func scrapersAt(t testing.TB, ip string) *rh.Scrapers {
	t.Helper()
	s, err := rh.NewScrapers(metricsStack, func(context.Context, string, labels.Selector) ([]release.Pod, error) {
		return []release.Pod{scraperPod(ip)}, nil
	}, discard)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMetricsAnswerTheScraperAlone holds /metrics to the gate's rule for
// its scraper: a Running pod, off the host network, of the scraper's
// namespace, selector and ServiceAccount at the connection's address; no
// scraper set refuses everyone, and pods that cannot be read answer 503.
func TestMetricsAnswerTheScraperAlone(t *testing.T) {
	hostNetwork, terminating, pending, other := scraperPod(httptestAddr), scraperPod(httptestAddr), scraperPod(httptestAddr), scraperPod(httptestAddr)
	hostNetwork.HostNetwork, terminating.Terminating, pending.Running, other.ServiceAccount = true, true, false, "grafana"
	for _, c := range []struct {
		what   string
		id     releasegate.ScraperIdentity
		pods   []release.Pod
		err    error
		remote string
		code   int
	}{
		{"the scraper's pod", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "", http.StatusOK},
		{"its address as IPv4 in IPv6", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "[::ffff:192.0.2.1]:4000", http.StatusOK},
		{"another pod's address", metricsStack, []release.Pod{scraperPod("192.0.2.9")}, nil, "", http.StatusForbidden},
		{"no pod", metricsStack, nil, nil, "", http.StatusForbidden},
		{"a pod on the host network", metricsStack, []release.Pod{hostNetwork}, nil, "", http.StatusForbidden},
		{"a pod being deleted", metricsStack, []release.Pod{terminating}, nil, "", http.StatusForbidden},
		{"a pod not running", metricsStack, []release.Pod{pending}, nil, "", http.StatusForbidden},
		{"a pod of another ServiceAccount", metricsStack, []release.Pod{other}, nil, "", http.StatusForbidden},
		{"an address that does not parse", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "somewhere", http.StatusForbidden},
		{"no scraper set", releasegate.ScraperIdentity{}, []release.Pod{scraperPod(httptestAddr)}, nil, "", http.StatusForbidden},
		{"pods that cannot be read", metricsStack, nil, errors.New("connection refused"), "", http.StatusServiceUnavailable},
	} {
		s, err := rh.NewScrapers(c.id, func(_ context.Context, namespace string, sel labels.Selector) ([]release.Pod, error) {
			if namespace != c.id.Namespace || sel.String() != c.id.Selector {
				t.Errorf("%s: listed %s %s, want %s %s", c.what, namespace, sel, c.id.Namespace, c.id.Selector)
			}
			return c.pods, c.err
		}, discard)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if c.remote != "" {
			r.RemoteAddr = c.remote
		}
		w := httptest.NewRecorder()
		s.Only(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("figures")) })).ServeHTTP(w, r)
		if w.Code != c.code || (c.code == http.StatusOK) != (w.Body.String() == "figures") {
			t.Errorf("%s: %d %q, want %d", c.what, w.Code, w.Body, c.code)
		}
	}
	var none *rh.Scrapers
	w := httptest.NewRecorder()
	none.Only(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "metrics stack alone") {
		t.Errorf("no Scrapers: %d %q, want every scrape refused", w.Code, w.Body)
	}
}

// TestScrapersRefuseAHalfSetIdentity: the three are set together, and a
// selector selects some pods, as the gate holds its own to.
func TestScrapersRefuseAHalfSetIdentity(t *testing.T) {
	for _, id := range []releasegate.ScraperIdentity{
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
