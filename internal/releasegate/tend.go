package releasegate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
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

// warmupsAtOnce bounds the warmups that run side by side.
const warmupsAtOnce = 4

// ErrConflict is a write refused because the object changed since it was
// read: a Job put in place of the one read, or a record written meanwhile.
var ErrConflict = errors.New("changed since read")

// InputsObject is one inputs ConfigMap found by the round's list.
type InputsObject struct {
	Namespace   string
	Application string
	release.ConfigMap
}

// StoredRecord is a record ConfigMap in the gate's namespace.
type StoredRecord struct {
	Name            string
	ResourceVersion string
	Data            map[string]string
}

// CanaryState is a Canary found by a cluster-wide list.
type CanaryState struct {
	Namespace string
	release.Canary
	Transitioned time.Time
}

// NamespacedDeployment is a Deployment found by a cluster-wide list.
type NamespacedDeployment struct {
	Namespace string
	release.Deployment
}

// TendCluster is what a round reads and writes. Each read lists one kind
// across the cluster, so a round costs a few lists, not a read per
// Application; the writes are the records and the suspend field of the Jobs
// the gate starts.
type TendCluster interface {
	// GatedInputs lists every ConfigMap named <application>-release-gate
	// labelled as the render labels it, in every namespace.
	GatedInputs(ctx context.Context) ([]InputsObject, error)
	// Records lists the ConfigMaps of the gate's namespace.
	Records(ctx context.Context, namespace string) ([]StoredRecord, error)
	// Canaries lists the Canaries labelled part of an Application.
	Canaries(ctx context.Context) ([]CanaryState, error)
	// Deployments lists every Deployment, primaries included.
	Deployments(ctx context.Context) ([]NamespacedDeployment, error)
	// ConfigMapsIn lists the ConfigMaps of namespace.
	ConfigMapsIn(ctx context.Context, namespace string) ([]release.ConfigMap, error)
	// MigrationJobs lists the Jobs the render wrote.
	MigrationJobs(ctx context.Context) ([]MigrationJob, error)
	// Pods lists the pods of namespace that selector matches.
	Pods(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error)
	// CreateRecord creates a record; ErrConflict when one is there.
	CreateRecord(ctx context.Context, namespace, name string, data map[string]string) error
	// UpdateRecord writes a record over the version read; ErrConflict when
	// it changed since.
	UpdateRecord(ctx context.Context, namespace, name, resourceVersion string, data map[string]string) error
	// StartJob unsuspends the Job read at j's version; ErrConflict when the
	// Job there is no longer that one.
	StartJob(ctx context.Context, j JobStart) error
}

// Warmer warms a served revision up; *probe.Warmer is one.
type Warmer interface {
	Warm(ctx context.Context, hosts, paths []string) (probe.Warmup, error)
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

// warmups run beside the rounds: one takes as long as its requests take (up
// to 10 s each), and no round waits for it. A round starts the warmup of a
// revision that serves and is not warmed; a later round writes its verdict.
type warmups struct {
	mu      sync.Mutex
	running map[warmKey]bool
	done    map[warmKey]release.WarmupRecord
	slots   chan struct{}
	wg      sync.WaitGroup
	// finished, when set, is called as each warmup ends, to bring the round
	// that writes its verdict forward.
	finished func()
}

// warmKey is one Application's warmup of one revision; app is
// namespace/application.
type warmKey struct{ app, revision string }

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

// snapshot is one round's lists, joined in memory by namespace and name.
type snapshot struct {
	inputs      []InputsObject
	records     map[string]StoredRecord
	canaries    map[[2]string]CanaryState
	deployments map[[2]string]release.Deployment
	// configs are the ConfigMaps of the namespaces whose Deployments a
	// round compares, by namespace and name.
	configs map[string]map[string]release.ConfigMap
	jobs    map[[2]string][]MigrationJob
	// pods are the pods of the namespaces an undo counted new copies in
	// this round, listed once per namespace.
	pods map[string][]release.Pod
}

// read lists what every round needs, the lists side by side; Deployments
// are listed later, only when needed.
func read(ctx context.Context, c TendCluster, namespace string, withJobs bool) (*snapshot, error) {
	inputs := async(func() ([]InputsObject, error) { return c.GatedInputs(ctx) })
	records := async(func() ([]StoredRecord, error) { return c.Records(ctx, namespace) })
	canaries := async(func() ([]CanaryState, error) { return c.Canaries(ctx) })
	jobs := async(func() ([]MigrationJob, error) {
		if !withJobs {
			return nil, nil
		}
		return c.MigrationJobs(ctx)
	})
	s := &snapshot{
		records: map[string]StoredRecord{}, canaries: map[[2]string]CanaryState{},
		deployments: map[[2]string]release.Deployment{}, configs: map[string]map[string]release.ConfigMap{}, pods: map[string][]release.Pod{},
		jobs: map[[2]string][]MigrationJob{},
	}
	var err error
	if s.inputs, err = inputs.get(); err != nil {
		return nil, fmt.Errorf("list the inputs ConfigMaps: %w", err)
	}
	rs, err := records.get()
	if err != nil {
		return nil, fmt.Errorf("list the records in %s: %w", namespace, err)
	}
	for _, r := range rs {
		s.records[r.Name] = r
	}
	cs, err := canaries.get()
	if err != nil {
		return nil, fmt.Errorf("list the Canaries: %w", err)
	}
	for _, c := range cs {
		s.canaries[[2]string{c.Namespace, c.Name}] = c
	}
	js, err := jobs.get()
	if err != nil {
		return nil, fmt.Errorf("list the Jobs: %w", err)
	}
	for _, j := range js {
		k := [2]string{j.Namespace, j.Application}
		s.jobs[k] = append(s.jobs[k], j)
	}
	slices.SortFunc(s.inputs, func(a, b InputsObject) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Application, b.Application))
	})
	return s, nil
}

// configListsAtOnce bounds the namespaces' ConfigMap lists a round makes side
// by side.
const configListsAtOnce = 8

// readConfigs lists the ConfigMaps of each namespace, a few side by side,
// into the snapshot, and returns the lists that failed.
func (s *snapshot) readConfigs(ctx context.Context, c TendCluster, namespaces []string) map[string]error {
	var mu sync.Mutex
	unread := map[string]error{}
	slots := make(chan struct{}, configListsAtOnce)
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			cms, err := c.ConfigMapsIn(ctx, ns)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unread[ns] = fmt.Errorf("list the ConfigMaps of %s: %w", ns, err)
				return
			}
			s.configs[ns] = release.ConfigsByName(cms)
		})
	}
	wg.Wait()
	return unread
}

// view joins what the snapshot holds of one Application.
func (s *snapshot) view(namespace string, o InputsObject, now time.Time) ApplicationView {
	v := ApplicationView{Namespace: o.Namespace, Application: o.Application, Now: now}
	v.Inputs, v.InputsErr = release.CheckInputs(o.Application, o.ConfigMap)
	if stored, ok := s.records[release.RecordConfigMap(o.Namespace, o.Application)]; ok {
		r, err := release.DecodeRecord(o.Namespace, o.Application, stored.Data)
		if err != nil {
			v.RecordErr = fmt.Errorf("%s/%s: %w", namespace, stored.Name, err)
		} else {
			v.Record = &r
		}
	}
	if v.Inputs == nil {
		return v
	}
	for _, m := range v.Inputs.Members {
		mv := MemberView{MemberState: release.MemberState{Process: m.Process}}
		if c, ok := s.canaries[[2]string{o.Namespace, m.Process}]; ok {
			mv.Canary, mv.HasCanary, mv.Transitioned = c.Canary, true, c.Transitioned
		}
		if d, ok := s.deployments[[2]string{o.Namespace, m.Process}]; ok {
			mv.Target = &d
		}
		if d, ok := s.deployments[[2]string{o.Namespace, m.Process + release.PrimarySuffix}]; ok {
			mv.Primary = &d
		}
		if configs, ok := s.configs[o.Namespace]; ok && mv.Target != nil && mv.Primary != nil {
			mv.MovedConfigs = release.MovedConfigs(*mv.Target, *mv.Primary, configs)
		}
		v.Members = append(v.Members, mv)
	}
	v.Jobs = s.jobs[[2]string{o.Namespace, o.Application}]
	return v
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

// warmupOf is the verdict of the warmup of key when it has ended, and
// otherwise starts it, unless it is running.
func (t *Tender) warmupOf(ctx context.Context, key warmKey, w *Warm) (release.WarmupRecord, bool) {
	ws := &t.warmups
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if verdict, ok := ws.done[key]; ok {
		// Kept until the record carries it: a write that fails takes it
		// again next round, rather than warming the revision twice.
		return verdict, true
	}
	if ws.running[key] {
		return release.WarmupRecord{}, false
	}
	ws.running[key] = true
	ws.wg.Go(func() {
		ws.slots <- struct{}{}
		verdict, ok := t.warm(ctx, w)
		<-ws.slots
		ws.mu.Lock()
		delete(ws.running, key)
		if ok {
			ws.done[key] = verdict
		}
		// One round brought forward for a batch of warmups, once the last
		// of them ends; the ticks write the verdicts that end before it.
		last := len(ws.running) == 0
		ws.mu.Unlock()
		if ok && last && ws.finished != nil {
			ws.finished()
		}
	})
	return release.WarmupRecord{}, false
}

// recorded drops a verdict the record now carries.
func (ws *warmups) recorded(key warmKey) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.done, key)
}

// forget drops the verdicts no round asks for any more (the Application
// moved on before its warmup ended), but not those of an Application the
// round could not decide for.
func (ws *warmups) forget(wanted map[warmKey]bool, undecided map[string]bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key := range ws.done {
		if !wanted[key] && !undecided[key.app] {
			delete(ws.done, key)
		}
	}
}

// warm requests the paths through each host, host after host, stopping at
// the first failure. ok is false when ctx ended first: the
// revision is warmed by a later round then.
func (t *Tender) warm(ctx context.Context, w *Warm) (release.WarmupRecord, bool) {
	if w.Err != nil {
		return WarmupVerdict(w.Revision, probe.Warmup{}, w.Err), true
	}
	var total probe.Warmup
	for _, target := range w.Targets {
		// Members sharing a host hand their paths together, which can come
		// to more than one call of the warmer takes: they go a call's worth
		// at a time.
		for paths := range slices.Chunk(target.Paths, probe.MaxPaths+1) {
			got, err := t.warmer.Warm(ctx, []string{target.Host}, paths)
			if ctx.Err() != nil {
				return release.WarmupRecord{}, false
			}
			total.Requests += got.Requests
			if err != nil || got.Failed() {
				return WarmupVerdict(w.Revision, got, err), true
			}
		}
	}
	return WarmupVerdict(w.Revision, total, nil), true
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

func (t *Tender) writeRecord(ctx context.Context, s *snapshot, v ApplicationView, p Plan) error {
	name := release.RecordConfigMap(v.Namespace, v.Application)
	data := release.EncodeRecord(p.Record)
	var err error
	if p.Create {
		err = t.cluster.CreateRecord(ctx, t.namespace, name, data)
	} else {
		err = t.cluster.UpdateRecord(ctx, t.namespace, name, s.records[name].ResourceVersion, data)
	}
	if err != nil {
		return fmt.Errorf("write record %s/%s: %w", t.namespace, name, err)
	}
	return nil
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
