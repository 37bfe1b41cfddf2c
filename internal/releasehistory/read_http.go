package releasehistory

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// API answers the read API, /metrics and the page from the cache. It
// writes nothing.
type API struct {
	// Scrapers are the only callers /metrics answers (the metrics stack's
	// pods, by the gate's rule); nil answers none.
	Scrapers *podcallers.Scrapers

	Cache *Cache
	// KeepHealthy is KEEP_HEALTHY: the rollback window.
	KeepHealthy int
	// Out is what the page links out to.
	Out    Out
	Logger *slog.Logger
	Now    func() time.Time
}

// Releases is the answer of GET /v1/releases; releases.schema.json is its
// shape.
type Releases struct {
	ReadAt     time.Time `json:"readAt"`
	Truncated  bool      `json:"truncated"`
	Unreadable int       `json:"unreadable"`
	Releases   []View    `json:"releases"`
}

// Routes registers the read API, /metrics and the page.
func (a *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/releases", a.releases)
	// A release id holds a '/', so the rest of the path is the id.
	mux.HandleFunc("GET /v1/releases/{releaseId...}", a.release)
	mux.HandleFunc("GET /v1/rollback-eligible", a.eligible)
	mux.Handle("GET /metrics", a.MetricsHandler())
	mux.HandleFunc("GET /{$}", a.page)
	mux.HandleFunc("GET /page.js", a.script)
}

func (a *API) read(w http.ResponseWriter, r *http.Request) (Snapshot, bool) {
	snap, err := a.Cache.Read(r.Context())
	if err != nil {
		a.Logger.LogAttrs(r.Context(), slog.LevelError, "cannot read the records", slog.String("cause", err.Error()))
		server.Answer(w, http.StatusServiceUnavailable, "the release record cannot read its records now; its log names the cause")
		return Snapshot{}, false
	}
	return snap, true
}

func badQuery(w http.ResponseWriter, err error) {
	server.Answer(w, http.StatusBadRequest, err.Error())
}

func answerJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil { // not reached: every answer is plain data
		server.Answer(w, http.StatusInternalServerError, "the answer does not encode")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(append(body, '\n'))
}

func (a *API) releases(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		badQuery(w, err)
		return
	}
	snap, ok := a.read(w, r)
	if !ok {
		return
	}
	recs, truncated := Select(snap.Records, f)
	out := Releases{ReadAt: snap.ReadAt, Truncated: truncated, Unreadable: snap.Unreadable, Releases: make([]View, 0, len(recs))}
	for _, rec := range recs {
		out.Releases = append(out.Releases, ViewOf(rec))
	}
	answerJSON(w, out)
}

func (a *API) release(w http.ResponseWriter, r *http.Request) {
	id, err := rr.ParseReleaseID(r.PathValue("releaseId"))
	if err != nil {
		badQuery(w, fmt.Errorf("%w: %w", ErrBadQuery, err))
		return
	}
	if len(r.URL.Query()) > 0 {
		badQuery(w, errors.New("bad query: /v1/releases/{releaseId} takes no parameter"))
		return
	}
	snap, ok := a.read(w, r)
	if !ok {
		return
	}
	if rec, found := Find(snap.Records, id.String()); found {
		answerJSON(w, ViewOf(rec))
		return
	}
	server.Answer(w, http.StatusNotFound, "no record of the release "+id.String())
}

// Find is the record of a release id.
func Find(recs []rr.Record, releaseID string) (rr.Record, bool) {
	for _, r := range recs {
		if r.ReleaseID == releaseID {
			return r, true
		}
	}
	return rr.Record{}, false
}

func (a *API) eligible(w http.ResponseWriter, r *http.Request) {
	svc, image, err := ParseEligibility(r.URL.Query())
	if err != nil {
		badQuery(w, err)
		return
	}
	snap, ok := a.read(w, r)
	if !ok {
		return
	}
	answerJSON(w, RollbackEligible(snap.Records, svc, image, a.KeepHealthy))
}
