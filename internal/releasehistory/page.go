package releasehistory

import (
	"bytes"
	"cmp"
	_ "embed"
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

// pageJS writes the page's times in the reader's zone. It is served by the
// service itself, so the policy allows script from 'self' and nowhere else.
//
//go:embed page.js
var pageJS []byte

// PagePolicy is the page's Content-Security-Policy: its own script and
// nothing else; inline style alone, as the page carries its style sheet.
const PagePolicy = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// html/template escapes every value for where it stands, so a release id,
// an image or a message with markup in it is shown as text.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"iso":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"at":      func(now, t time.Time) struct{ Now, At time.Time } { return struct{ Now, At time.Time }{now, t} },
	"ago":     Relative,
	"withins": func() []string { return []string{"1h", "1d", "7d", "30d"} },
	"withinString": func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return WithinString(d)
	},
	"refreshes": func() []int { return []int{0, 10, 30, 60, 300} },
}).Parse(pageHTML))

// Page is what the page shows.
type Page struct {
	// Now is when the page is answered, for times written relative to it.
	Now    time.Time
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
	// Out is what the chosen release links out to: the objects it moved,
	// the GitHub Deployments the Reporter keeps its own among, and the
	// events it sent, with the sink they went to.
	Out ReleaseOut
}

// ReleaseOut is what one release links out to.
type ReleaseOut struct {
	Objects     []Object
	Deployments string
	Sent        []Sent
	Sink        string
}

// Row is one release as the page lists it.
type Row struct {
	ReleaseID, App, Env, Cluster, Image string
	// ShortImage is a bare digest (a Project's pinned one) cut to its first
	// 12 hex digits for the list, the whole as its title; "" for any other.
	ShortImage string
	State      rr.State
	Since      time.Time
	// LeadTime is merged to healthy, "" when never healthy.
	LeadTime string
	// RollbackVia is the release in the rollback window that ran this
	// row's image, "" when the service may not be rolled back to it.
	RollbackVia string
	// Revision is the release's gitRevision, Commit its web page ("" when
	// the record cannot say one).
	Revision, Commit string
	Moved            Moved
	// Held is why the Release Gate holds the release, "" when it is not
	// held or serves, or no longer could be (superseded, rolled back).
	Held string
}

// Moment is one line of a release's timeline.
type Moment struct {
	At   time.Time
	What string
}

// Chart is one DORA figure over PageDays days: a headline and a bar a day.
type Chart struct {
	Title, Figure, Unit string
	// Top is the tallest bar's value, the axis's top; Trend the figure
	// over the window's later half beside its earlier.
	Top, Trend string
	Bars       []Bar
}

// Bar is one day's value, drawn at Height (0 to 40) of the tallest.
type Bar struct {
	X, Y, Height int
	Label        string
}

// BuildPage is the page from one read of the records, newest first, what
// the person asked for and the rollback window (KEEP_HEALTHY).
func BuildPage(snap Snapshot, q PageQuery, keep int, out Out, now time.Time) Page {
	p := Page{Now: now, ReadAt: snap.ReadAt, Unreadable: snap.Unreadable, Asked: q.Release, Query: q, States: states, PageNo: q.Page}
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
			p.Out = ReleaseOut{Objects: ObjectsOf(rec, out.ObjectLink), Deployments: DeploymentsURL(rec), Sent: SentOf(rec),
				Sink: SinkShown(out.Sink)}
		}
	}
	p.Charts = Charts(snap.Records, now)
	p.Matrix = MatrixOf(services)
	return p
}

func rowOf(r rr.Record) Row {
	row := Row{ReleaseID: r.ReleaseID, App: r.App, Env: r.Env, Cluster: r.Cluster, Image: r.Image, State: r.State, Since: r.StateAt,
		Revision: r.GitRevision, Commit: CommitURL(r.GitURL, r.GitRevision), Moved: MovedOf(r), Held: heldOf(r)}
	if digestImage.MatchString(r.Image) {
		row.ShortImage = r.Image[:len("sha256:")+12] + "…"
	}
	if d, ok := LeadTime(r); ok {
		row.LeadTime = HumanDuration(d)
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
	if err := pageTemplate.Execute(&buf, BuildPage(snap, q, a.KeepHealthy, a.Out, cmp.Or(a.now(), snap.ReadAt))); err != nil {
		a.Logger.LogAttrs(r.Context(), slog.LevelError, "the page does not render", slog.String("cause", err.Error()))
		server.Answer(w, http.StatusInternalServerError, "the page does not render; the log names the cause")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", PagePolicy)
	_, _ = w.Write(buf.Bytes())
}

func (a *API) script(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r.URL.Query()); err != nil {
		badQuery(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(pageJS)
}

func (a *API) now() time.Time {
	if a.Now == nil {
		return time.Time{}
	}
	return a.Now()
}
