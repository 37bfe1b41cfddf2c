package reporter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const logURL = "https://ci.example/acme/estate/actions/runs/7"

// standInGate serves GET /releases in the gate's published shape from the
// warmups a test sets; down makes it drop every connection unanswered.
type standInGate struct {
	srv     *httptest.Server
	mu      sync.Mutex
	warmups map[string]releasepath.Warmup
	down    bool
	asked   int
}

func newStandInGate(t testing.TB) *standInGate {
	g := &standInGate{warmups: map[string]releasepath.Warmup{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *standInGate) set(key string, w releasepath.Warmup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.warmups[key] = w
}

func (g *standInGate) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

func (g *standInGate) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	if g.down {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/releases" {
		http.NotFound(w, r)
		return
	}
	apps := []map[string]any{}
	for key, wu := range g.warmups {
		ns, app, _ := strings.Cut(key, "/")
		var failed any
		if wu.Failed != nil {
			failed = map[string]any{"request": wu.Failed.Request, "status": wu.Failed.Status}
		}
		apps = append(apps, map[string]any{
			"namespace": ns, "application": app, "members": []any{}, "migration": nil, "unreadable": nil,
			"record": map[string]any{"serving": wu.Revision, "pinned": nil, "since": nil, "migrated": nil,
				"warmup": map[string]any{"revision": wu.Revision, "warmed": wu.Warmed, "failed": failed}},
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"readAt": time.Now().UTC().Format(time.RFC3339), "truncated": false, "applications": apps})
}

// world is a cluster, a fake GitHub and a stand-in gate, with a Reporter
// reading them under its own grant.
type world struct {
	t             testing.TB
	ctx           context.Context
	cp            *testenv.ControlPlane
	cfg           *rest.Config
	fluxNS, appNS string
	fake          *fakegithub.Server
	gate          *standInGate
	logs          *testenv.LogBuffer
}

func newWorld(t testing.TB) *world {
	t.Helper()
	cp := testenv.Shared(t)
	// The Reporter's own RBAC file, applied as it is, so the Reporter runs
	// under exactly the grant that file gives.
	cfg := cp.Grant(t, "../../deploy/reporter/rbac.yaml", "delivery-system", "reporter")
	return &world{
		t: t, ctx: context.Background(), cp: cp, cfg: cfg,
		fluxNS: cp.Namespace(t), appNS: cp.Namespace(t),
		fake: fakegithub.New(t), gate: newStandInGate(t), logs: &testenv.LogBuffer{},
	}
}

// reporter is a freshly started Reporter: no conditional-request cache, no memory.
func (w *world) reporter() *Reporter {
	w.t.Helper()
	gh, err := githubapp.New(githubapp.Config{AppID: w.fake.AppID, InstallationID: w.fake.InstallationID,
		PrivateKey: w.fake.PrivateKeyPEM, APIURL: w.fake.URL()})
	if err != nil {
		w.t.Fatal(err)
	}
	kube, err := releasepath.NewKube(w.cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return &Reporter{Namespace: w.fluxNS, Cluster: kube, Deployments: NewGitHub(gh),
		Gate: releasepath.NewGateClient(w.gate.srv.URL), Logger: slog.New(slog.NewJSONHandler(w.logs, nil))}
}

func (w *world) pass(r *Reporter) {
	w.t.Helper()
	if err := r.Pass(w.ctx); err != nil {
		w.t.Fatalf("pass: %v\nlogs:\n%s", err, w.logs)
	}
}

func (w *world) apply(format string, args ...any) {
	w.t.Helper()
	if _, err := w.cp.Apply(w.ctx, fmt.Appendf(nil, format, args...)); err != nil {
		w.t.Fatal(err)
	}
}

// unit is a Project's Kustomization and the OCIRepository it applies.
type unit struct {
	// repo is the Rollout annotations' repository; a unit without one
	// carries no Rollout annotation.
	project, repo, version, url string
	pin                         string
	// rolloutDigest is the digest the Rollout annotations name; pin when
	// empty.
	rolloutDigest          string
	applied, attempted     string
	ready, reason, message string
	// source, when set, is the OCIRepository's Ready condition.
	source *fluxunit.SourceReady
	// canaries are the members whose Canary and Deployment the unit
	// applied, in the application namespace.
	canaries []string
}

func (w *world) applyUnit(u unit) {
	w.t.Helper()
	w.apply("%s", w.unitYAML(u))
}

func (w *world) unitYAML(u unit) string {
	fu := fluxunit.Unit{Namespace: w.fluxNS, Project: u.project, Pin: u.pin, Repository: u.repo, Version: u.version, URL: u.url,
		Digest: u.rolloutDigest, Applied: u.applied, Attempted: u.attempted, Ready: u.ready, Reason: u.reason, Message: u.message,
		Source: u.source}
	for _, c := range u.canaries {
		fu.Inventory = append(fu.Inventory, fluxunit.Canary(w.appNS, c), fluxunit.Deployment(w.appNS, c))
	}
	return fu.YAML()
}

// canary is a member's Canary and its two Deployments.
type canary struct {
	name, app, rev, phase string
	iterations            int
	settled               bool
	changedAt             time.Time
	message               string
}

func (w *world) applyCanary(c canary) {
	w.t.Helper()
	w.apply("%s", w.canaryYAML(c))
}

func (w *world) canaryYAML(c canary) string {
	promoted, primary := "spec-new", "img:new"
	if !c.settled {
		promoted, primary = "spec-old", "img:old"
	}
	if c.changedAt.IsZero() {
		c.changedAt = time.Now()
	}
	out := fmt.Sprintf(`---
apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  service: {port: 8080, targetPort: http, portName: http}
  analysis:
    interval: 30s
    iterations: 4
    threshold: 3
    webhooks:
      - {name: may-promote, type: confirm-promotion, url: "http://release-gate.delivery-system.svc.cluster.local:8080/may-promote", metadata: {application: %[3]s, process: %[1]s, revision: "%[4]s"}}
status:
  phase: %[5]s
  iterations: %[6]d
  lastAppliedSpec: spec-new
  lastPromotedSpec: %[7]s
  lastTransitionTime: "%[10]s"
  conditions:
    - {type: Promoted, status: "Unknown", reason: %[5]s, message: %[9]q, lastUpdateTime: "%[8]s", lastTransitionTime: "%[8]s"}
`, c.name, w.appNS, c.app, c.rev, c.phase, c.iterations, promoted, c.changedAt.UTC().Format(time.RFC3339), c.message,
		// Flagger rewrites status.lastTransitionTime on every tick of a
		// failed Canary; the Promoted condition keeps when the phase changed.
		time.Now().UTC().Format(time.RFC3339))
	for _, d := range []struct{ name, image string }{{c.name, "img:new"}, {c.name + "-primary", primary}} {
		out += fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {matchLabels: {app.kubernetes.io/instance: %[1]s}}
  template:
    metadata: {labels: {app.kubernetes.io/instance: %[1]s}}
    spec:
      containers: [{name: app, image: "%[3]s"}]
`, d.name, w.appNS, d.image)
	}
	return out
}

// deployment creates the Rollout's Deployment as the workflow does, with a
// first status carrying the run's log_url.
func (w *world) deployment(repo, project, version string) int64 {
	id := w.fake.AddDeployment(repo, fakegithub.NewDeployment{Ref: "v" + version, SHA: "abc123", Environment: "production",
		ProductionEnvironment: true, Payload: json.RawMessage(fmt.Sprintf(`{"project":%q,"version":%q}`, project, version))})
	w.fake.AddStatus(repo, id, fakegithub.Status{State: "queued", Description: "pin moved", LogURL: logURL})
	return id
}

// latest is a Deployment's latest status; it fails the test when there is none.
func (w *world) latest(repo string, id int64) fakegithub.Status {
	w.t.Helper()
	all := w.fake.Statuses(repo, id)
	if len(all) == 0 {
		w.t.Fatalf("Deployment %d has no status", id)
	}
	return all[len(all)-1]
}

func fakegithubStatus(state string) fakegithub.Status {
	return fakegithub.Status{State: state, Description: "set by hand", LogURL: logURL}
}

// The revisions and pins the tests release.
const (
	pin    = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	oldPin = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	revA   = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	revB   = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)
