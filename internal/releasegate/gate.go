package releasegate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
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
	sender  TrafficSender
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
	OwnTraffic owntraffic.Thresholds
}

// DefaultOwnTraffic are the platform's own-traffic thresholds where neither
// the inputs nor the gate's settings say otherwise: deploy-kit renders none.
var DefaultOwnTraffic = owntraffic.Thresholds{ErrorRate: 0.01, Latency: time.Second}

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
	if cfg.OwnTraffic == (owntraffic.Thresholds{}) {
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
		sender: owntraffic.New(owntraffic.WithBudget(OwnTrafficBudget)),
	}, nil
}

// webhook is one of the questions Flagger asks, each in a file of its own
// (webhook_<route>.go). handle makes the checks and the reads every webhook
// shares; a webhook adds where it is asked, what its question shows, and the
// reads and the rule of its answer.
type webhook interface {
	// route is the webhook's name as the render names it; Flagger asks it at
	// POST /<route>.
	route() string
	// shows says what the question shows and needs beyond the shared reads.
	shows() routeOptions
	// read is handed the question as soon as the payload reads and starts
	// the reads that need nothing but the question, so the reads of one
	// answer run side by side, not one after another. The step it returns
	// decides once the shared reads identified the member.
	read(ctx context.Context, q release.Question) decide
}

// routeOptions say what a webhook's question shows and needs beyond the
// reads every webhook shares.
type routeOptions struct {
	// noted: the question shows the member is in the release it asks about,
	// so the revision it asks at is noted. Flagger asks confirm-rollout while
	// the Canary still reads as the release before (Succeeded, say), so a
	// /may-start is no such sign; the other three are asked only while the
	// member is analysed or waits at the barrier.
	noted bool
	// configMaps: the answer compares ConfigMaps, so the namespace's are
	// listed and the inputs picked out of that list, one read of the kind.
	configMaps bool
}

// decide is a webhook's answer once the shared reads identified the member:
// it waits for the webhook's reads and decides with its rule (and, for
// /checks and /may-promote, the gate's own requests).
type decide func(a asked) (Answer, error)

// webhooks are the four questions the gate answers, registered here alone.
func (g *Gate) webhooks() []webhook {
	return []webhook{mayStart{g}, checks{g}, mayPromote{g}, rollback{g}}
}

// Routes registers the four webhooks.
func (g *Gate) Routes(mux *http.ServeMux) {
	for _, hook := range g.webhooks() {
		mux.HandleFunc("POST /"+hook.route(), g.handle(hook))
	}
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

// handle runs the checks every webhook shares, in the order that reveals
// least: the caller before the body, the body before the cluster.
func (g *Gate) handle(hook webhook) http.HandlerFunc {
	opts := hook.shows()
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), AnswerTimeout)
		defer cancel()
		log := g.logger.With(slog.String("webhook", hook.route()))

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

		finish := hook.read(ctx, q)
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
