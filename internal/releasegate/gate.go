// Package releasegate answers Flagger's webhooks for every gated Application
// from the live cluster: may a member's new copy start, does it pass an
// analysis iteration, may it be promoted (the barrier), and must it be rolled
// back. It reads what it needs when it is asked, and fails closed.
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

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// AnswerTimeout bounds the cluster reads and own requests of one answer, well
// inside Flagger's default webhook timeout of 10 s, so a slow API server or
// copy yields an answer Flagger reads rather than a timeout it cannot.
const AnswerTimeout = 5 * time.Second

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
	primarySuffix     = "-primary"
)

// Gate answers Flagger's webhooks. It holds the cluster reader and the notes
// of the revision each member last asked at.
type Gate struct {
	cluster         Cluster
	flagger         FlaggerIdentity
	flaggerSelector labels.Selector
	logger          *slog.Logger
	notes           notes
	reached         atomic.Bool
	prober          Prober
}

// New builds a gate reading cluster, answering the pods flagger names.
func New(cluster Cluster, flagger FlaggerIdentity, logger *slog.Logger) (*Gate, error) {
	sel, err := flagger.Validate()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{
		cluster: cluster, flagger: flagger, flaggerSelector: sel, logger: logger,
		notes:  notes{asked: map[memberKey]string{}},
		prober: probe.New(),
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
	mux.HandleFunc("POST /may-start", g.handle(WebhookMayStart, g.mayStart))
	mux.HandleFunc("POST /checks", g.handle(WebhookChecks, g.checks))
	mux.HandleFunc("POST /may-promote", g.handle(WebhookMayPromote, g.mayPromote))
	mux.HandleFunc("POST /rollback", g.handle(WebhookRollback, g.rollback))
}

// Ready is ready once the gate has reached the API server.
func (g *Gate) Ready(ctx context.Context) error {
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
	q   Question
	in  *Inputs
	own Canary
}

// decision is one webhook's own part. It is handed the question as soon as the
// payload reads, starts the reads that need nothing but the question, and
// returns the step that decides once the common reads identified the member.
// Reads of one answer thus run side by side, not one after another.
type decision func(ctx context.Context, q Question) func(a asked) (Answer, error)

// handle runs the checks every webhook shares, in the order that reveals
// least: the caller before the body, the body before the cluster.
func (g *Gate) handle(webhook string, decide decision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), AnswerTimeout)
		defer cancel()
		log := g.logger.With(slog.String("webhook", webhook))

		if ok, err := g.fromFlagger(ctx, r); err != nil {
			g.cannot(ctx, w, log, fmt.Errorf("read Flagger's pods: %w", err))
			return
		} else if !ok {
			log.LogAttrs(ctx, slog.LevelWarn, "caller refused", slog.String("remote", r.RemoteAddr))
			server.Answer(w, http.StatusForbidden, replyNotFlagger)
			return
		}

		q, err := DecodeQuestion(r.Body)
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
		question, refusal, ok, err := g.identify(ctx, q)
		answer := refusal
		if err == nil && ok {
			g.notes.note(q)
			answer, err = finish(question)
		}
		if err != nil {
			g.cannot(ctx, w, log, err)
			return
		}
		g.reply(ctx, w, log, answer)
	}
}

// identify makes the reads every webhook shares: the inputs and the asking
// member's Canary. ok is false when the question is refused before the
// webhook's own decision, with refusal saying why.
func (g *Gate) identify(ctx context.Context, q Question) (a asked, refusal Answer, ok bool, err error) {
	// The Canary is read beside the inputs; for a process that turns out no
	// member the read is wasted, which costs less than waiting for it.
	own := async(func() (Canary, error) { return g.cluster.Canary(ctx, q.Namespace, q.Process) })
	cm, err := g.cluster.ConfigMap(ctx, q.Namespace, InputsConfigMap(q.Application))
	if err != nil {
		return asked{}, Answer{}, false, fmt.Errorf("read the inputs %s/%s: %w", q.Namespace, InputsConfigMap(q.Application), err)
	}
	in, err := CheckInputs(q.Application, cm)
	if err != nil {
		return asked{}, Answer{}, false, err
	}
	if _, member := in.Member(q.Process); !member {
		refusal, _ = Identify(q, in, Canary{}, false)
		return asked{}, refusal, false, nil
	}
	c, err := own.get()
	found := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return asked{}, Answer{}, false, fmt.Errorf("read Canary %s/%s: %w", q.Namespace, q.Process, err)
	}
	if refusal, ok = Identify(q, in, c, found); !ok {
		return asked{}, refusal, false, nil
	}
	return asked{q: q, in: in, own: c}, Answer{}, true, nil
}

// fromFlagger decides by the connection's source address alone: Flagger
// sends no credential, and forwarding headers are whatever the caller wrote.
func (g *Gate) fromFlagger(ctx context.Context, r *http.Request) (bool, error) {
	addrPort, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false, nil //nolint:nilerr // an address that does not parse is no pod's
	}
	pods, err := g.cluster.Pods(ctx, g.flagger.Namespace, g.flaggerSelector)
	if err != nil {
		return false, err
	}
	return IsFlagger(addrPort.Addr(), pods, g.flagger.ServiceAccount), nil
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

func (g *Gate) mayStart(ctx context.Context, q Question) func(asked) (Answer, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelPartOf: q.Application, LabelManagedBy: ManagedBy})
	jobs := async(func() ([]Job, error) { return g.cluster.Jobs(ctx, q.Namespace, sel) })
	return func(a asked) (Answer, error) {
		js, err := jobs.get()
		if err != nil {
			return Answer{}, fmt.Errorf("list the Jobs of %s/%s: %w", q.Namespace, q.Application, err)
		}
		return MayStart(a.q, a.in, js), nil
	}
}

// newCopy reads the member's Deployment and lists the pods its selector matches.
func (g *Gate) newCopy(ctx context.Context, q Question) *future[[]Pod] {
	return async(func() ([]Pod, error) {
		target, err := g.cluster.Deployment(ctx, q.Namespace, q.Process)
		if err != nil {
			return nil, fmt.Errorf("read the new copy's Deployment %s/%s: %w", q.Namespace, q.Process, err)
		}
		pods, err := g.cluster.Pods(ctx, q.Namespace, target.Selector)
		if err != nil {
			return nil, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Process, err)
		}
		return pods, nil
	})
}

func (g *Gate) checks(ctx context.Context, q Question) func(asked) (Answer, error) {
	pods := g.newCopy(ctx, q)
	return func(a asked) (Answer, error) {
		ps, err := pods.get()
		if err != nil {
			return Answer{}, err
		}
		return g.checkOwnTraffic(ctx, a, ps)
	}
}

// members reads every other member's Canary side by side, the asking
// member's being already read.
func (g *Gate) members(ctx context.Context, a asked) ([]MemberState, error) {
	canaries := make([]*future[Canary], len(a.in.Members))
	for i, m := range a.in.Members {
		if m.Process != a.q.Process {
			canaries[i] = async(func() (Canary, error) { return g.cluster.Canary(ctx, a.q.Namespace, m.Process) })
		}
	}
	out := make([]MemberState, 0, len(a.in.Members))
	for i, m := range a.in.Members {
		s := MemberState{Process: m.Process, Asked: g.notes.lastAsked(a.q, m.Process)}
		if canaries[i] == nil {
			s.Canary, s.HasCanary = a.own, true
		} else {
			c, err := canaries[i].get()
			switch {
			case err == nil:
				s.Canary, s.HasCanary = c, true
			case !errors.Is(err, ErrNotFound):
				return nil, fmt.Errorf("read Canary %s/%s: %w", a.q.Namespace, m.Process, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// deployment reads a Deployment that may not be there: nil when it is not.
func (g *Gate) deployment(ctx context.Context, namespace, name string) *future[*Deployment] {
	return async(func() (*Deployment, error) {
		d, err := g.cluster.Deployment(ctx, namespace, name)
		switch {
		case err == nil:
			return &d, nil
		case errors.Is(err, ErrNotFound):
			return nil, nil
		}
		return nil, fmt.Errorf("read Deployment %s/%s: %w", namespace, name, err)
	})
}

func (g *Gate) mayPromote(ctx context.Context, _ Question) func(asked) (Answer, error) {
	return func(a asked) (Answer, error) {
		members, err := g.members(ctx, a)
		if err != nil {
			return Answer{}, err
		}
		// Only a member that may have not changed needs its copies compared;
		// the rest cost no further read. Those reads run side by side.
		copies := make([][2]*future[*Deployment], len(members))
		for i, m := range members {
			if m.Process == a.q.Process || !m.HasCanary || PassedOnRecord(a.q, m) {
				continue
			}
			if _, ok := memberOfRelease(a.q, m); !ok {
				continue
			}
			if m.Canary.Phase != PhaseInitialized && m.Canary.Phase != PhaseSucceeded {
				continue
			}
			copies[i] = [2]*future[*Deployment]{
				g.deployment(ctx, a.q.Namespace, m.Process),
				g.deployment(ctx, a.q.Namespace, m.Process+primarySuffix),
			}
		}
		for i := range members {
			if copies[i][0] == nil {
				continue
			}
			if members[i].Target, err = copies[i][0].get(); err != nil {
				return Answer{}, err
			}
			if members[i].Primary, err = copies[i][1].get(); err != nil {
				return Answer{}, err
			}
		}
		return g.checkProtected(ctx, a, members, MayPromote(a.q, a.in, members))
	}
}

func (g *Gate) rollback(ctx context.Context, q Question) func(asked) (Answer, error) {
	target := async(func() (Deployment, error) { return g.cluster.Deployment(ctx, q.Namespace, q.Process) })
	// One list of the Application's pods serves every member: the render puts
	// part-of on every pod template, and each copy's own selector then picks
	// its pods out of the list.
	appPods := async(func() ([]Pod, error) {
		return g.cluster.Pods(ctx, q.Namespace, labels.SelectorFromSet(labels.Set{LabelPartOf: q.Application}))
	})
	return func(a asked) (Answer, error) {
		own := MemberState{Process: a.q.Process, Canary: a.own, HasCanary: true}
		if p := a.own.Phase; p != PhaseProgressing && p != PhaseWaitingPromotion {
			return Rollback(a.q, own, nil), nil
		}
		d, err := target.get()
		if err != nil {
			return Answer{}, fmt.Errorf("read the new copy's Deployment %s/%s: %w", q.Namespace, q.Process, err)
		}
		pods, err := appPods.get()
		if err != nil {
			return Answer{}, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Application, err)
		}
		own.Pods = selectPods(pods, d.Selector)
		ownCopy := ReadCopy(own.Pods)
		if ok, _ := RollbackEligible(own, ownCopy); !ok || ownCopy.MostRestarts >= RollbackRestarts {
			return Rollback(a.q, own, nil), nil
		}
		members, err := g.members(ctx, a)
		if err != nil {
			return Answer{}, err
		}
		targets := make([]*future[*Deployment], len(members))
		for i, m := range members {
			if _, ok := memberOfRelease(a.q, m); ok && m.Process != a.q.Process && m.Canary.Phase != PhaseFailed {
				targets[i] = g.deployment(ctx, a.q.Namespace, m.Process)
			}
		}
		others := make([]MemberState, 0, len(members))
		for i, m := range members {
			if m.Process == a.q.Process {
				continue
			}
			if targets[i] != nil {
				d, err := targets[i].get()
				if err != nil {
					return Answer{}, err
				}
				if d != nil {
					m.Pods = selectPods(pods, d.Selector)
				}
			}
			others = append(others, m)
		}
		return Rollback(a.q, own, others), nil
	}
}

func selectPods(pods []Pod, sel labels.Selector) []Pod {
	var out []Pod
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

// notes hold the revision each member last asked at. They only ever withhold:
// a member read as waiting counts only once it has asked at this revision, so
// a gate that restarted with no notes reopens the barrier as members ask
// again, which Flagger does every tick. One entry per member that asked,
// bounded by the Canaries in the cluster.
type notes struct {
	mu    sync.Mutex
	asked map[memberKey]string
}

func (n *notes) note(q Question) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked[memberKey{q.Namespace, q.Application, q.Process}] = q.Revision
}

// lastAsked returns the revision process, a member of q's Application, last asked at.
func (n *notes) lastAsked(q Question, process string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.asked[memberKey{q.Namespace, q.Application, process}]
}
