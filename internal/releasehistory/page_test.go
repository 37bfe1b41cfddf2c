package releasehistory_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestTimelineOf(t *testing.T) {
	r := healthy(rec(t, "3", rr.StateSuperseded, ago(2*time.Hour), ago(10*time.Minute)), ago(time.Hour))
	r.LastFactPhase, r.LastFactAt = "Healthy", ago(30*time.Minute)
	r.EmittedLive, r.SupersededBy = []string{"deploying", "upgraded"}, "docs@4:prod-eu/prod"
	var got []string
	for _, m := range rh.TimelineOf(r) {
		got = append(got, m.What)
	}
	want := "merged: ghcr.io/acme/docs:3|first healthy|last fact: Healthy|entered superseded|events sent: deploying, upgraded|superseded by docs@4:prod-eu/prod"
	if strings.Join(got, "|") != strings.ReplaceAll(want, "by docs", "by: docs") {
		t.Fatalf("%q", got)
	}
}

func TestCharts(t *testing.T) {
	charts := rh.Charts(history(t), now)
	if len(charts) != 4 {
		t.Fatalf("%d charts", len(charts))
	}
	// Three finished deployments of docs today, one of them failed.
	if charts[0].Figure != "0.1 a day" || charts[2].Figure != "33%" || charts[3].Figure != "median 1 h" || charts[1].Figure != "median 1 h" {
		t.Fatalf("%+v", []string{charts[0].Figure, charts[1].Figure, charts[2].Figure, charts[3].Figure})
	}
	if today := charts[0].Bars[rh.PageDays-1]; today.Height != 40 || charts[0].Bars[0].Height != 0 {
		t.Fatalf("bars %+v", charts[0].Bars)
	}
	// Each figure's trend: all three fell in the later half; the axes'
	// tops are in each chart's unit.
	if charts[0].Trend != "the last 15 days 0.2 a day; the 15 before 0.0 a day" || charts[2].Trend != "the last 15 days 33%; the 15 before —" ||
		charts[0].Top != "3.0" || charts[1].Top != "1 h" || charts[3].Bars[rh.PageDays-1].Label != "today: 1 h median, failure to healthy" {
		t.Fatalf("trend %q %q, tops %q %q, %q", charts[0].Trend, charts[2].Trend, charts[0].Top, charts[1].Top, charts[3].Bars[rh.PageDays-1].Label)
	}
	if empty := rh.Charts(nil, now); empty[2].Figure != "—" || empty[0].Bars[0].Height != 0 {
		t.Fatalf("no records: %+v", empty)
	}
}

// TestPageEscapes: a message and an asked release with markup are text.
func TestPageEscapes(t *testing.T) {
	h := api(t, &fakeRecords{recs: history(t)})
	w := get(t, h, "/?release=docs@2:prod-eu/prod")
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, "&lt;img src=x onerror=") || strings.Contains(body, "<img") ||
		!strings.Contains(body, `class="state state-aborted"`) || strings.Count(body, "<tr data-release=") != 5 {
		t.Fatalf("%d %s", w.Code, body)
	}
	// The matrix: docs serves 3 with 4 on its way; shop has only its
	// first release, merged. docs@3 is a rollback target, docs@2 never was.
	if !strings.Contains(body, `<tr data-app="docs">`) || !strings.Contains(body, `→ <a href="?release=docs%404%3aprod-eu%2fprod#release"`) ||
		!strings.Contains(body, `<span class="serving none">nothing serves</span>`) || strings.Count(body, `<span class="rollback-yes"`) != 2 ||
		!strings.Contains(body, "Not a rollback target") {
		t.Fatalf("matrix or rollback: %s", body)
	}
	w = get(t, h, "/?release="+url.QueryEscape(`<b id="injected">x</b>`))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `<b id="injected">`) || !strings.Contains(w.Body.String(), "&lt;b id=") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if csp := w.Header().Get("Content-Security-Policy"); csp != rh.PagePolicy || !strings.Contains(csp, "script-src 'self';") {
		t.Fatalf("policy %q", csp)
	}
	// The one script is the service's own, and no script is inline.
	if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="page.js" defer></script>`) {
		t.Fatalf("scripts: %s", body)
	}
	if js := get(t, h, "/page.js"); js.Code != http.StatusOK || js.Header().Get("Content-Type") != "text/javascript; charset=utf-8" ||
		!strings.Contains(js.Body.String(), "time[datetime]") {
		t.Fatalf("page.js: %d %q", js.Code, js.Header())
	}
	if w := get(t, h, "/page.js?x=1"); w.Code != http.StatusBadRequest {
		t.Fatalf("page.js with a parameter: %d", w.Code)
	}
	if w := get(t, h, "/?colour=red"); w.Code != http.StatusBadRequest {
		t.Fatalf("%d", w.Code)
	}
	if w := get(t, h, "/elsewhere"); w.Code != http.StatusNotFound {
		t.Fatalf("a path not the page: %d", w.Code)
	}
}
