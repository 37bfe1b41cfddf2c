package releasegate

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// ScraperIdentity says which pods are the metrics stack's: the only callers
// /metrics answers. The rule is podcallers', which the release record's
// /metrics holds its scrapers to as well.
type ScraperIdentity = podcallers.ScraperIdentity

var (
	descReconciled = prometheus.NewDesc("release_gate_tended_timestamp_seconds",
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
type roundCollector struct{ t *Reconciler }

func (c roundCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReconciled, descHeldSince, descHeldDeadline, descUndoRefused, descUnanswerable, descLeader} {
		ch <- d
	}
}

func (c roundCollector) Collect(ch chan<- prometheus.Metric) {
	last := c.t.Last()
	reconciled := 0.0
	if !last.Reconciled.IsZero() {
		reconciled = float64(last.Reconciled.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descReconciled, prometheus.GaugeValue, reconciled)
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
// the rule the webhooks hold Flagger to (podcallers.Admits): the
// connection's source address is a Running pod off the host network of the
// scraper's namespace, selector and ServiceAccount, read on each scrape.
// With no scraper configured every scrape is refused.
func (t *Reconciler) MetricsHandler(scraper ScraperIdentity) (http.Handler, error) {
	pods := func(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error) {
		return t.cluster.Pods(ctx, namespace, selector)
	}
	scrapers, err := podcallers.NewScrapers("release gate", scraper, pods, t.logger)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(roundCollector{t})
	return scrapers.Only(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})), nil
}
