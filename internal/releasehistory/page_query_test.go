package releasehistory_test

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestParsePageQuery(t *testing.T) {
	for _, tc := range []struct {
		raw, want, bad string
	}{
		{raw: "", want: "{ {    0} 0s  1 30}"},
		{raw: "app=docs&env=&cluster=&state=&within=&q=&refresh=", want: "{ {docs    0} 0s  1 30}"}, // the form's unused fields
		{raw: "app=docs&env=prod&cluster=prod-eu&state=healthy&within=7d&q=2.0&page=3&refresh=0&release=docs@1:prod-eu/prod",
			want: "{docs@1:prod-eu/prod {docs prod prod-eu healthy 0} 168h0m0s 2.0 3 0}"},
		{raw: "within=90m", want: "{ {    0} 1h30m0s  1 30}"},
		{raw: "colour=red", bad: `unknown parameter "colour"`},
		{raw: "app=a&app=b", bad: "app given 2 times"},
		{raw: "app=Docs", bad: "not a DNS label"},
		{raw: "state=gone", bad: `state "gone" is none of`},
		{raw: "within=7", bad: "within"},
		{raw: "within=0d", bad: "within"},
		{raw: "within=+7d", bad: "within"},
		{raw: "within=367d", bad: "within"},
		{raw: "within=7w", bad: "within"},
		{raw: "page=0", bad: "page"},
		{raw: "page=x", bad: "page"},
		{raw: "refresh=2", bad: "refresh 2 is below 5"},
		{raw: "refresh=3601", bad: "refresh"},
		{raw: "q=" + strings.Repeat("x", rh.MostSearch+1), bad: "q is longer"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			v, err := url.ParseQuery(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rh.ParsePageQuery(v)
			if tc.bad != "" {
				if !errors.Is(err, rh.ErrBadQuery) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %v, want a bad query naming %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := fmtQuery(got)
			if s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
			// The page's own links read back as the same query.
			back, err := rh.ParsePageQuery(got.Values(got.Page))
			back.Release = got.Release // the list's links leave the release asked for
			if err != nil || fmtQuery(back) != fmtQuery(got) {
				t.Fatalf("links read back as %v (%v)", fmtQuery(back), err)
			}
		})
	}
}

func fmtQuery(q rh.PageQuery) string {
	return "{" + q.Release + " {" + q.Filter.App + " " + q.Filter.Env + " " + q.Filter.Cluster + " " + string(q.Filter.State) + " 0} " +
		q.Within.String() + " " + q.Search + " " + strconv.Itoa(q.Page) + " " + strconv.Itoa(q.Refresh) + "}"
}

func TestWithinString(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", 90 * time.Minute: "90m", 48 * time.Hour: "2d", 36 * time.Hour: "36h"} {
		if got := rh.WithinString(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
		if back, err := rh.ParseWithin(want); err != nil || back != d {
			t.Errorf("%q reads back as %v, %v", want, back, err)
		}
	}
}

// TestPageFiltersAndPages: the list keeps what the query asks, a page of
// PageRows at a time with links to its neighbours; the matrix keeps the
// services asked; a bad query is refused with its reason.
func TestPageFiltersAndPages(t *testing.T) {
	recs := history(t)
	for i := range 2*rh.PageRows + 500 {
		r := rec(t, "0."+strconv.Itoa(i), rr.StateSuperseded, ago(2*day+time.Duration(i)*time.Minute), ago(2*day))
		recs = append(recs, in(t, r, "bulk", "prod-eu", "prod"))
	}
	h := api(t, &fakeRecords{recs: recs})
	rows := func(body string) int { return strings.Count(body, "<tr data-release=") }
	for _, tc := range []struct {
		target string
		rows   int
		holds  []string
		matrix int
	}{
		{"/", rh.PageRows, []string{`<meta http-equiv="refresh" content="30">`, `2505 releases, page 1 of 3`, `rel="next" href="?page=2"`}, 3},
		{"/?page=3&refresh=0", 505, []string{`page 3 of 3`, `rel="prev" href="?page=2&amp;refresh=0"`}, 3},
		{"/?app=docs", 4, []string{`4 releases`, `value="docs"`}, 1},
		{"/?app=docs&state=healthy", 1, []string{`data-release="docs@3:prod-eu/prod"`, `<option selected>healthy</option>`}, 1},
		{"/?within=1d", 5, []string{`<option selected>1d</option>`}, 3},
		{"/?q=shop", 1, []string{`data-release="shop@9:prod-eu/prod"`, `value="shop"`}, 3},
		{"/?q=nothing-holds-this", 0, []string{`No release matches.`}, 3},
	} {
		w := get(t, h, tc.target)
		body := w.Body.String()
		if w.Code != http.StatusOK || rows(body) != tc.rows || strings.Count(body, "<tr data-app=") != tc.matrix {
			t.Fatalf("%s: %d, %d rows, %d apps in the matrix", tc.target, w.Code, rows(body), strings.Count(body, "<tr data-app="))
		}
		for _, s := range tc.holds {
			if !strings.Contains(body, s) {
				t.Errorf("%s: no %s", tc.target, s)
			}
		}
	}
	// A search with markup is shown back as text, in the field and the links.
	if body := get(t, h, "/?q="+url.QueryEscape(`"><b id="injected">`)).Body.String(); strings.Contains(body, `<b id="injected">`) ||
		!strings.Contains(body, `value="&#34;&gt;&lt;b id=&#34;injected&#34;&gt;"`) {
		t.Fatal(body)
	}
	if body := get(t, h, "/?refresh=0").Body.String(); strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatal("refresh=0 still reloads")
	}
	for _, target := range []string{"/?within=forever", "/?page=0", "/?refresh=1", "/?state=gone", "/?app=a&app=b"} {
		if w := get(t, h, target); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "bad query") {
			t.Errorf("%s: %d %s", target, w.Code, w.Body)
		}
	}
}
