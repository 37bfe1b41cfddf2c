package podcallers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// ScrapeVariables are the variables that say who may scrape /metrics, read
// the same way by every service that serves it.
var ScrapeVariables = []settings.Variable{
	{Name: "METRICS_SCRAPER_NAMESPACE", Default: settings.Unset, Meaning: "namespace of the metrics stack's pods, the only callers /metrics answers"},
	{Name: "METRICS_SCRAPER_SELECTOR", Default: settings.Unset, Meaning: "label selector of those pods (one that selects everything is refused)"},
	{Name: "METRICS_SCRAPER_SERVICE_ACCOUNT", Default: settings.Unset, Meaning: "ServiceAccount those pods run under"},
}

// ScraperIdentity says which pods are the metrics stack's: the only callers
// /metrics answers, since the figures name namespaces, revisions and apps.
type ScraperIdentity struct {
	Namespace      string
	Selector       string
	ServiceAccount string
}

// ScraperIdentityFrom reads the three ScrapeVariables.
func ScraperIdentityFrom(getenv func(string) string) ScraperIdentity {
	return ScraperIdentity{
		Namespace:      getenv("METRICS_SCRAPER_NAMESPACE"),
		Selector:       getenv("METRICS_SCRAPER_SELECTOR"),
		ServiceAccount: getenv("METRICS_SCRAPER_SERVICE_ACCOUNT"),
	}
}

// Configured reports whether any of the three is set.
func (s ScraperIdentity) Configured() bool {
	return s.Namespace != "" || s.Selector != "" || s.ServiceAccount != ""
}

// Validate checks the three are set together or not at all and returns the
// selector (nil when none is set). A selector that matches every pod would
// let any pod of the namespace scrape.
func (s ScraperIdentity) Validate() (labels.Selector, error) {
	if !s.Configured() {
		return nil, nil
	}
	if s.Namespace == "" || s.Selector == "" || s.ServiceAccount == "" {
		return nil, errors.New("METRICS_SCRAPER_NAMESPACE, METRICS_SCRAPER_SELECTOR and METRICS_SCRAPER_SERVICE_ACCOUNT are set together or not at all")
	}
	sel, err := labels.Parse(s.Selector)
	if err != nil {
		return nil, fmt.Errorf("METRICS_SCRAPER_SELECTOR %q: %w", s.Selector, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("METRICS_SCRAPER_SELECTOR %q selects every pod", s.Selector)
	}
	return sel, nil
}

// PodLister lists the pods of a namespace a selector matches.
type PodLister func(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error)

// Scrapers holds one service's /metrics to the metrics stack's pods.
type Scrapers struct {
	// Service names the service in its refusals ("the release gate").
	Service  string
	Identity ScraperIdentity
	selector labels.Selector // nil where no scraper is set: every scrape is refused
	Pods     PodLister
	Logger   *slog.Logger
}

// NewScrapers checks the scraper's identity (the three set together or not
// at all, a selector that selects some pods) and answers the pods it names
// through pods.
func NewScrapers(service string, id ScraperIdentity, pods PodLister, logger *slog.Logger) (*Scrapers, error) {
	sel, err := id.Validate()
	if err != nil {
		return nil, err
	}
	return &Scrapers{Service: service, Identity: id, selector: sel, Pods: pods, Logger: logger}, nil
}

// Only answers next to the scraper's pods alone, by the rule Admits holds
// every caller known by its pod to: the connection's source address is a
// Running pod, off the host network, of the scraper's namespace, selector
// and ServiceAccount, read on each scrape. A nil Scrapers, or one with no
// scraper set, refuses every scrape.
func (s *Scrapers) Only(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil || s.selector == nil {
			server.Answer(w, http.StatusForbidden, s.notScraper())
			return
		}
		addr, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			server.Answer(w, http.StatusForbidden, s.notScraper())
			return
		}
		pods, err := s.Pods(r.Context(), s.Identity.Namespace, s.selector)
		if err != nil {
			s.Logger.LogAttrs(r.Context(), slog.LevelError, "cannot check the scraper", slog.String("cause", err.Error()))
			server.Answer(w, http.StatusServiceUnavailable, "the "+s.Service+" cannot check its caller now; its log names the cause")
			return
		}
		if !Admits(addr.Addr(), pods, s.Identity.ServiceAccount) {
			s.Logger.LogAttrs(r.Context(), slog.LevelWarn, "scraper refused", slog.String("remote", r.RemoteAddr))
			server.Answer(w, http.StatusForbidden, s.notScraper())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// notScraper is the refusal; a nil Scrapers names no service.
func (s *Scrapers) notScraper() string {
	if s == nil || s.Service == "" {
		return "these metrics answer the metrics stack alone"
	}
	return "the " + s.Service + "'s metrics answer the metrics stack alone"
}
