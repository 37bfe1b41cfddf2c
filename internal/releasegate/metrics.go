package releasegate

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// ScraperIdentity says which pods are the metrics stack's: the only callers
// /metrics answers, since it names namespaces and revisions.
type ScraperIdentity struct {
	Namespace      string
	Selector       string
	ServiceAccount string
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

const replyNotScraper = "the release gate's metrics answer the metrics stack alone"

var (
	descTended = prometheus.NewDesc("release_gate_tended_timestamp_seconds",
		"When the last round over every gated Application finished; 0 before the first.", nil, nil)
	heldLabels    = []string{"namespace", "application", "reason", "serving", "pinned"}
	descHeldSince = prometheus.NewDesc("release_gate_held_since_timestamp_seconds",
		"When the gate first saw the pinned revision of a held release.", heldLabels, nil)
	descHeldDeadline = prometheus.NewDesc("release_gate_held_deadline_seconds",
		"The gate deadline of a held release, from its inputs.", heldLabels, nil)
	descUndoRefused = prometheus.NewDesc("release_gate_undo_refused",
		"A migration left applied: the tag the down would return to and the condition that failed.",
		[]string{"namespace", "application", "tag", "condition"}, nil)
	descUnanswerable = prometheus.NewDesc("release_gate_unanswerable",
		"An Application the last round could not read or decide for.", []string{"namespace", "application"}, nil)
	descLeader = prometheus.NewDesc("release_gate_leader",
		"1 while this replica holds the Lease and runs the rounds, 0 while another does.", nil, nil)
)

// roundCollector turns the last round's findings into metrics at each scrape.
type roundCollector struct{ t *Tender }

func (c roundCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTended, descHeldSince, descHeldDeadline, descUndoRefused, descUnanswerable, descLeader} {
		ch <- d
	}
}

func (c roundCollector) Collect(ch chan<- prometheus.Metric) {
	last := c.t.Last()
	tended := 0.0
	if !last.Tended.IsZero() {
		tended = float64(last.Tended.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descTended, prometheus.GaugeValue, tended)
	leader := 0.0
	if c.t.leads() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	for _, a := range last.Applications {
		if h := a.Held; h != nil {
			values := []string{a.Namespace, a.Application, h.Reason, h.Serving, h.Pinned}
			ch <- prometheus.MustNewConstMetric(descHeldSince, prometheus.GaugeValue, float64(h.Since.Unix()), values...)
			ch <- prometheus.MustNewConstMetric(descHeldDeadline, prometheus.GaugeValue, h.Deadline.Seconds(), values...)
		}
		if n := a.NotUndone; n != nil {
			ch <- prometheus.MustNewConstMetric(descUndoRefused, prometheus.GaugeValue, 1, a.Namespace, a.Application, n.Tag, n.Condition)
		}
		if a.Unanswerable != "" {
			ch <- prometheus.MustNewConstMetric(descUnanswerable, prometheus.GaugeValue, 1, a.Namespace, a.Application)
		}
	}
}

// MetricsHandler answers GET /metrics to the metrics stack's pods alone, by
// the rule the webhooks hold Flagger to: the connection's source address is
// a Running pod off the host network of the scraper's namespace, selector and
// ServiceAccount, read on each scrape. With no scraper configured every
// scrape is refused.
func (t *Tender) MetricsHandler(scraper ScraperIdentity) (http.Handler, error) {
	sel, err := scraper.Validate()
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(roundCollector{t})
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if sel == nil {
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		addr, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		pods, err := t.cluster.Pods(ctx, scraper.Namespace, sel)
		if err != nil {
			t.logger.LogAttrs(ctx, slog.LevelError, "cannot check the scraper", slog.String("cause", err.Error()))
			server.Answer(w, http.StatusServiceUnavailable, "the release gate cannot check its caller now; its log names the cause")
			return
		}
		// The rule that admits Flagger's pods admits the scraper's.
		if !IsFlagger(addr.Addr(), pods, scraper.ServiceAccount) {
			t.logger.LogAttrs(ctx, slog.LevelWarn, "scraper refused", slog.String("remote", r.RemoteAddr))
			server.Answer(w, http.StatusForbidden, replyNotScraper)
			return
		}
		metrics.ServeHTTP(w, r)
	}), nil
}
