package releaserecord

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// EffectHeader carries a pushed fact's effect in the answer: applied,
// ignored or refused; the body says why.
const EffectHeader = "X-Release-Record-Effect"

// EffectRefused is the effect of a fact answered 4xx or 5xx: nothing taken.
const EffectRefused Effect = "refused"

// Facts answers the pushed sources, one route each, under the bearer token.
type Facts struct {
	Service *Service
	// Cluster and Env are the service's: a fact of another is refused.
	Cluster, Env string
	// Token is FACTS_TOKEN; with none every pushed fact is 401.
	Token string
	// Namespaces is the pattern a fact's namespace must match whole, or it
	// is ignored.
	Namespaces *regexp.Regexp
	Sources    []Pushed
	Logger     *slog.Logger
}

// Routes registers every source's route.
func (h *Facts) Routes(mux *http.ServeMux) {
	for _, src := range h.Sources {
		mux.HandleFunc(src.Route(), h.handle(src))
	}
}

// Answer is the JSON body of every pushed fact's answer.
type Answer struct {
	Effect Effect `json:"effect"`
	Why    string `json:"why"`
	// The rest is set when the fact reached a record.
	ReleaseID string   `json:"releaseId,omitempty"`
	State     State    `json:"state,omitempty"`
	Events    []string `json:"events,omitempty"`
	Recorded  *bool    `json:"recorded,omitempty"`
}

func (h *Facts) handle(src Pushed) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.authorised(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="release-record"`)
			reply(w, http.StatusUnauthorized, Answer{Effect: EffectRefused, Why: "a bearer token FACTS_TOKEN names is required"})
			return
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			if server.TooLarge(err) {
				reply(w, http.StatusRequestEntityTooLarge, Answer{Effect: EffectRefused, Why: "the fact is larger than the bound"})
				return
			}
			reply(w, http.StatusBadRequest, Answer{Effect: EffectRefused, Why: "the fact could not be read"})
			return
		}
		status, answer := h.take(r.Context(), src, r.PathValue("cluster"), raw)
		h.Logger.LogAttrs(r.Context(), slog.LevelInfo, "fact", slog.String("source", src.Name()), slog.Int("status", status),
			slog.String("effect", string(answer.Effect)), slog.String("why", answer.Why), slog.String("releaseId", answer.ReleaseID),
			slog.Any("events", answer.Events))
		reply(w, status, answer)
	}
}

func (h *Facts) authorised(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return h.Token != "" && ok && subtle.ConstantTimeCompare([]byte(token), []byte(h.Token)) == 1
}

func refused(why string) (int, Answer) {
	return http.StatusBadRequest, Answer{Effect: EffectRefused, Why: why}
}

func ignoredAnswer(why string) (int, Answer) {
	return http.StatusAccepted, Answer{Effect: EffectIgnored, Why: why}
}

// take applies the rules every pushed fact meets, in order, then the fact.
func (h *Facts) take(ctx context.Context, src Pushed, cluster string, raw []byte) (int, Answer) {
	if cluster != h.Cluster {
		return refused("the fact is posted for the cluster " + clip(cluster) + "; this is " + h.Cluster)
	}
	claim, err := src.Decode(raw)
	if err != nil {
		return refused(err.Error())
	}
	if claim.Ignore != "" {
		return ignoredAnswer(claim.Ignore)
	}
	if h.Namespaces != nil && !h.Namespaces.MatchString(claim.Namespace) {
		return ignoredAnswer("the namespace " + clip(claim.Namespace) + " is outside the allowed pattern")
	}
	if claim.Generation != claim.ObservedGeneration {
		return ignoredAnswer("a stale generation: the controller observed " + orNone(claim.ObservedGeneration) + " of " + claim.Generation)
	}
	if claim.Env != "" && claim.Env != h.Env {
		// A cluster may host several envs whose Applications one
		// notifications engine posts here: well-formed, not this service's,
		// and a 4xx would be sent again for ever.
		return ignoredAnswer("the env " + clip(claim.Env) + " is another service's; this is " + h.Env)
	}
	f := claim.Fact
	var out Outcome
	if claim.ReleaseID == "" {
		out, err = h.Service.TakeInFlight(ctx, claim.App, h.Cluster, h.Env, claim.Revision, f)
	} else {
		id, perr := ParseReleaseID(claim.ReleaseID)
		switch {
		case perr != nil:
			return refused(perr.Error())
		case id.Cluster != h.Cluster:
			return refused("the release id " + id.String() + " is another cluster's; this is " + h.Cluster)
		case id.Env != h.Env:
			return ignoredAnswer("the release id " + id.String() + " is another env's; this is " + h.Env)
		case claim.App != "" && id.App() != claim.App:
			return refused("the release id " + id.String() + " is not of the app " + clip(claim.App))
		}
		f.Release.ID = id
		out, err = h.Service.Take(ctx, f)
	}
	switch {
	case errors.Is(err, ErrForward):
		return http.StatusBadGateway, Answer{Effect: EffectRefused, Why: err.Error(), ReleaseID: claim.ReleaseID}
	case errors.Is(err, ErrUnreadable):
		return http.StatusConflict, Answer{Effect: EffectRefused, Why: err.Error() + "; it is never overwritten", ReleaseID: claim.ReleaseID}
	case err != nil:
		return http.StatusInternalServerError, Answer{Effect: EffectRefused, Why: err.Error(), ReleaseID: claim.ReleaseID}
	}
	answer := Answer{Effect: out.Effect, Why: out.Why, ReleaseID: out.ReleaseID, State: out.State, Events: out.Events, Recorded: &out.Recorded}
	if out.Effect == EffectIgnored {
		return http.StatusAccepted, answer
	}
	return http.StatusOK, answer
}

func reply(w http.ResponseWriter, status int, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(EffectHeader, string(a.Effect))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
