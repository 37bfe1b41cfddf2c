package releasegate

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// RoundInterval is how often the gate tends every gated Application: Flagger
// asks nothing once a release failed, and nothing at all after promotion.
const RoundInterval = 15 * time.Second

// DefaultGateNamespace is where the gate keeps its records unless
// GATE_NAMESPACE says otherwise.
const DefaultGateNamespace = "delivery-system"

// CheckGateNamespace checks GATE_NAMESPACE names a namespace.
func CheckGateNamespace(namespace string) error {
	if !release.IsName(namespace) {
		return fmt.Errorf("GATE_NAMESPACE %q is not a namespace name", release.Clip(namespace))
	}
	return nil
}

// Tender runs the rounds over every gated Application and keeps what the
// last one found for /metrics.
type Tender struct {
	cluster   TendCluster
	namespace string
	warmer    Warmer
	logger    *slog.Logger
	now       func() time.Time

	mu    sync.Mutex
	last  RoundResult
	cache releaseCache

	warmups warmups
}

// NewTender builds the rounds: records in namespace, warmups through warmer.
func NewTender(cluster TendCluster, namespace string, warmer Warmer, logger *slog.Logger, now func() time.Time) *Tender {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Tender{cluster: cluster, namespace: namespace, warmer: warmer, logger: logger, now: now,
		warmups: warmups{running: map[warmKey]bool{}, done: map[warmKey]release.WarmupRecord{}, slots: make(chan struct{}, warmupsAtOnce)}}
}

// OnWarmupDone has prompt called as each warmup ends, so the round that
// writes its verdict comes at once rather than on the next tick. It is set
// before the rounds run.
func (t *Tender) OnWarmupDone(prompt func()) { t.warmups.finished = prompt }

// Tended is what one round did and found for one Application.
type Tended struct {
	Namespace, Application string
	Held                   *Held
	NotUndone              *NotUndone
	Unanswerable           string
	Started, Undone        string
}

// RoundResult is what a round found; Tended is zero before the first round
// that finished.
type RoundResult struct {
	Tended       time.Time
	Applications []Tended
}

// Last is what the last finished round found.
func (t *Tender) Last() RoundResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Round tends every gated Application once. An Application the round cannot
// finish is reported unanswerable and the round goes on; only a list every
// Application needs (inputs, records, Canaries, Jobs) fails the round.
// Deployments are listed only when an Application needs them: one whose
// revision may have come to serve, or whose undo looks for its new copies;
// if that list fails, those Applications alone go unanswered.
func (t *Tender) Round(ctx context.Context) error {
	s, err := read(ctx, t.cluster, t.namespace, true)
	if err != nil {
		return err
	}
	now := t.now()
	plans := make([]Plan, len(s.inputs))
	views := make([]ApplicationView, len(s.inputs))
	needDeployments := false
	for i, o := range s.inputs {
		views[i] = s.view(t.namespace, o, now)
		views[i].DeploymentsUnread = true
		plans[i] = Tend(views[i])
		needDeployments = needDeployments || plans[i].ReadDeployments
	}
	if needDeployments {
		t.replanWithCopies(ctx, s, views, plans, now)
	}
	// A warmup runs beside the rounds; the plan of a revision whose warmup
	// has ended takes its verdict onto the record.
	out := make([]Tended, len(s.inputs))
	wanted := map[warmKey]bool{}
	undecided := map[string]bool{}
	for i := range s.inputs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		app := views[i].Namespace + "/" + views[i].Application
		if r := views[i].Record; r != nil && r.ServingUnwarmed() {
			// What serves is not warmed on record: a verdict for it is kept
			// while another revision is pinned, for when the pin comes back.
			wanted[warmKey{app, r.Serving}] = true
		}
		var taken *warmKey
		if w := plans[i].Warm; w != nil {
			key := warmKey{app, w.Revision}
			wanted[key] = true
			if verdict, ok := t.warmupOf(ctx, key, w); ok {
				plans[i].Record.Warmup = &verdict
				plans[i].Write = true
				taken = &key
			}
		}
		out[i] = t.act(ctx, s, views[i], plans[i])
		switch {
		case out[i].Unanswerable != "":
			// Not decided this round: a verdict waiting for it waits on.
			undecided[app] = true
		case taken != nil:
			t.warmups.recorded(*taken)
		}
	}
	t.warmups.forget(wanted, undecided)
	t.mu.Lock()
	t.last = RoundResult{Tended: t.now(), Applications: out}
	t.mu.Unlock()
	return nil
}

// replanWithCopies lists the Deployments (and, for a revision that may have
// come to serve, its namespace's ConfigMaps) and decides again for the
// Applications whose plans asked for them.
func (t *Tender) replanWithCopies(ctx context.Context, s *snapshot, views []ApplicationView, plans []Plan, now time.Time) {
	ds, err := t.cluster.Deployments(ctx)
	if err != nil {
		// Only the Applications that needed them go unanswered, and what
		// was decided without them (a hold, a migration left applied) is
		// still reported; nothing is written or started.
		for i := range plans {
			if plans[i].ReadDeployments {
				u := UnanswerablePlan(views[i], fmt.Sprintf("list the Deployments: %v", err))
				u.Held = plans[i].Held
				if plans[i].NotUndone != nil {
					u.NotUndone = plans[i].NotUndone
				}
				plans[i] = u
			}
		}
		return
	}
	for _, d := range ds {
		s.deployments[[2]string{d.Namespace, d.Name}] = d.Deployment
	}
	// A release that changes a ConfigMap alone leaves the pod template
	// as it was: a revision that may have come to serve has its copies
	// compared with the ConfigMaps they take their environment from
	// too, as the barrier compares them.
	var namespaces []string
	for i, o := range s.inputs {
		if plans[i].ReadConfigs && !slices.Contains(namespaces, o.Namespace) {
			namespaces = append(namespaces, o.Namespace)
		}
	}
	unread := s.readConfigs(ctx, t.cluster, namespaces)
	for i, o := range s.inputs {
		if !plans[i].ReadDeployments {
			continue
		}
		if err := unread[o.Namespace]; err != nil && plans[i].ReadConfigs {
			plans[i] = UnanswerablePlan(views[i], err.Error())
			continue
		}
		views[i] = s.view(t.namespace, o, now)
		plans[i] = Tend(views[i])
	}
}

// act carries a plan out: the record first, so what the gate starts is on
// record before it starts, then the Job, then the log lines.
func (t *Tender) act(ctx context.Context, s *snapshot, v ApplicationView, p Plan) Tended {
	o := Tended{Namespace: v.Namespace, Application: v.Application}
	log := t.logger.With(slog.String("namespace", v.Namespace), slog.String("application", v.Application))
	if p.ReadNewCopies {
		if err := t.countNewCopies(ctx, s, &v); err != nil {
			p.Unanswerable = err.Error()
		} else {
			p = Tend(v)
		}
	}
	// A round that could not decide still records what it learnt (a
	// migration that ran, a release first seen): a later release would
	// otherwise not know a migration was left applied.
	if p.Write {
		if err := t.writeRecord(ctx, s, v, p); err != nil {
			// Nothing is started on a record that did not land.
			p.Start, p.Undo = nil, nil
			if p.Unanswerable != "" {
				p.Unanswerable += "; "
			}
			p.Unanswerable += err.Error()
		}
	}
	for _, job := range []struct {
		start *JobStart
		field *string
		what  string
	}{{p.Start, &o.Started, "migration started"}, {p.Undo, &o.Undone, "migration undone"}} {
		if job.start == nil {
			continue
		}
		if err := t.cluster.StartJob(ctx, *job.start); err != nil {
			p.Unanswerable = fmt.Sprintf("start Job %s/%s: %v", job.start.Namespace, job.start.Name, err)
			continue
		}
		*job.field = job.start.Name
		log.LogAttrs(ctx, slog.LevelInfo, job.what, slog.String("job", job.start.Name))
	}
	if w := p.Record.Warmup; w != nil && p.Warm != nil && w.Revision == p.Warm.Revision && p.Unanswerable == "" {
		attrs := []slog.Attr{slog.String("revision", w.Revision), slog.Bool("warmed", w.Warmed)}
		if w.Failed != nil {
			attrs = append(attrs, slog.String("request", w.Failed.Request), slog.Int("status", w.Failed.Status))
		}
		log.LogAttrs(ctx, slog.LevelInfo, "warmup", attrs...)
	}
	if h := p.Held; h != nil {
		o.Held = h
		log.LogAttrs(ctx, slog.LevelWarn, "release held", slog.String("serving", h.Serving),
			slog.String("pinned", h.Pinned), slog.String("reason", h.Reason), slog.String("cause", h.Cause))
	}
	if n := p.NotUndone; n != nil {
		o.NotUndone = n
		log.LogAttrs(ctx, slog.LevelError, "migration not undone", slog.String("tag", n.Tag),
			slog.String("condition", n.Condition), slog.String("migrated", n.Migrated))
	}
	if p.Unanswerable != "" {
		o.Unanswerable = p.Unanswerable
		log.LogAttrs(ctx, slog.LevelError, "application unanswerable", slog.String("cause", p.Unanswerable))
	}
	return o
}

// countNewCopies lists the namespace's pods once a round and counts each member's
// new copy among them by its Deployment's selector. No label narrows the
// list: a pod of the new copy without the part-of label would go uncounted,
// and an undo must not run while a new copy has a pod.
func (t *Tender) countNewCopies(ctx context.Context, s *snapshot, v *ApplicationView) error {
	pods, listed := s.pods[v.Namespace]
	if !listed {
		var err error
		if pods, err = t.cluster.Pods(ctx, v.Namespace, labels.Everything()); err != nil {
			return fmt.Errorf("list the pods of %s/%s: %w", v.Namespace, v.Application, err)
		}
		s.pods[v.Namespace] = pods
	}
	v.NewCopyPods = map[string]int{}
	for _, m := range v.Members {
		if m.Target == nil {
			return fmt.Errorf("member %s has no Deployment to find its new copy by", m.Process)
		}
		v.NewCopyPods[m.Process] = len(selectPods(pods, m.Target.Selector))
	}
	return nil
}
