package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// chromium finds Debian's chromium. Without it the test skips on a
// developer's machine and fails under CI, where the test setup installs it.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no chromium under CI: scripts/test-deps.sh installs it (%v)", err)
	}
	t.Skipf("no chromium (%v); scripts/test-deps.sh installs it", err)
	return ""
}

// markup is a failure message a release could carry: shown as text, it
// runs nothing and adds no element.
const markup = `<img id="injected" src=x onerror="document.title='injected'">`

// TestReleasePageInABrowser runs the service whole under its grant against
// records in the API server and loads its page in a headless Chromium: a
// row per release with its state's colour, the timeline of the release
// asked for, the four charts, what runs where, which releases are rollback
// targets, and every value with markup shown as text.
func TestReleasePageInABrowser(t *testing.T) {
	bin := chromium(t)
	cp := testenv.Shared(t)
	recordNS, kubeconfig := cp.GrantRecordsKubeconfig(t, rbacFile, "release-record")
	now := time.Now().UTC().Truncate(time.Second)
	release := func(app, version string, state releaserecord.State, merged, at, healthy time.Duration) releaserecord.Record {
		cluster := "prod-eu"
		if v, ok := strings.CutSuffix(version, "/us"); ok {
			version, cluster = v, "prod-us"
		}
		id, err := releaserecord.NewReleaseID(app, version, cluster, "prod")
		if err != nil {
			t.Fatal(err)
		}
		r := releaserecord.NewRecord(releaserecord.Release{ID: id, Image: "ghcr.io/acme/" + app + ":" + version}, now.Add(-merged))
		r.State, r.StateAt, r.LastFactAt, r.LastFactPhase = state, now.Add(-at), now.Add(-at), "Progressing"
		if healthy > 0 {
			r.HealthyAt = now.Add(-healthy)
		}
		return r
	}
	aborted := release("docs", "2.0.0", releaserecord.StateAborted, 3*time.Hour, 2*time.Hour, 0)
	aborted.LastError, aborted.LastFactPhase, aborted.EmittedLive = markup, "Degraded", []string{"deploying", "failed.aborted"}
	aborted.GitURL, aborted.GitRevision = "https://github.com/acme/docs", "9f3c2a1"
	aborted.ObjectGeneration, aborted.PodHash = "OCIRepository/apps/project-docs=4", "web=5d7f,worker=8a2c"
	// A Project's release on the Flux path: its pinned digest, the unit and
	// Canaries it moved, held by the gate after Flagger failed it.
	aborted.Image = "sha256:" + strings.Repeat("9f", 32)
	aborted.Objects, aborted.Held = "Canary/docs/web,Canary/docs/worker,Kustomization/flux-system/project-docs", "analysis-failed"
	syncFailed := release("docs", "2.1.0/us", releaserecord.StateSyncFailed, 20*time.Minute, 15*time.Minute, 0)
	syncFailed.LastError, syncFailed.LastFactPhase = "kustomize build: missing resource deployment.yaml", "SyncFailed"
	// Flux says a release whose Canary Flagger failed a sync failure (its
	// health checks fail), and the gate holds it.
	heldBack := release("api", "3.2.0", releaserecord.StateSyncFailed, 30*time.Minute, 25*time.Minute, 0)
	heldBack.LastError, heldBack.LastFactPhase, heldBack.Held = "HealthCheckFailed: Canary/api/web failed", "Held", "analysis-failed"
	recs := []releaserecord.Record{
		heldBack,
		release("docs", "1.0.0", releaserecord.StateSuperseded, 5*time.Hour, time.Hour, 4*time.Hour),
		aborted,
		release("docs", "2.0.1", releaserecord.StateHealthy, 90*time.Minute, time.Hour, time.Hour),
		release("shop", "9.1.0", releaserecord.StateProgressing, 10*time.Minute, 5*time.Minute, 0),
		release("docs", "2.0.1/us", releaserecord.StateHealthy, 100*time.Minute, 70*time.Minute, 70*time.Minute),
		syncFailed,
	}
	for _, r := range recs {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name(), Namespace: recordNS, Labels: r.Labels()}, Data: r.Data()}
		if _, err := cp.Kube.CoreV1().ConfigMaps(recordNS).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Emit mode names the sink the page shows; with no fact taken, nothing
	// is sent to it.
	s := start(t, map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "RECORD_NAMESPACE": recordNS, "FACTS_MODE": "emit",
		"CDEVENTS_SINK": "https://events.example/cdevents?key=not-shown", "OBJECT_LINK": objectLink, "FLUX_OBSERVE": "false", "KUBECONFIG": kubeconfig})
	defer s.end()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.Env("TZ=Asia/Tokyo"))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first action starts the browser, so it has no deadline of its own.
	// A reload while the test reads would race it: the page reloads every
	// five minutes here, and says so.
	page := "http://" + s.addr + "/?refresh=300&release=" + url.QueryEscape(aborted.ReleaseID)
	if err := chromedp.Do(browser, chromedp.Navigate(page)); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}

	rows := eval(`Array.from(document.querySelectorAll('#releases tbody tr')).map(r => r.dataset.release + ' ' + r.querySelector('.state').textContent).join('|')`)
	if want := "shop@9.1.0:prod-eu/prod progressing|docs@2.1.0:prod-us/prod sync-failed|api@3.2.0:prod-eu/prod sync-failed|docs@2.0.1:prod-eu/prod healthy|docs@2.0.1:prod-us/prod healthy|" +
		"docs@2.0.0:prod-eu/prod aborted|docs@1.0.0:prod-eu/prod superseded"; rows != want {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	colours := eval(`['healthy','aborted','progressing','superseded'].map(s => getComputedStyle(document.querySelector('#releases .state-' + s)).backgroundColor).join('|')`)
	if colours != "rgb(46, 125, 50)|rgb(198, 40, 40)|rgb(21, 101, 192)|rgb(117, 117, 117)" {
		t.Fatalf("state colours %q", colours)
	}
	if lead := eval(`document.querySelector('#releases tr[data-release="docs@2.0.1:prod-eu/prod"] td:nth-child(6)').textContent`); lead != "30 min" {
		t.Fatalf("merged to healthy %q", lead)
	}
	// What runs where: docs serves 2.0.1 in both places (2.0.0 failed before
	// it), 2.1.0 failed to sync in one with its reason; shop's first release
	// is on its way in one place with nothing serving yet, and is in no other.
	matrix := eval(`Array.from(document.querySelectorAll('#matrix tbody tr')).map(r => r.dataset.app + ': ' + Array.from(r.querySelectorAll('td')).map(c => c.innerText.replace(/\s+/g, ' ').trim()).join(' ; ')).join('|')`)
	if !regexp.MustCompile(`^api: nothing serves → 3\.2\.0 sync-failed since .+ \(25 min( \d+ s)? ago\) held: analysis-failed HealthCheckFailed: Canary/api/web failed ; —\|` +
		`docs: 2\.0\.1 healthy ; 2\.0\.1 healthy → 2\.1\.0 sync-failed since .+ \(15 min( \d+ s)? ago\) kustomize build: missing resource deployment\.yaml\|` +
		`shop: nothing serves → 9\.1\.0 progressing since .+ \(5 min( \d+ s)? ago\) ; —$`).MatchString(matrix) {
		t.Fatalf("matrix %q", matrix)
	}
	rollback := eval(`Array.from(document.querySelectorAll('#releases tbody tr')).map(r => r.querySelector('td.rollback').textContent).join('|')`)
	if rollback != "no|no|no|eligible|eligible|no|eligible" {
		t.Fatalf("rollback targets %q", rollback)
	}
	if charts := eval(`Array.from(document.querySelectorAll('.chart h3')).map(h => h.textContent + ' ' + h.nextElementSibling.textContent).join('|')`); !strings.Contains(charts, "Change failure rate 25%") ||
		strings.Count(charts, "|") != 3 {
		t.Fatalf("charts %q", charts)
	}
	timeline := eval(`document.querySelector('#release .timeline').innerText`)
	if !strings.Contains(timeline, "first failure: "+markup) || !strings.Contains(timeline, "last fact: Degraded") ||
		!strings.Contains(timeline, "events sent: deploying, failed.aborted") {
		t.Fatalf("timeline %q", timeline)
	}
	links := eval(`document.querySelector('#release a.commit').href + ' ' + document.querySelector('#release .object').textContent + ' ' + document.querySelector('#release .members').textContent`)
	if links != "https://github.com/acme/docs/commit/9f3c2a1 OCIRepository/apps/project-docs at generation 4 web, worker" {
		t.Fatalf("links %q", links)
	}
	// The gate's hold, where the release is shown: its row and its own view.
	if held := eval(`document.querySelector('#releases tr[data-release="docs@2.0.0:prod-eu/prod"] .held').textContent + ' | ' + document.querySelector('#release .held').textContent`); held != "held: analysis-failed | held: analysis-failed" {
		t.Fatalf("held %q", held)
	}
	// Links out: each object the release moved through OBJECT_LINK, the
	// repository's GitHub Deployments, and each event with its type and id.
	objects := eval(`Array.from(document.querySelectorAll('#release .linked-object')).map(a => a.textContent + '=' + a.href).join('|')`)
	if want := "OCIRepository/apps/project-docs=https://cluster-ui.example/prod-eu/OCIRepository/apps/project-docs|" +
		"Canary/docs/web=https://cluster-ui.example/prod-eu/Canary/docs/web|Canary/docs/worker=https://cluster-ui.example/prod-eu/Canary/docs/worker|" +
		"Kustomization/flux-system/project-docs=https://cluster-ui.example/prod-eu/Kustomization/flux-system/project-docs"; objects != want {
		t.Fatalf("objects %q, want %q", objects, want)
	}
	if d := eval(`document.querySelector('#release .deployment a').href`); d != "https://github.com/acme/docs/deployments" {
		t.Fatalf("GitHub Deployments %q", d)
	}
	events := eval(`document.querySelector('#release .events').innerText.replace(/\s+/g, ' ').trim()`)
	failedID := releaserecord.EventID(aborted.ReleaseID, releaserecord.Event{Type: releaserecord.EventFailed, Outcome: "aborted"})
	if !strings.HasPrefix(events, "to https://events.example/cdevents: dev.cdeventsx.delivery-release.deploying.0.1.0 id ") ||
		!strings.HasSuffix(events, "dev.cdeventsx.delivery-release.failed.0.1.0 id "+failedID) {
		t.Fatalf("events %q", events)
	}
	if n := eval(`String(document.querySelectorAll('#injected, img').length) + ' ' + document.title`); n != "0 Releases" {
		t.Fatalf("the markup became elements or ran: %q", n)
	}
	// Times in the reader's zone, written by the service's own script under
	// its policy; the UTC time stays as the title, the relative beside it.
	tokyo := aborted.StateAt.In(time.FixedZone("JST", 9*3600)).Format("2006-01-02 15:04:05") + " Asia/Tokyo"
	if at := eval(`(e => e.textContent + ' | ' + e.title + ' | ' + e.nextElementSibling.textContent)(document.querySelector('#releases tr[data-release="docs@2.0.0:prod-eu/prod"] time'))`); at != tokyo+" | "+aborted.StateAt.Format("2006-01-02 15:04:05Z")+" | (2 h ago)" {
		t.Fatalf("the time %q, want it at %s", at, tokyo)
	}
	if refresh := eval(`document.querySelector('meta[http-equiv=refresh]').content`); refresh != "300" {
		t.Fatalf("reloads every %q", refresh)
	}
	screenshot(ctx, t, "release-page.png")

	// The filters, through the form as a person uses it: shop's releases
	// alone, and the matrix of shop alone.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`form.filters input[name=app]`), "shop"),
		chromedp.Submit(chromedp.CSS(`form.filters`)), chromedp.WaitVisible(chromedp.CSS(`form.filters input[value=shop]`))); err != nil {
		t.Fatal(err)
	}
	if rows := eval(`Array.from(document.querySelectorAll('#releases tbody tr')).map(r => r.dataset.release).join('|') + ' ' + document.querySelectorAll('#matrix tbody tr').length`); rows != "shop@9.1.0:prod-eu/prod 1" {
		t.Fatalf("filtered to shop: %q", rows)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+s.addr+"/?refresh=0&state=healthy&cluster=prod-us")); err != nil {
		t.Fatal(err)
	}
	if rows := eval(`Array.from(document.querySelectorAll('#releases tbody tr')).map(r => r.dataset.release).join('|')`); rows != "docs@2.0.1:prod-us/prod" {
		t.Fatalf("filtered to healthy in prod-us: %q", rows)
	}

	// A narrow window, a phone's: the page itself does not scroll sideways;
	// the wide tables scroll inside their own box.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	if wide := eval(`String(document.documentElement.scrollWidth - window.innerWidth)`); wide != "0" {
		t.Fatalf("the page is %s px wider than a narrow window: %s", wide, eval(`Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > window.innerWidth && !e.closest('.scroll')).map(e => e.tagName + '.' + e.className + ':' + Math.round(e.getBoundingClientRect().right)).slice(0, 12).join(' ')`))
	}
	screenshot(ctx, t, "release-page-narrow.png")

	// A release id asked for with markup in it is shown as text too.
	asked := `<b id="injected">x</b>`
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+s.addr+"/?release="+url.QueryEscape(asked))); err != nil {
		t.Fatal(err)
	}
	if missing := eval(`document.querySelector('#release .missing').textContent`); !strings.Contains(missing, asked) {
		t.Fatalf("the asked release %q", missing)
	}
	if n := eval(`String(document.querySelectorAll('#injected, b').length)`); n != "0" {
		t.Fatalf("%s elements injected", n)
	}
}

// objectLink is an OBJECT_LINK: a cluster UI's page of each object.
const objectLink = "https://cluster-ui.example/{cluster}/{kind}/{namespace}/{name}"

// ScreenshotDirVariable names the folder the browser test keeps its
// screenshots in, so CI uploads them from one known place; unset, they go
// to the test's output folder (go test -artifacts -outputdir DIR keeps it).
const ScreenshotDirVariable = "RELEASE_PAGE_SCREENSHOTS"

// screenshot saves the page as a PNG (quality 100; less is a JPEG) in the
// folder RELEASE_PAGE_SCREENSHOTS names, else the test's output folder.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(ScreenshotDirVariable)
	if dir == "" {
		dir = t.ArtifactDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
