package releasehistory

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// PageDays is how far back the page's DORA charts look, a bar a day.
const PageDays = 30

// PageRows is the most releases the page lists, newest first.
const PageRows = 1000

//go:embed page.html
var pageHTML string

// html/template escapes every value for where it stands, so a release id,
// an image or a message with markup in it is shown as text.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"withins":      func() []string { return []string{"1h", "1d", "7d", "30d"} },
	"withinString": func(d time.Duration) string { return map[bool]string{true: "", false: WithinString(d)}[d == 0] },
	"refreshes":    func() []int { return []int{0, 10, 30, 60, 300} },
}).Parse(pageHTML))

// Page is what the page shows.
type Page struct {
	ReadAt time.Time
	// Rows are the page of releases the query keeps: PageNo of Pages,
	// Matched in all; PrevURL and NextURL are the neighbouring pages' links.
	Rows             []Row
	Matched          int
	PageNo, Pages    int
	PrevURL, NextURL string
	Query            PageQuery
	States           []rr.State
	Unreadable       int
	// Asked is the ?release= asked for; Chosen its record when there is
	// one, with its Timeline; Missing says why not.
	Asked    string
	Chosen   *Row
	Timeline []Moment
	Missing  string
	Charts   []Chart
	Matrix   Matrix
}

// Row is one release as the page lists it.
type Row struct {
	ReleaseID, App, Env, Cluster, Image string
	State                               rr.State
	Since                               time.Time
	// LeadTime is merged to healthy, "" when never healthy.
	LeadTime string
	// RollbackVia is the release in the rollback window that ran this
	// row's image, "" when the service may not be rolled back to it.
	RollbackVia string
	// Revision is the release's gitRevision, Commit its web page ("" when
	// the record cannot say one).
	Revision, Commit string
	Moved            Moved
}

// Moment is one line of a release's timeline.
type Moment struct {
	At   time.Time
	What string
}

// Chart is one DORA figure over PageDays days: a headline and a bar a day.
type Chart struct {
	Title, Figure, Unit string
	Bars                []Bar
}

// Bar is one day's value, drawn at Height (0 to 40) of the tallest.
type Bar struct {
	X, Y, Height int
	Label        string
}

// BuildPage is the page from one read of the records, newest first, what
// the person asked for and the rollback window (KEEP_HEALTHY).
func BuildPage(snap Snapshot, q PageQuery, keep int, now time.Time) Page {
	p := Page{ReadAt: snap.ReadAt, Unreadable: snap.Unreadable, Asked: q.Release, Query: q, States: states, PageNo: q.Page}
	targets := RollbackTargets(snap.Records, keep)
	rowOf := func(r rr.Record) Row {
		row := rowOf(r)
		row.RollbackVia = targets[KeyOf(r)][r.Image]
		return row
	}
	first, services := (q.Page-1)*PageRows, make([]rr.Record, 0, len(snap.Records))
	for _, r := range snap.Records {
		if q.KeepService(r) {
			services = append(services, r)
		}
		if !q.Keep(r, now) {
			continue
		}
		if p.Matched >= first && p.Matched < first+PageRows {
			p.Rows = append(p.Rows, rowOf(r))
		}
		p.Matched++
	}
	p.Pages = max(1, (p.Matched+PageRows-1)/PageRows)
	if q.Page > 1 {
		p.PrevURL = "?" + q.Values(q.Page-1).Encode()
	}
	if q.Page < p.Pages {
		p.NextURL = "?" + q.Values(q.Page+1).Encode()
	}
	if q.Release != "" {
		id, err := rr.ParseReleaseID(q.Release)
		switch rec, ok := Find(snap.Records, id.String()); {
		case err != nil:
			p.Missing = "not a release id (<app>@<version>:<cluster>/<env>): " + q.Release
		case !ok:
			p.Missing = "no record of the release " + q.Release
		default:
			row := rowOf(rec)
			p.Chosen, p.Timeline = &row, TimelineOf(rec)
		}
	}
	p.Charts = Charts(snap.Records, now)
	p.Matrix = MatrixOf(services)
	return p
}

func rowOf(r rr.Record) Row {
	row := Row{ReleaseID: r.ReleaseID, App: r.App, Env: r.Env, Cluster: r.Cluster, Image: r.Image, State: r.State, Since: r.StateAt,
		Revision: r.GitRevision, Commit: CommitURL(r.GitURL, r.GitRevision), Moved: MovedOf(r)}
	if d, ok := LeadTime(r); ok {
		row.LeadTime = d.Round(time.Second).String()
	}
	return row
}

// TimelineOf is what the record knows of its release, oldest first: the
// record keeps the last of each kind of moment, not every fact.
func TimelineOf(r rr.Record) []Moment {
	var out []Moment
	add := func(at time.Time, what string) {
		if !at.IsZero() {
			out = append(out, Moment{At: at, What: what})
		}
	}
	add(r.MergedAt, "merged: "+r.Image)
	add(r.HealthyAt, "first healthy")
	if r.LastFactPhase != "" {
		add(r.LastFactAt, "last fact: "+r.LastFactPhase)
	}
	add(r.StateAt, "entered "+string(r.State))
	slices.SortStableFunc(out, func(a, b Moment) int { return a.At.Compare(b.At) })
	// What the record holds without a time, after the timed moments.
	for _, line := range []struct{ what, value string }{
		{"events sent", setLine(r.EmittedLive)}, {"events logged in shadow mode", setLine(r.EmittedShadow)},
		{"first failure", r.LastError}, {"drift", r.Drift}, {"superseded by", r.SupersededBy},
		{"rolled back by", r.RolledBackBy}, {"a rollback of", r.RollbackOf}, {"rollback reason", r.RollbackReason},
	} {
		if line.value != "" {
			out = append(out, Moment{What: line.what + ": " + line.value})
		}
	}
	return out
}

func setLine(keys []string) string {
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += k
	}
	return out
}

// Charts are the four DORA figures over the PageDays days up to now, every
// service together, each deployment on the day it finished.
func Charts(recs []rr.Record, now time.Time) []Chart {
	since := now.Add(-PageDays * 24 * time.Hour)
	healthy := healthyByService(recs)
	deployed, failed := make([]float64, PageDays), make([]float64, PageDays)
	leads, restores := make([][]time.Duration, PageDays), make([][]time.Duration, PageDays)
	var allLeads, allRestores []time.Duration
	var nDeployed, nFailed int
	for _, r := range recs {
		o, at := OutcomeOf(r), FinishedAt(r)
		if o == OutcomeInFlight || at.Before(since) || at.After(now) {
			continue
		}
		day := min(int(at.Sub(since)/(24*time.Hour)), PageDays-1)
		deployed[day]++
		nDeployed++
		if d, ok := LeadTime(r); ok {
			leads[day], allLeads = append(leads[day], d), append(allLeads, d)
		}
		if o == OutcomeFailed {
			failed[day]++
			nFailed++
			if d, ok := RestoreTime(r, healthy[KeyOf(r)]); ok {
				restores[day], allRestores = append(restores[day], d), append(allRestores, d)
			}
		}
	}
	rate := make([]float64, PageDays)
	for i := range rate {
		if deployed[i] > 0 {
			rate[i] = 100 * failed[i] / deployed[i]
		}
	}
	rateFigure := "—"
	if nDeployed > 0 {
		rateFigure = fmt.Sprintf("%.0f%%", 100*float64(nFailed)/float64(nDeployed))
	}
	return []Chart{
		chart("Deployment frequency", fmt.Sprintf("%.1f a day", float64(nDeployed)/PageDays), "deployments", deployed),
		chart("Lead time, merged to healthy", medianString(allLeads), "median, hours", medians(leads)),
		chart("Change failure rate", rateFigure, "% failed", rate),
		chart("Time to restore", medianString(allRestores), "median, hours", medians(restores)),
	}
}

func medians(days [][]time.Duration) []float64 {
	out := make([]float64, len(days))
	for i, d := range days {
		if len(d) > 0 {
			out[i] = median(d).Hours()
		}
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianString(d []time.Duration) string {
	if len(d) == 0 {
		return "—"
	}
	return "median " + median(d).Round(time.Second).String()
}

// Bars are 8 px wide, 10 apart, at most 40 tall, on a 300×50 drawing.
func chart(title, figure, unit string, values []float64) Chart {
	top := slices.Max(values)
	c := Chart{Title: title, Figure: figure, Unit: unit}
	for i, v := range values {
		h := 0
		if top > 0 {
			h = int(40 * v / top)
		}
		c.Bars = append(c.Bars, Bar{X: i * 10, Y: 45 - h, Height: h, Label: fmt.Sprintf("day %d: %.1f %s", i-PageDays+1, v, unit)})
	}
	return c
}

func (a *API) page(w http.ResponseWriter, r *http.Request) {
	q, err := ParsePageQuery(r.URL.Query())
	if err != nil {
		badQuery(w, err)
		return
	}
	snap, ok := a.read(w, r)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, BuildPage(snap, q, a.KeepHealthy, cmp.Or(a.now(), snap.ReadAt))); err != nil {
		a.Logger.LogAttrs(r.Context(), slog.LevelError, "the page does not render", slog.String("cause", err.Error()))
		server.Answer(w, http.StatusInternalServerError, "the page does not render; the log names the cause")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The page runs no script: a policy that allows none makes sure of it.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	_, _ = w.Write(buf.Bytes())
}

func (a *API) now() time.Time {
	if a.Now == nil {
		return time.Time{}
	}
	return a.Now()
}
