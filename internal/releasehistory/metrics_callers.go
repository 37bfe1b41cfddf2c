package releasehistory

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// ScrapeVariables are the variables that say who may scrape /metrics: the
// Release Gate's own three, read by the same rule.
var ScrapeVariables = []settings.Variable{
	{Name: "METRICS_SCRAPER_NAMESPACE", Default: settings.Unset, Meaning: "namespace of the metrics stack's pods, the only callers /metrics answers"},
	{Name: "METRICS_SCRAPER_SELECTOR", Default: settings.Unset, Meaning: "label selector of those pods (one that selects everything is refused)"},
	{Name: "METRICS_SCRAPER_SERVICE_ACCOUNT", Default: settings.Unset, Meaning: "ServiceAccount those pods run under"},
}

// PodLister lists the pods of a namespace a selector matches.
type PodLister func(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error)

// Scrapers holds /metrics to the metrics stack's pods, as the gate holds
// its own: the figures name every app, env and cluster, which only the
// metrics stack is to collect from here (a dashboard reads the read API).
type Scrapers struct {
	Identity releasegate.ScraperIdentity
	selector labels.Selector // nil where no scraper is set: every scrape is refused
	Pods     PodLister
	Logger   *slog.Logger
}

// NewScrapers checks the scraper's identity as the gate does (the three
// set together or not at all, a selector that selects some pods) and
// answers the pods it names through pods.
func NewScrapers(id releasegate.ScraperIdentity, pods PodLister, logger *slog.Logger) (*Scrapers, error) {
	sel, err := id.Validate()
	if err != nil {
		return nil, err
	}
	return &Scrapers{Identity: id, selector: sel, Pods: pods, Logger: logger}, nil
}

// ScrapersFrom reads the three variables and lists the scraper's pods
// through the cluster KUBECONFIG or the in-cluster ServiceAccount names.
func ScrapersFrom(getenv func(string) string, logger *slog.Logger) (*Scrapers, error) {
	id := releasegate.ScraperIdentity{
		Namespace:      getenv("METRICS_SCRAPER_NAMESPACE"),
		Selector:       getenv("METRICS_SCRAPER_SELECTOR"),
		ServiceAccount: getenv("METRICS_SCRAPER_SERVICE_ACCOUNT"),
	}
	if _, err := id.Validate(); err != nil {
		return nil, err
	}
	rest, err := kubeclient.Config(getenv)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewScrapers(id, func(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error) {
		list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, err
		}
		out := make([]release.Pod, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, release.PodOf(&list.Items[i]))
		}
		return out, nil
	}, logger)
}

const replyNotScraper = "the release record's metrics answer the metrics stack alone"

// Only answers next to the scraper's pods alone, by the rule the gate holds
// its callers to (releasegate.IsFlagger): the connection's source address is
// a Running pod, off the host network, of the scraper's namespace, selector
// and ServiceAccount, read on each scrape. A nil Scrapers, or one with no
// scraper set, refuses every scrape.
func (s *Scrapers) Only(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil || s.selector == nil {
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		addr, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		pods, err := s.Pods(r.Context(), s.Identity.Namespace, s.selector)
		if err != nil {
			s.Logger.LogAttrs(r.Context(), slog.LevelError, "cannot check the scraper", slog.String("cause", err.Error()))
			server.Answer(w, http.StatusServiceUnavailable, "the release record cannot check its caller now; its log names the cause")
			return
		}
		if !releasegate.IsFlagger(addr.Addr(), pods, s.Identity.ServiceAccount) {
			s.Logger.LogAttrs(r.Context(), slog.LevelWarn, "scraper refused", slog.String("remote", r.RemoteAddr))
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		next.ServeHTTP(w, r)
	})
}
