package releasehistory_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

const headlamp = "https://headlamp.example/c/{cluster}/{kind}/{namespace}/{name}"

func TestObjectURL(t *testing.T) {
	for _, tc := range []struct{ template, kind, name, want string }{
		{"", "Canary", "api", ""}, // no template: no link
		{headlamp, "Canary", "api", "https://headlamp.example/c/prod-eu/Canary/docs/api"},
		{"https://ui.example/{kind}?ns={namespace}&n={name}", "Kustomization", "project-docs", "https://ui.example/Kustomization?ns=docs&n=project-docs"},
		// A value is one segment: it cannot climb, nor add a query.
		{headlamp, "Canary", "a/../../b?x=1", "https://headlamp.example/c/prod-eu/Canary/docs/a%2F..%2F..%2Fb%3Fx=1"},
		{"javascript:alert('{name}')", "Canary", "api", ""},
		{"https://user:pw@ui.example/{name}", "Canary", "api", ""},
		{"/relative/{name}", "Canary", "api", ""},
		{"https://{name}/x", "Canary", "api", "https://api/x"},
	} {
		if got := rh.ObjectURL(tc.template, "prod-eu", tc.kind, "docs", tc.name); got != tc.want {
			t.Errorf("ObjectURL(%q, %q) = %q, want %q", tc.template, tc.name, got, tc.want)
		}
	}
	for template, ok := range map[string]bool{"": true, headlamp: true, "ftp://x/{name}": false, "{name}": false, "https://a:b@x/": false} {
		if err := rh.CheckObjectLink(template); (err == nil) != ok {
			t.Errorf("CheckObjectLink(%q) = %v, want ok %v", template, err, ok)
		}
	}
}

func TestObjectsOf(t *testing.T) {
	r := rec(t, "4", rr.StateProgressing, ago(time.Hour), ago(time.Hour))
	r.ObjectGeneration = "OCIRepository/flux-system/project-docs/3f1c0000-0000-4000-8000-000000000000=7"
	r.Objects = "Canary/docs/api,Kustomization/flux-system/project-docs,OCIRepository/flux-system/project-docs"
	var got []string
	for _, o := range rh.ObjectsOf(r, "") {
		got = append(got, o.String()+"|"+o.URL)
	}
	if want := "OCIRepository/flux-system/project-docs||Canary/docs/api||Kustomization/flux-system/project-docs|"; strings.Join(got, "|") != want {
		t.Errorf("objects %q", got)
	}
	if o := rh.ObjectsOf(r, headlamp); len(o) != 3 || o[1].URL != "https://headlamp.example/c/prod-eu/Canary/docs/api" {
		t.Errorf("linked %+v", o)
	}
	if o := rh.ObjectsOf(rec(t, "5", rr.StateMerged, now, now), headlamp); len(o) != 0 {
		t.Errorf("a record naming nothing: %+v", o)
	}
}

func TestDeploymentsURL(t *testing.T) {
	digest := "sha256:" + strings.Repeat("1", 64)
	for _, tc := range []struct{ gitURL, image, want string }{
		{"https://github.com/acme/docs", digest, "https://github.com/acme/docs/deployments"},
		{"https://github.com/acme/docs", "ghcr.io/acme/docs:3", ""}, // an image: an Argo release, no Reporter
		{"https://gitlab.example/acme/docs", digest, ""},            // no GitHub Deployments
		{"https://github.com/acme/docs/extra", digest, ""},
		{"https://github.com/acme/..", digest, ""},
		{"https://github.com/acme/docs\"><b>", digest, ""},
		{"", digest, ""},
	} {
		r := rr.Record{GitURL: tc.gitURL, Image: tc.image}
		if got := rh.DeploymentsURL(r); got != tc.want {
			t.Errorf("DeploymentsURL(%q, %q) = %q, want %q", tc.gitURL, tc.image, got, tc.want)
		}
	}
}

// TestSentOf: each event is shown with the type and id it went out with.
func TestSentOf(t *testing.T) {
	r := rec(t, "2", rr.StateAborted, ago(time.Hour), ago(time.Hour))
	r.EmittedLive, r.EmittedShadow = []string{"deploying", "failed.aborted"}, []string{"deployed", "not-an-event"}
	sent := rh.SentOf(r)
	if len(sent) != 3 || sent[2].Key != "deployed" || !sent[2].Shadow || sent[0].Shadow {
		t.Fatalf("%+v", sent)
	}
	for _, s := range sent {
		e := rr.Event{Type: rr.EventType(strings.Split(s.Key, ".")[0])}
		if _, outcome, ok := strings.Cut(s.Key, "."); ok {
			e.Outcome = outcome
		}
		ev, err := rr.CDEvent(r, e, now)
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetId() != s.ID || rr.TypeOf(ev).String() != s.Type {
			t.Errorf("%s shown as %s %s; it went out as %s %s", s.Key, s.Type, s.ID, rr.TypeOf(ev), ev.GetId())
		}
	}
	if got := rh.SinkShown("https://events.example/in?key=secret#x"); got != "https://events.example/in" {
		t.Errorf("sink shown %q", got)
	}
}

// TestPageLinksOut: the gate's hold in the matrix, the row and the
// release's own view; the objects, the GitHub Deployments and the events,
// every value escaped, and the policy as strict as before.
func TestPageLinksOut(t *testing.T) {
	recs := history(t)
	held := recs[3] // docs@4, progressing
	held.Held = "analysis-failed"
	held.Image = "sha256:" + strings.Repeat("4", 64)
	held.GitURL = "https://github.com/acme/docs"
	held.Objects = `Canary/docs/api,Kustomization/flux-system/project-docs`
	held.EmittedLive = []string{"deploying"}
	recs[3] = held
	served := recs[2] // docs@3, healthy: a hold said before is not shown
	served.Held = "stale-proof"
	recs[2] = served
	a := &rh.API{Cache: rh.NewCache(&fakeRecords{recs: recs}, 5*time.Second, (&fakeClock{at: now}).Now), KeepHealthy: 5,
		Logger: slog.New(slog.DiscardHandler), Now: (&fakeClock{at: now}).Now,
		Out: rh.Out{ObjectLink: "https://ui.example/{kind}/{namespace}/{name}?from=<b>", Sink: "https://events.example/in?key=secret"}}
	mux := http.NewServeMux()
	a.Routes(mux)
	w := get(t, mux, "/?release=docs@4:prod-eu/prod")
	body := w.Body.String()
	if w.Code != http.StatusOK || w.Header().Get("Content-Security-Policy") != rh.PagePolicy {
		t.Fatalf("%d %q", w.Code, w.Header())
	}
	for _, want := range []string{
		`<span class="held">held: analysis-failed</span></span>`,                  // the matrix's cell
		`progressing</span> <span class="held">held: analysis-failed</span></td>`, // the row
		`progressing</span> <span class="held">held: analysis-failed</span></p>`,  // the release
		`<a class="linked-object" href="https://ui.example/Canary/docs/api?from=%3cb%3e" rel="noreferrer">Canary/docs/api</a>`,
		`<a href="https://github.com/acme/docs/deployments" rel="noreferrer">`,
		`to <span class="sink">https://events.example/in</span>`,
		`<code>dev.cdeventsx.delivery-release.deploying.0.1.0</code> id <code>` + rr.EventID(held.ReleaseID, rr.Event{Type: rr.EventDeploying}) + `</code>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not hold %s", want)
		}
	}
	if strings.Contains(body, "stale-proof") || strings.Contains(body, "secret") || strings.Contains(body, "<b>") {
		t.Errorf("a hold of a release that serves, the sink's key or markup shown: %s", body)
	}
}

// FuzzObjectURL holds an object's link to its template whatever the
// object's names: an http(s) address of the template's host, the names
// each kept in their own path segment, or no link at all.
func FuzzObjectURL(f *testing.F) {
	for _, seed := range [][3]string{{"Canary", "docs", "api"}, {"Kind", "a/../b", "x?y=1#z"}, {"", "", ""}, {"K", "%2F", "\x00<b>"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, kind, namespace, name string) {
		got := rh.ObjectURL(headlamp, "prod-eu", kind, namespace, name)
		if got == "" {
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "https" || u.Host != "headlamp.example" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("%q: %v", got, err)
		}
		if segments := strings.Split(u.EscapedPath(), "/"); len(segments) != 6 {
			t.Fatalf("%q has %d segments", got, len(segments))
		}
	})
}
