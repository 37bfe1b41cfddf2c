package releasegate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// AnswerTimeout bounds the cluster reads and own requests of one answer, well
// inside Flagger's default webhook timeout of 10 s, so a slow API server or
// copy yields an answer Flagger reads rather than a timeout it cannot.
const AnswerTimeout = 5 * time.Second

// OwnTrafficBudget is how long one answer's own traffic may take in all; the
// rest of AnswerTimeout is for the cluster reads and the reply, so a copy
// that answers nothing still yields an answer with figures.
const OwnTrafficBudget = AnswerTimeout - time.Second

// The webhooks, named as the render names them.
const (
	WebhookMayStart   = "may-start"
	WebhookChecks     = "checks"
	WebhookMayPromote = "may-promote"
	WebhookRollback   = "rollback"
)

// Replies that carry no detail: who is refused, and a question the gate could
// not answer, whose cause is in the log alone.
const (
	replyNotFlagger   = "the release gate answers Flagger alone"
	replyUnanswerable = "the release gate cannot answer this question now; its log names the cause"
	replyBodyTooLarge = "the payload is too large"
)

// Gate answers Flagger's webhooks. It holds the cluster reader and the notes
// of the revision each member last asked at.
type Gate struct {
	cluster Cluster
	callers Callers
	config  Config
	logger  *slog.Logger
	notes   notes
	reached atomic.Bool
	prober  Prober
}

// Config is what a gate is set to: who may ask, where its records are, and
// the platform's own-traffic thresholds for a member whose inputs carry none.
type Config struct {
	Flagger FlaggerIdentity
	// GateNamespace holds the gate's release records; DefaultGateNamespace
	// when "".
	GateNamespace string
	// OwnTraffic are the thresholds the inputs' errorRate and latency
	// override; DefaultOwnTraffic when zero.
	OwnTraffic probe.Thresholds
}

// DefaultOwnTraffic are the platform's own-traffic thresholds where neither
// the inputs nor the gate's settings say otherwise: deploy-kit renders none.
var DefaultOwnTraffic = probe.Thresholds{ErrorRate: 0.01, Latency: time.Second}

// New builds a gate reading cluster, answering the pods cfg.Flagger names as
// callers (a watch of its namespace and selector) holds them.
func New(cluster Cluster, callers Callers, cfg Config, logger *slog.Logger) (*Gate, error) {
	if _, err := cfg.Flagger.Validate(); err != nil {
		return nil, err
	}
	if cfg.GateNamespace == "" {
		cfg.GateNamespace = DefaultGateNamespace
	}
	if err := CheckGateNamespace(cfg.GateNamespace); err != nil {
		return nil, err
	}
	if cfg.OwnTraffic == (probe.Thresholds{}) {
		cfg.OwnTraffic = DefaultOwnTraffic
	}
	if err := cfg.OwnTraffic.Validate(); err != nil {
		return nil, fmt.Errorf("own-traffic thresholds: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{
		cluster: cluster, callers: callers, config: cfg, logger: logger,
		notes:  notes{asked: map[memberKey]string{}},
		prober: probe.New(probe.WithBudget(OwnTrafficBudget)),
	}, nil
}

// Validate checks the identity names Flagger's pods precisely and returns its
// selector: a selector that matches every pod would let any pod in
// Flagger's namespace ask.
func (f FlaggerIdentity) Validate() (labels.Selector, error) {
	sel, err := labels.Parse(f.Selector)
	if err != nil {
		return nil, fmt.Errorf("FLAGGER_SELECTOR %q: %w", f.Selector, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("FLAGGER_SELECTOR %q selects every pod", f.Selector)
	}
	if f.Namespace == "" || f.ServiceAccount == "" {
		return nil, errors.New("FLAGGER_NAMESPACE and FLAGGER_SERVICE_ACCOUNT must name Flagger's pods")
	}
	return sel, nil
}

// Routes registers the four webhooks.
func (g *Gate) Routes(mux *http.ServeMux) {
	// Flagger asks confirm-rollout while the Canary still reads as the
	// release before (Succeeded, say), so a /may-start is no sign the member
	// entered this one; the other three are asked only while it is analysed
	// or waits at the barrier.
	mux.HandleFunc("POST /may-start", g.handle(WebhookMayStart, routeOptions{configMaps: true}, g.mayStart))
	mux.HandleFunc("POST /checks", g.handle(WebhookChecks, routeOptions{noted: true, configMaps: true}, g.checks))
	mux.HandleFunc("POST /may-promote", g.handle(WebhookMayPromote, routeOptions{noted: true, configMaps: true}, g.mayPromote))
	mux.HandleFunc("POST /rollback", g.handle(WebhookRollback, routeOptions{noted: true}, g.rollback))
}

// Ready is ready once the gate has reached the API server and knows
// Flagger's pods. A watch that cannot list them again leaves it ready, as a
// later outage of the API server does: each question is then answered 503.
func (g *Gate) Ready(ctx context.Context) error {
	if _, err := g.callers.FlaggerPods(); err != nil && !errors.Is(err, ErrCallersStale) {
		return fmt.Errorf("the pods of Flagger are not known yet: %w", err)
	}
	if g.reached.Load() {
		return nil
	}
	if err := g.cluster.Reachable(ctx); err != nil {
		return fmt.Errorf("the API server has not answered yet: %w", err)
	}
	g.reached.Store(true)
	return nil
}

// asked is a question that passed the common checks: from Flagger, well
// formed, about a member of gated Application at the revision its Canary
// carries.
type asked struct {
	q   release.Question
	in  *release.Inputs
	own release.Canary
	// canaries are the Canaries of the Application's namespace.
	canaries []release.Canary
	// configMaps are the namespace's ConfigMaps, where the webhook lists them.
	configMaps []release.ConfigMap
}

// decision is one webhook's own part. It is handed the question as soon as the
// payload reads, starts the reads that need nothing but the question, and
// returns the step that decides once the common reads identified the member.
// Reads of one answer thus run side by side, not one after another.
type decision func(ctx context.Context, q release.Question) func(a asked) (Answer, error)

// routeOptions say what a webhook's question shows and needs beyond the
// reads every webhook shares.
type routeOptions struct {
	// noted: the question shows the member is in the release it asks about.
	noted bool
	// configMaps: the answer compares ConfigMaps, so the namespace's are
	// listed and the inputs picked out of that list, one read of the kind.
	configMaps bool
}

// handle runs the checks every webhook shares, in the order that reveals
// least: the caller before the body, the body before the cluster.
func (g *Gate) handle(webhook string, opts routeOptions, decide decision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), AnswerTimeout)
		defer cancel()
		log := g.logger.With(slog.String("webhook", webhook))

		if ok, err := g.fromFlagger(r); err != nil {
			g.cannot(ctx, w, log, fmt.Errorf("know Flagger's pods: %w", err))
			return
		} else if !ok {
			log.LogAttrs(ctx, slog.LevelWarn, "caller refused", slog.String("remote", r.RemoteAddr))
			server.Answer(w, http.StatusForbidden, replyNotFlagger)
			return
		}

		q, err := release.DecodeQuestion(r.Body)
		if err != nil {
			if server.TooLarge(err) {
				server.Answer(w, http.StatusRequestEntityTooLarge, replyBodyTooLarge)
				return
			}
			log.LogAttrs(ctx, slog.LevelWarn, "bad payload", slog.String("error", err.Error()))
			server.Answer(w, http.StatusBadRequest, err.Error())
			return
		}
		log = log.With(slog.String("namespace", q.Namespace), slog.String("application", q.Application),
			slog.String("process", q.Process), slog.String("revision", q.Revision))

		finish := decide(ctx, q)
		question, refusal, ok, err := g.identify(ctx, q, opts.configMaps)
		answer := refusal
		if err == nil && ok {
			if opts.noted {
				g.notes.note(q)
			}
			answer, err = finish(question)
		}
		if err != nil {
			g.cannot(ctx, w, log, err)
			return
		}
		g.reply(ctx, w, log, answer)
	}
}

// identify makes the reads every webhook shares: the inputs and the
// Canaries of the Application's namespace, side by side. ok is false when the
// question is refused before the webhook's own decision, with refusal saying
// why.
func (g *Gate) identify(ctx context.Context, q release.Question, listConfigMaps bool) (a asked, refusal Answer, ok bool, err error) {
	canaries := async(func() ([]release.Canary, error) { return g.cluster.CanariesIn(ctx, q.Namespace) })
	var cm release.ConfigMap
	var configMaps []release.ConfigMap
	if listConfigMaps {
		configMaps, err = g.cluster.ConfigMapsIn(ctx, q.Namespace)
		if err == nil {
			cm, err = configMapNamed(configMaps, release.InputsConfigMap(q.Application))
		}
	} else {
		cm, err = g.cluster.ConfigMap(ctx, q.Namespace, release.InputsConfigMap(q.Application))
	}
	if err != nil {
		return asked{}, Answer{}, false, fmt.Errorf("read the inputs %s/%s: %w", q.Namespace, release.InputsConfigMap(q.Application), err)
	}
	in, err := release.CheckInputs(q.Application, cm)
	if err != nil {
		return asked{}, Answer{}, false, err
	}
	if _, member := in.Member(q.Process); !member {
		refusal, _ = Identify(q, in, release.Canary{}, false)
		return asked{}, refusal, false, nil
	}
	cs, err := canaries.get()
	if err != nil {
		return asked{}, Answer{}, false, fmt.Errorf("list the Canaries of %s: %w", q.Namespace, err)
	}
	c, found := canaryNamed(cs, q.Process)
	if refusal, ok = Identify(q, in, c, found); !ok {
		return asked{}, refusal, false, nil
	}
	return asked{q: q, in: in, own: c, canaries: cs, configMaps: configMaps}, Answer{}, true, nil
}

// configMapNamed picks name out of a list; ErrNotFound when it is not there.
func configMapNamed(cms []release.ConfigMap, name string) (release.ConfigMap, error) {
	for _, cm := range cms {
		if cm.Name == name {
			return cm, nil
		}
	}
	return release.ConfigMap{}, fmt.Errorf("ConfigMap %s: %w", name, release.ErrNotFound)
}

// fromFlagger decides by the connection's source address alone: Flagger
// sends no credential, and forwarding headers are whatever the caller wrote.
func (g *Gate) fromFlagger(r *http.Request) (bool, error) {
	addrPort, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false, nil //nolint:nilerr // an address that does not parse is no pod's
	}
	pods, err := g.callers.FlaggerPods()
	if err != nil {
		return false, err
	}
	return IsFlagger(addrPort.Addr(), pods, g.config.Flagger.ServiceAccount), nil
}

func (g *Gate) reply(ctx context.Context, w http.ResponseWriter, log *slog.Logger, a Answer) {
	switch a.Outcome {
	case Yes:
		log.LogAttrs(ctx, slog.LevelInfo, "yes", slog.String("reason", a.Reason))
		server.Answer(w, http.StatusOK, a.Reason)
	case NotYet:
		log.LogAttrs(ctx, slog.LevelInfo, "not yet", slog.String("reason", a.Reason))
		server.Answer(w, http.StatusConflict, a.Reason)
	default:
		g.cannot(ctx, w, log, errors.New(a.Reason))
	}
}

// cannot answers 503 and logs the cause; the caller learns only that the gate
// could not answer.
func (g *Gate) cannot(ctx context.Context, w http.ResponseWriter, log *slog.Logger, cause error) {
	log.LogAttrs(ctx, slog.LevelError, "cannot answer", slog.String("cause", cause.Error()))
	server.Answer(w, http.StatusServiceUnavailable, replyUnanswerable)
}

// copies are the reads that find members' copies: the Deployments of the
// namespace and a list of pods that holds the copies' pods, side by side.
// Each copy's own selector then picks its pods out of that list.
type copies struct {
	deployments *future[[]release.Deployment]
	pods        *future[[]release.Pod]
	// listedBy is the labels the pods were listed by.
	listedBy labels.Set
}

// readCopies lists the namespace's Deployments and the pods carrying
// listedBy.
func (g *Gate) readCopies(ctx context.Context, q release.Question, listedBy labels.Set) copies {
	return copies{
		deployments: g.readDeployments(ctx, q),
		pods: async(func() ([]release.Pod, error) {
			pods, err := g.cluster.Pods(ctx, q.Namespace, labels.SelectorFromSet(listedBy))
			if err != nil {
				return nil, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Application, err)
			}
			return pods, nil
		}),
		listedBy: listedBy,
	}
}

// byInstance lists the asking member's pods by the instance label, which the
// render puts in every selector and on every pod, and which no one can take
// off a pod without orphaning it: a list by it holds every pod the new copy's
// selector matches.
func byInstance(q release.Question) labels.Set { return labels.Set{release.LabelInstance: q.Process} }

// byApplication lists the pods of every member at once, by the part-of label
// the render puts on every pod template. part-of is no selector, so a pod
// relabelled by hand can be missed; only /rollback reads this way, where a
// pod missed can only keep a release where it is.
func byApplication(q release.Question) labels.Set {
	return labels.Set{release.LabelPartOf: q.Application}
}

func (g *Gate) readDeployments(ctx context.Context, q release.Question) *future[[]release.Deployment] {
	return async(func() ([]release.Deployment, error) {
		ds, err := g.cluster.DeploymentsIn(ctx, q.Namespace)
		if err != nil {
			return nil, fmt.Errorf("list the Deployments of %s: %w", q.Namespace, err)
		}
		return ds, nil
	})
}

// newCopy is the asking member's new copy, its Deployment <process>, and
// the pods its selector matches among those listed.
func (c copies) newCopy(q release.Question) (ds []release.Deployment, all, own []release.Pod, target *release.Deployment, err error) {
	if ds, err = c.deployments.get(); err != nil {
		return nil, nil, nil, nil, err
	}
	if all, err = c.pods.get(); err != nil {
		return nil, nil, nil, nil, err
	}
	if target = deploymentNamed(ds, q.Process); target == nil {
		return nil, nil, nil, nil, fmt.Errorf("read the new copy's Deployment %s/%s: %w", q.Namespace, q.Process, release.ErrNotFound)
	}
	return ds, all, selectPods(all, target.Selector), target, nil
}

// newCopyPods is every pod the asking member's new copy's selector matches.
// Where the selector does not itself require the labels the pods were listed
// by (a Deployment deploy-kit did not render), the list may lack some of
// them, and they are listed again by the selector.
func (g *Gate) newCopyPods(ctx context.Context, q release.Question, c copies) ([]release.Pod, error) {
	_, _, own, target, err := c.newCopy(q)
	if err != nil || requires(target.Selector, c.listedBy) {
		return own, err
	}
	own, err = g.cluster.Pods(ctx, q.Namespace, target.Selector)
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Process, err)
	}
	return own, nil
}

// requires reports whether every pod sel matches carries set.
func requires(sel labels.Selector, set labels.Set) bool {
	for k, v := range set {
		if got, ok := sel.RequiresExactMatch(k); !ok || got != v {
			return false
		}
	}
	return true
}

func (g *Gate) checks(ctx context.Context, q release.Question) func(asked) (Answer, error) {
	reads := g.readCopies(ctx, q, byInstance(q))
	steps := g.readSteps(ctx, q, reads.deployments)
	return func(a asked) (Answer, error) {
		if started, err := steps.answer(a); err != nil || started.Outcome != Yes {
			return started, err
		}
		pods, err := g.newCopyPods(ctx, q, reads)
		if err != nil {
			return Answer{}, err
		}
		return g.checkOwnTraffic(ctx, a, pods)
	}
}

// members is every member's state as the namespace's Canaries and the notes
// hold it.
func (g *Gate) members(a asked) []release.MemberState {
	out := make([]release.MemberState, 0, len(a.in.Members))
	for _, m := range a.in.Members {
		s := release.MemberState{Process: m.Process, Asked: g.notes.lastAsked(a.q, m.Process)}
		s.Canary, s.HasCanary = canaryNamed(a.canaries, m.Process)
		out = append(out, s)
	}
	return out
}

func canaryNamed(cs []release.Canary, name string) (release.Canary, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return release.Canary{}, false
}

// deploymentNamed is the Deployment name among ds; nil when it is not there.
func deploymentNamed(ds []release.Deployment, name string) *release.Deployment {
	for i := range ds {
		if ds[i].Name == name {
			return &ds[i]
		}
	}
	return nil
}

// mayPromote lists the Deployments beside the common reads: the asking
// member's template is held to may-start's rule, and a member that may not
// have changed has its copies compared.
func (g *Gate) mayPromote(ctx context.Context, q release.Question) func(asked) (Answer, error) {
	deployments := g.readDeployments(ctx, q)
	steps := g.readSteps(ctx, q, deployments)
	return func(a asked) (Answer, error) {
		if started, err := steps.answer(a); err != nil || started.Outcome != Yes {
			return started, err
		}
		members := g.members(a)
		configs := release.ConfigsByName(a.configMaps)
		for i, m := range members {
			if m.Process == a.q.Process || !m.HasCanary || PassedOnRecord(a.q, m) {
				continue
			}
			if _, ok := memberOfRelease(a.q, m); !ok {
				continue
			}
			if m.Canary.Phase != release.PhaseInitialized && m.Canary.Phase != release.PhaseSucceeded {
				continue
			}
			ds, err := deployments.get()
			if err != nil {
				return Answer{}, err
			}
			members[i].Target = deploymentNamed(ds, m.Process)
			members[i].Primary = deploymentNamed(ds, m.Process+release.PrimarySuffix)
			if t, p := members[i].Target, members[i].Primary; t != nil && p != nil {
				members[i].MovedConfigs = release.MovedConfigs(*t, *p, configs)
			}
		}
		return g.checkProtected(ctx, a, members, MayPromote(a.q, a.in, members))
	}
}

func (g *Gate) rollback(ctx context.Context, q release.Question) func(asked) (Answer, error) {
	reads := g.readCopies(ctx, q, byApplication(q))
	return func(a asked) (Answer, error) {
		own := release.MemberState{Process: a.q.Process, Canary: a.own, HasCanary: true}
		if p := a.own.Phase; p != release.PhaseProgressing && p != release.PhaseWaitingPromotion {
			return Rollback(a.q, own, nil), nil
		}
		ds, pods, ownPods, _, err := reads.newCopy(q)
		if err != nil {
			return Answer{}, err
		}
		own.Pods = ownPods
		ownCopy := ReadCopy(own.Pods)
		if ok, _ := RollbackEligible(own, ownCopy); !ok || ownCopy.MostRestarts >= RollbackRestarts {
			return Rollback(a.q, own, nil), nil
		}
		others := make([]release.MemberState, 0, len(a.in.Members))
		for _, m := range g.members(a) {
			if m.Process == a.q.Process {
				continue
			}
			if _, ok := memberOfRelease(a.q, m); ok && m.Canary.Phase != release.PhaseFailed {
				if d := deploymentNamed(ds, m.Process); d != nil {
					m.Pods = selectPods(pods, d.Selector)
				}
			}
			others = append(others, m)
		}
		return Rollback(a.q, own, others), nil
	}
}

func selectPods(pods []release.Pod, sel labels.Selector) []release.Pod {
	var out []release.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// future is a read running beside others; get waits for it.
type future[T any] struct {
	done chan struct{}
	v    T
	err  error
}

func async[T any](read func() (T, error)) *future[T] {
	f := &future[T]{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.v, f.err = read()
	}()
	return f
}

func (f *future[T]) get() (T, error) {
	<-f.done
	return f.v, f.err
}

// memberKey names a member across Applications and namespaces.
type memberKey struct{ namespace, application, process string }

// notes hold the revision each member last asked at, once in the release
// (any webhook but /may-start). They only ever withhold:
// a member read as waiting counts only once it has asked at this revision, so
// a gate that restarted with no notes reopens the barrier as members ask
// again, which Flagger does every tick. One entry per member that asked,
// bounded by the Canaries in the cluster.
type notes struct {
	mu    sync.Mutex
	asked map[memberKey]string
}

func (n *notes) note(q release.Question) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked[memberKey{q.Namespace, q.Application, q.Process}] = q.Revision
}

// lastAsked returns the revision process, a member of q's Application, last asked at.
func (n *notes) lastAsked(q release.Question, process string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.asked[memberKey{q.Namespace, q.Application, process}]
}
