package releasehistory

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
)

// The DORA figures as Prometheus metrics, per app, env and cluster. They
// are recomputed from the records at each scrape, so a restart loses
// nothing; a record the sweep deletes leaves them, which Prometheus reads
// as a counter reset: ask over windows shorter than RECORD_TTL_DAYS.
var (
	serviceLabels   = []string{"app", "env", "cluster"}
	descDeployments = prometheus.NewDesc("release_record_deployments_total",
		"Finished deployments, by outcome: succeeded (reached healthy without failing first), failed (aborted or degraded before healthy) or abandoned.",
		append(slices.Clone(serviceLabels), "outcome"), nil)
	descLeadTime = prometheus.NewDesc("release_record_lead_time_seconds",
		"Time from a release's merge to its first healthy.", serviceLabels, nil)
	descChangeFailures = prometheus.NewDesc("release_record_change_failures_total",
		"Deployments aborted or degraded before healthy; a drift after healthy is not one.", serviceLabels, nil)
	descRestore = prometheus.NewDesc("release_record_restore_time_seconds",
		"Time from a change failure to the service's next healthy release.", serviceLabels, nil)
	descUnreadable = prometheus.NewDesc("release_record_unreadable_records",
		"Records left out of the figures: they do not decode, or hold no state.", nil, nil)
)

// DurationBuckets are the lead time's and time to restore's buckets, in
// seconds: a minute to a week.
var DurationBuckets = []float64{60, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800}

// Collector turns the cached records into the DORA metrics at each scrape.
type Collector struct{ Cache *Cache }

// Describe sends every metric's description.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDeployments, descLeadTime, descChangeFailures, descRestore, descUnreadable} {
		ch <- d
	}
}

// Collect sends the figures of every record. A read that fails fails the
// scrape: figures from no records would read as none deployed.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	snap, err := c.Cache.Read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDeployments, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUnreadable, prometheus.GaugeValue, float64(snap.Unreadable))
	for k, f := range Figures(snap.Records, time.Time{}) {
		for _, o := range Outcomes {
			ch <- prometheus.MustNewConstMetric(descDeployments, prometheus.CounterValue, float64(f.Deployments[o]), k.App, k.Env, k.Cluster, string(o))
		}
		ch <- prometheus.MustNewConstMetric(descChangeFailures, prometheus.CounterValue, float64(f.ChangeFailures), k.App, k.Env, k.Cluster)
		ch <- histogram(descLeadTime, f.LeadTimes, k)
		ch <- histogram(descRestore, f.Restores, k)
	}
}

func histogram(d *prometheus.Desc, obs []time.Duration, k ServiceKey) prometheus.Metric {
	// Every bucket is said, those with none too.
	buckets := make(map[float64]uint64, len(DurationBuckets))
	for _, b := range DurationBuckets {
		buckets[b] = 0
	}
	sum := 0.0
	for _, o := range obs {
		s := o.Seconds()
		sum += s
		for _, b := range DurationBuckets {
			if s <= b {
				buckets[b]++
			}
		}
	}
	return prometheus.MustNewConstHistogram(d, uint64(len(obs)), sum, buckets, k.App, k.Env, k.Cluster)
}

// MetricsHandler answers GET /metrics: the DORA figures and the process's
// own, to the metrics stack's pods alone (Scrapers), as the gate's do.
func (a *API) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector{a.Cache}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scrapers := a.Scrapers
	if scrapers == nil {
		// None set: every scrape is refused, in the release record's words.
		scrapers = &podcallers.Scrapers{Service: service}
	}
	return scrapers.Only(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
