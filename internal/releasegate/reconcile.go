package releasegate

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/sharedread"
)

// RoundInterval is how often the gate reconciles every gated Application: Flagger
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

// Reconciler runs the rounds over every gated Application and keeps what the
// last one found for /metrics.
type Reconciler struct {
	cluster   ReconcileCluster
	namespace string
	warmer    Warmer
	logger    *slog.Logger
	now       func() time.Time

	mu   sync.Mutex
	last RoundResult
	// releasesRead answers /releases from one read for ReleasesMaxAge, so
	// callers asking often cost the API server one read per ReleasesMaxAge.
	releasesRead *sharedread.Cache[[]byte]
	// leading, when set, says whether this replica holds the Lease; a gate
	// without one is the only replica and always reconciles.
	leading func() bool

	warmups warmups
}

// NewReconciler builds the rounds: records in namespace, warmups through warmer.
func NewReconciler(cluster ReconcileCluster, namespace string, warmer Warmer, logger *slog.Logger, now func() time.Time) *Reconciler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	t := &Reconciler{cluster: cluster, namespace: namespace, warmer: warmer, logger: logger, now: now,
		warmups: warmups{running: map[warmKey]bool{}, done: map[warmKey]release.WarmupRecord{}, slots: make(chan struct{}, warmupsAtOnce)}}
	t.releasesRead = sharedread.New(t.readReleases, ReleasesMaxAge, releasesReadTimeout, now)
	return t
}

// OnWarmupDone has prompt called as each warmup ends, so the round that
// writes its verdict comes at once rather than on the next tick. It is set
// before the rounds run.
func (t *Reconciler) OnWarmupDone(prompt func()) { t.warmups.finished = prompt }

// LeadWith has /metrics say, through leading, whether this replica runs the
// rounds; it is set before the rounds run.
func (t *Reconciler) LeadWith(leading func() bool) { t.leading = leading }

func (t *Reconciler) leads() bool { return t.leading == nil || t.leading() }

// Forget drops what the last round found, as a replica's term ends: the
// holds it reported are the new leader's to report.
func (t *Reconciler) Forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = RoundResult{}
}

// Reconciled is what one round did and found for one Application.
type Reconciled struct {
	Namespace, Application string
	Held                   *Held
	NotUndone              *NotUndone
	Unanswerable           string
	Started, Undone        string
}

// RoundResult is what a round found; Reconciled is zero before the first round
// that finished.
type RoundResult struct {
	Reconciled   time.Time
	Applications []Reconciled
}

// Last is what the last finished round found.
func (t *Reconciler) Last() RoundResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Round reconciles every gated Application once, in two steps: it decides every
// Application, reading what the plans ask for (plan), and then acts on each
// plan, which only writes, starts Jobs and logs (act). An Application the
// round cannot finish is reported unanswerable and the round goes on; only a
// list every Application needs (inputs, records, Canaries, Jobs) fails the
// round.
func (t *Reconciler) Round(ctx context.Context) error {
	s, err := read(ctx, t.cluster, t.namespace, true)
	if err != nil {
		return err
	}
	apps := t.plan(ctx, s, t.now())
	// A warmup runs beside the rounds; the plan of a revision whose warmup
	// has ended takes its verdict onto the record.
	out := make([]Reconciled, len(apps))
	wanted := map[warmKey]bool{}
	undecided := map[string]bool{}
	for i := range apps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v, p := &apps[i].view, &apps[i].plan
		app := v.Namespace + "/" + v.Application
		if r := v.Record; r != nil && r.ServingUnwarmed() {
			// What serves is not warmed on record: a verdict for it is kept
			// while another revision is pinned, for when the pin comes back.
			wanted[warmKey{app, r.Serving}] = true
		}
		var taken *warmKey
		if w := p.Warm; w != nil {
			key := warmKey{app, w.Revision}
			wanted[key] = true
			if verdict, ok := t.warmupOf(ctx, key, w); ok {
				p.Record.Warmup = &verdict
				p.Write = true
				taken = &key
			}
		}
		out[i] = t.act(ctx, s, *v, *p)
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
	t.last = RoundResult{Reconciled: t.now(), Applications: out}
	t.mu.Unlock()
	return nil
}

// planned is one Application as the round decided it: the view it read and
// the plan decided from it, once the plan asked for nothing more.
type planned struct {
	view ApplicationView
	plan Plan
}

// plan decides every Application from the round's lists, then reads what
// the plans ask for and decides again those that asked, until no plan asks
// for more: first the Deployments, listed once for every Application that
// asked (one whose revision may have come to serve, or whose undo compares
// the copies), then the pods of the namespaces where an undo counts new
// copies. Nothing is written or started until every plan is decided.
func (t *Reconciler) plan(ctx context.Context, s *snapshot, now time.Time) []planned {
	apps := make([]planned, len(s.inputs))
	for i, o := range s.inputs {
		v := s.view(t.namespace, o, now)
		v.DeploymentsUnread = true
		apps[i] = planned{view: v, plan: Reconcile(v)}
	}
	for {
		var copies, newCopies []int
		for i, a := range apps {
			wantsCopies, wantsNewCopies := a.wants()
			switch {
			case wantsCopies:
				copies = append(copies, i)
			case wantsNewCopies:
				newCopies = append(newCopies, i)
			}
		}
		switch {
		case len(copies) > 0:
			t.decideWithCopies(ctx, s, apps, copies, now)
		case len(newCopies) > 0:
			t.decideWithNewCopies(ctx, s, apps, newCopies)
		default:
			return apps
		}
	}
}

// wants is what a plan asks the round to read before it decides again:
// nothing the view already holds, and nothing once the round could not
// decide, so each Application asks for each read once at most.
func (a planned) wants() (copies, newCopies bool) {
	if a.plan.Unanswerable != "" {
		return false, false
	}
	return a.plan.ReadDeployments && a.view.DeploymentsUnread, a.plan.ReadNewCopies && a.view.NewCopyPods == nil
}

// decideWithCopies lists the Deployments (and, for a revision that may have
// come to serve, its namespace's ConfigMaps) and decides again for the
// Applications at idx, whose plans asked for them.
func (t *Reconciler) decideWithCopies(ctx context.Context, s *snapshot, apps []planned, idx []int, now time.Time) {
	if err := s.readDeployments(ctx, t.cluster); err != nil {
		// Only the Applications that needed them go unanswered, and what
		// was decided without them (a hold, a migration left applied) is
		// still reported; nothing is written or started.
		for _, i := range idx {
			p := apps[i].plan
			u := UnanswerablePlan(apps[i].view, fmt.Sprintf("list the Deployments: %v", err))
			u.Held = p.Held
			if p.NotUndone != nil {
				u.NotUndone = p.NotUndone
			}
			apps[i].plan = u
		}
		return
	}
	// A release that changes a ConfigMap alone leaves the pod template
	// as it was: a revision that may have come to serve has its copies
	// compared with the ConfigMaps they take their environment from
	// too, as the barrier compares them.
	var namespaces []string
	for _, i := range idx {
		if ns := s.inputs[i].Namespace; apps[i].plan.ReadConfigs && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	unread := s.readConfigs(ctx, t.cluster, namespaces)
	for _, i := range idx {
		o := s.inputs[i]
		if err := unread[o.Namespace]; err != nil && apps[i].plan.ReadConfigs {
			apps[i].plan = UnanswerablePlan(apps[i].view, err.Error())
			continue
		}
		v := s.view(t.namespace, o, now)
		apps[i] = planned{view: v, plan: Reconcile(v)}
	}
}

// decideWithNewCopies lists the pods of each namespace where an undo looks
// for new copies, once, and decides again for the Applications at idx with
// their members' new copies counted. An Application whose copies cannot be
// counted keeps its plan, unanswerable: what it learnt is still recorded.
func (t *Reconciler) decideWithNewCopies(ctx context.Context, s *snapshot, apps []planned, idx []int) {
	var namespaces []string
	for _, i := range idx {
		if ns := apps[i].view.Namespace; !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	unread := s.readPods(ctx, t.cluster, namespaces)
	for _, i := range idx {
		v := apps[i].view
		err := unread[v.Namespace]
		if err != nil {
			err = fmt.Errorf("list the pods of %s/%s: %w", v.Namespace, v.Application, err)
		} else {
			err = s.countNewCopies(&v)
		}
		if err != nil {
			apps[i].plan.Unanswerable = err.Error()
			continue
		}
		apps[i] = planned{view: v, plan: Reconcile(v)}
	}
}

// act carries a decided plan out and reads nothing: the record first, so
// what the gate starts is on record before it starts, then the Job, then the
// log lines.
func (t *Reconciler) act(ctx context.Context, s *snapshot, v ApplicationView, p Plan) Reconciled {
	o := Reconciled{Namespace: v.Namespace, Application: v.Application}
	log := t.logger.With(slog.String("namespace", v.Namespace), slog.String("application", v.Application))
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
