package releasehistory

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// PageQuery is what a person asked the page for: the release to show, the
// list's filters and page, and how often the page reloads itself.
type PageQuery struct {
	Release string
	Filter  Filter
	// Within keeps releases merged at most this long ago; 0 keeps all.
	Within time.Duration
	// Search keeps releases whose id or image holds it.
	Search string
	// Page is the list's page, from 1, PageRows a page.
	Page int
	// Refresh is how often the page reloads itself, in seconds; 0 never.
	Refresh int
}

// The page's bounds: a search longer than an image is no search, and a
// reload more often than the read cache answers anew would show nothing new.
const (
	MostSearch     = MostImage
	DefaultRefresh = 30
	LeastRefresh   = 5
	MostRefresh    = 3600
	MostWithin     = 366 * 24 * time.Hour
)

var pageParams = []string{"release", "app", "env", "cluster", "state", "within", "q", "page", "refresh"}

// ParsePageQuery reads GET /?release=&app=&env=&cluster=&state=&within=&q=&page=&refresh=.
// An empty value is no value, as the page's form sends an unused field.
func ParsePageQuery(q url.Values) (PageQuery, error) {
	given := url.Values{}
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" {
			continue
		}
		given[k] = vs
	}
	p, err := query(given, pageParams...)
	if err != nil {
		return PageQuery{}, err
	}
	if err := checkService(p, false); err != nil {
		return PageQuery{}, err
	}
	out := PageQuery{Release: p["release"], Search: p["q"], Page: 1, Refresh: DefaultRefresh,
		Filter: Filter{App: p["app"], Env: p["env"], Cluster: p["cluster"], State: rr.State(p["state"])}}
	if s, ok := p["state"]; ok && !slices.Contains(states, rr.State(s)) {
		return PageQuery{}, fmt.Errorf("%w: state %q is none of %v", ErrBadQuery, clip(s), states)
	}
	if len(out.Search) > MostSearch {
		return PageQuery{}, fmt.Errorf("%w: q is longer than %d characters", ErrBadQuery, MostSearch)
	}
	if w, ok := p["within"]; ok {
		if out.Within, err = ParseWithin(w); err != nil {
			return PageQuery{}, err
		}
	}
	if v, ok := p["page"]; ok {
		if out.Page, err = wholeIn("page", v, 1, MostLimit); err != nil {
			return PageQuery{}, err
		}
	}
	if v, ok := p["refresh"]; ok {
		if out.Refresh, err = wholeIn("refresh", v, 0, MostRefresh); err != nil {
			return PageQuery{}, err
		}
		if out.Refresh != 0 && out.Refresh < LeastRefresh {
			return PageQuery{}, fmt.Errorf("%w: refresh %d is below %d seconds (0 stops it)", ErrBadQuery, out.Refresh, LeastRefresh)
		}
	}
	return out, nil
}

func wholeIn(name, v string, least, most int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > most {
		return 0, fmt.Errorf("%w: %s %q is not a whole number from %d to %d", ErrBadQuery, name, clip(v), least, most)
	}
	return n, nil
}

// ParseWithin reads a span as people write it: a whole number of minutes,
// hours or days (90m, 24h, 7d), up to MostWithin.
func ParseWithin(s string) (time.Duration, error) {
	units := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	bad := fmt.Errorf("%w: within %q is not a whole number of minutes, hours or days (90m, 24h, 7d) up to 366d", ErrBadQuery, clip(s))
	if len(s) < 2 || len(s) > 6 {
		return 0, bad
	}
	unit, ok := units[s[len(s)-1]]
	n, err := strconv.Atoi(s[:len(s)-1])
	if !ok || err != nil || n < 1 || s[0] == '+' || time.Duration(n)*unit > MostWithin {
		return 0, bad
	}
	return time.Duration(n) * unit, nil
}

// Keep says a record is one the query's filters, span and search keep.
func (q PageQuery) Keep(r rr.Record, now time.Time) bool {
	f := q.Filter
	switch {
	case f.App != "" && r.App != f.App, f.Env != "" && r.Env != f.Env, f.Cluster != "" && r.Cluster != f.Cluster,
		f.State != "" && r.State != f.State:
		return false
	case q.Within > 0 && r.MergedAt.Before(now.Add(-q.Within)):
		return false
	}
	return q.Search == "" || strings.Contains(r.ReleaseID, q.Search) || strings.Contains(r.Image, q.Search)
}

// KeepService says a record is of a service the query's app, env and
// cluster keep: the matrix shows what runs now, whatever the other filters.
func (q PageQuery) KeepService(r rr.Record) bool {
	f := q.Filter
	return (f.App == "" || r.App == f.App) && (f.Env == "" || r.Env == f.Env) && (f.Cluster == "" || r.Cluster == f.Cluster)
}

// Values is the query as the page's links write it, with page set to
// page; defaults are left out.
func (q PageQuery) Values(page int) url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"app", q.Filter.App}, {"env", q.Filter.Env}, {"cluster", q.Filter.Cluster},
		{"state", string(q.Filter.State)}, {"q", q.Search}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if q.Within > 0 {
		v.Set("within", WithinString(q.Within))
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if q.Refresh != DefaultRefresh {
		v.Set("refresh", strconv.Itoa(q.Refresh))
	}
	return v
}

// WithinString writes a span ParseWithin reads back, in its largest whole
// unit.
func WithinString(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/time.Minute)) + "m"
}
