package podcallers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// httptestAddr is the address httptest.NewRequest calls from.
const httptestAddr = "192.0.2.1"

// metricsStack is the metrics stack as the base names it.
var metricsStack = podcallers.ScraperIdentity{Namespace: "observability-system", Selector: "app.kubernetes.io/instance=prometheus", ServiceAccount: "prometheus"}

// scraperPod is a Running pod of the metrics stack at ip.
func scraperPod(ip string) release.Pod {
	return release.Pod{Name: "prometheus-0", Running: true, ServiceAccount: "prometheus", IPs: []string{ip}}
}

// TestOnlyTheScraper holds /metrics to the rule for its scraper: a Running
// pod, off the host network, of the scraper's namespace, selector and
// ServiceAccount at the connection's address; no scraper set refuses
// everyone, and pods that cannot be read answer 503.
func TestOnlyTheScraper(t *testing.T) {
	hostNetwork, terminating, pending, other := scraperPod(httptestAddr), scraperPod(httptestAddr), scraperPod(httptestAddr), scraperPod(httptestAddr)
	hostNetwork.HostNetwork, terminating.Terminating, pending.Running, other.ServiceAccount = true, true, false, "grafana"
	for _, c := range []struct {
		what   string
		id     podcallers.ScraperIdentity
		pods   []release.Pod
		err    error
		remote string
		code   int
		says   string
	}{
		{"the scraper's pod", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "", http.StatusOK, "figures"},
		{"its address as IPv4 in IPv6", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "[::ffff:192.0.2.1]:4000", http.StatusOK, "figures"},
		{"another pod's address", metricsStack, []release.Pod{scraperPod("192.0.2.9")}, nil, "", http.StatusForbidden, "the release record's metrics answer the metrics stack alone"},
		{"no pod", metricsStack, nil, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"a pod on the host network", metricsStack, []release.Pod{hostNetwork}, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"a pod being deleted", metricsStack, []release.Pod{terminating}, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"a pod not running", metricsStack, []release.Pod{pending}, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"a pod of another ServiceAccount", metricsStack, []release.Pod{other}, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"an address that does not parse", metricsStack, []release.Pod{scraperPod(httptestAddr)}, nil, "somewhere", http.StatusForbidden, "metrics stack alone"},
		{"no scraper set", podcallers.ScraperIdentity{}, []release.Pod{scraperPod(httptestAddr)}, nil, "", http.StatusForbidden, "metrics stack alone"},
		{"pods that cannot be read", metricsStack, nil, errors.New("connection refused"), "", http.StatusServiceUnavailable,
			"the release record cannot check its caller now; its log names the cause"},
	} {
		s, err := podcallers.NewScrapers("release record", c.id, func(_ context.Context, namespace string, sel labels.Selector) ([]release.Pod, error) {
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
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s: %d %q, want %d %q", c.what, w.Code, w.Body, c.code, c.says)
		}
	}
	var none *podcallers.Scrapers
	w := httptest.NewRecorder()
	none.Only(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "metrics stack alone") {
		t.Errorf("no Scrapers: %d %q, want every scrape refused", w.Code, w.Body)
	}
}

func TestScraperIdentity(t *testing.T) {
	cases := []struct {
		name  string
		id    podcallers.ScraperIdentity
		set   bool
		cause string
	}{
		{"none set: every scrape refused", podcallers.ScraperIdentity{}, false, ""},
		{"all three", podcallers.ScraperIdentity{Namespace: "monitoring", Selector: "app.kubernetes.io/name=prometheus", ServiceAccount: "prometheus"}, true, ""},
		{"a namespace alone", podcallers.ScraperIdentity{Namespace: "monitoring"}, false, "together"},
		{"no service account", podcallers.ScraperIdentity{Namespace: "monitoring", Selector: "a=b"}, false, "together"},
		{"a selector of every pod", podcallers.ScraperIdentity{Namespace: "monitoring", Selector: " ", ServiceAccount: "prometheus"}, false, "every pod"},
		{"a selector that does not parse", podcallers.ScraperIdentity{Namespace: "monitoring", Selector: "a in (", ServiceAccount: "prometheus"}, false, "METRICS_SCRAPER_SELECTOR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, err := c.id.Validate()
			if c.cause != "" {
				if err == nil || !strings.Contains(err.Error(), c.cause) {
					t.Fatalf("err %v, want %q", err, c.cause)
				}
				return
			}
			if err != nil || (sel != nil) != c.set {
				t.Fatalf("selector %v err %v", sel, err)
			}
		})
	}
	env := map[string]string{"METRICS_SCRAPER_NAMESPACE": "monitoring", "METRICS_SCRAPER_SELECTOR": "a=b", "METRICS_SCRAPER_SERVICE_ACCOUNT": "prometheus"}
	if got := podcallers.ScraperIdentityFrom(func(k string) string { return env[k] }); got != (podcallers.ScraperIdentity{Namespace: "monitoring", Selector: "a=b", ServiceAccount: "prometheus"}) {
		t.Errorf("from the environment: %+v", got)
	}
}
