package releasegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasegate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// replacingCluster puts a new Job in place of the one the round read just
// before the round patches it, in one namespace.
type replacingCluster struct {
	*releasegate.Kube
	t   testing.TB
	cp  *testenv.ControlPlane
	app *app
}

func (r replacingCluster) StartJob(ctx context.Context, j releasegate.JobStart) error {
	if j.Namespace == r.app.ns {
		background := metav1.DeletePropagationBackground
		if err := r.cp.Kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			r.t.Errorf("delete Job %s: %v", j.Name, err)
		}
		again := *r.app
		again.record = nil // the record is the gate's, written this round
		again.apply(r.t, r.cp)
	}
	return r.Kube.StartJob(ctx, j)
}

// logEntries are the JSON log lines of namespace ns with message msg.
func logEntries(t testing.TB, logs, ns, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if entry["namespace"] == ns && entry["msg"] == msg {
			out = append(out, entry)
		}
	}
	return out
}

func digestsOf(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// TestRoundsOverSeveralApplications runs whole rounds against the real API
// server under the gate's own grant: an Application that serves and is warmed
// up through a TLS edge on loopback, one whose inputs do not parse, one of
// the same id in a second namespace, a migration started under its proof, a
// held release undone, one whose undo is refused, and a Job replaced between
// read and patch. Then the gate restarts, and its record carries the state.
func TestRoundsOverSeveralApplications(t *testing.T) {
	cp := testenv.Own(t)
	cfg, counter := testenv.Counting(cp.Grant(t, gateRBAC, gateNS, gateSA))
	kube, err := releasegate.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nsA, nsB, nsC, nsD, nsE := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	ago := func(d time.Duration) *time.Time { at := time.Now().Add(-d).UTC().Truncate(time.Second); return &at }

	serving := &app{ns: nsA, name: "auth", migration: true, testedAgainst: prevRev,
		members: []member{
			{process: "auth-api", phase: "Succeeded", applied: "api-2", promoted: "api-2", image: "api:2", primaryImage: "api:2",
				hosts: `["auth.example.com"]`, paths: `["/","/api"]`},
			{process: "auth-ui", phase: "Succeeded", applied: "ui-1", promoted: "ui-1", image: "ui:1", primaryImage: "ui:1",
				hosts: `["auth.example.com","id.example.com"]`, paths: `["/"]`},
		},
		jobs: []job{{name: "auth-migration-" + tag, complete: true}, {name: "auth-migration-down-" + tag, suspended: true}}}
	broken := &app{ns: nsA, name: "billing", inputs: `{"members":[]}`}
	servingFailing := &app{ns: nsA, name: "docs",
		members: []member{{process: "docs", phase: "Initialized", applied: "d-1", promoted: "d-1", image: "docs:1", primaryImage: "docs:1",
			hosts: `["docs.example.com"]`, paths: `["/broken","/after"]`}}}
	servingPrivate := &app{ns: nsA, name: "wiki",
		members: []member{{process: "wiki", phase: "Succeeded", applied: "w-1", promoted: "w-1", image: "wiki:1", primaryImage: "wiki:1",
			hosts: `["wiki.private.example.com"]`, paths: `["/"]`}}}
	sameID := &app{ns: nsB, name: "auth", migration: true, testedAgainst: prevRev,
		members: []member{
			{process: "auth-api", phase: "Progressing", applied: "api-3", promoted: "api-1", image: "api:3", primaryImage: "api:1"},
			{process: "auth-ui", phase: "Succeeded", applied: "ui-1", promoted: "ui-1", image: "ui:1", primaryImage: "ui:1"},
		},
		jobs: []job{{name: "auth-migration-" + tag, suspended: true}}}
	proven := &app{ns: nsC, name: "shop", migration: true, testedAgainst: prevRev,
		members: []member{{process: "shop-api", phase: "Waiting", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
		jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
		record:  &release.Record{Namespace: nsC, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
	failed := &app{ns: nsD, name: "pay", migration: true, testedAgainst: prevRev,
		members: []member{{process: "pay-api", phase: "Failed", applied: "p-2", promoted: "p-1", image: "pay:2", primaryImage: "pay:1",
			transitioned: time.Now().Add(-time.Minute)}},
		jobs: []job{{name: "pay-migration-" + tag, complete: true}, {name: "pay-migration-down-" + tag, suspended: true}},
		record: &release.Record{Namespace: nsD, Application: "pay", Serving: prevRev, Primaries: digestsOf("pay-api", "p-1"),
			Pinned: rev, Since: ago(10 * time.Minute)}}
	refused := &app{ns: nsD, name: "cart", migration: true, testedAgainst: prevRev, nonTransactional: true,
		members: []member{{process: "cart-api", phase: "Failed", applied: "c-2", promoted: "c-1", image: "cart:2", primaryImage: "cart:1",
			transitioned: time.Now().Add(-time.Minute)}},
		jobs: []job{{name: "cart-migration-" + tag, complete: true}, {name: "cart-migration-down-" + tag, suspended: true}},
		record: &release.Record{Namespace: nsD, Application: "cart", Serving: prevRev, Primaries: digestsOf("cart-api", "c-1"),
			Pinned: rev, Since: ago(10 * time.Minute)}}
	raced := &app{ns: nsE, name: "shop", migration: true, testedAgainst: prevRev,
		members: []member{{process: "shop-api", phase: "Waiting", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
		jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
		record:  &release.Record{Namespace: nsE, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
	for _, a := range []*app{serving, broken, servingFailing, servingPrivate, sameID, proven, failed, refused, raced} {
		a.apply(t, cp)
	}

	e := newEdge(t)
	reconciler, logs := loggedReconciler(replacingCluster{Kube: kube, t: t, cp: cp, app: raced}, e.warmer())
	if last := reconciler.Last(); !last.Reconciled.IsZero() {
		t.Fatalf("reconciled before the first round: %v", last.Reconciled)
	}
	counter.Reset()
	if err := reconciler.Round(context.Background()); err != nil {
		t.Fatalf("round: %v\n%s", err, logs)
	}
	for _, r := range counter.Requests() {
		if strings.HasPrefix(r, "GET") && strings.Count(r, "/") > 5 && !strings.Contains(r, "/pods") {
			t.Errorf("the round read one object by name: %s", r)
		}
	}

	// Inputs that do not parse: that Application is unanswerable, the round
	// went on.
	if u := logEntries(t, logs.String(), nsA, "application unanswerable"); len(u) != 1 || u[0]["application"] != "billing" ||
		!strings.Contains(u[0]["cause"].(string), "schema") {
		t.Errorf("unanswerable log lines: %v", u)
	}
	if _, ok := readRecord(t, cp, nsA, "billing"); ok {
		t.Error("a record was written for inputs that do not parse")
	}

	// The same id in a second namespace: its own record, held for a proof
	// nothing serving backs; the first namespace's record untouched.
	recB, ok := readRecord(t, cp, nsB, "auth")
	if !ok || recB.Namespace != nsB || recB.Serving != "" || recB.Pinned != rev || recB.Since == nil {
		t.Fatalf("the second namespace's record: %+v", recB)
	}
	if held := logEntries(t, logs.String(), nsB, "release held"); len(held) != 1 || held[0]["reason"] != "stale-proof" ||
		held[0]["pinned"] != rev || held[0]["serving"] != "" || held[0]["level"] != "WARN" {
		t.Errorf("held log lines of the second namespace: %v", held)
	}
	if !suspended(t, cp, nsB, "auth-migration-"+tag) {
		t.Error("a migration under a stale proof was started")
	}

	// Proven: started with a patch naming the version read.
	if suspended(t, cp, nsC, "shop-migration-"+tag) {
		t.Errorf("the proven migration was not started\n%s", logs)
	}
	if s := logEntries(t, logs.String(), nsC, "migration started"); len(s) != 1 || s[0]["job"] != "shop-migration-"+tag {
		t.Errorf("started log lines: %v", s)
	}

	// Held after the gate first saw the revision, migrated, no new copy
	// left: undone. Non-transactional: left applied, and said so.
	if suspended(t, cp, nsD, "pay-migration-down-"+tag) {
		t.Errorf("the held release was not undone\n%s", logs)
	}
	held := logEntries(t, logs.String(), nsD, "release held")
	if len(held) != 2 || held[0]["reason"] != "analysis-failed" || held[0]["serving"] != prevRev {
		t.Errorf("held log lines: %v", held)
	}
	if !suspended(t, cp, nsD, "cart-migration-down-"+tag) {
		t.Error("a non-transactional release was undone")
	}
	if n := logEntries(t, logs.String(), nsD, "migration not undone"); len(n) != 1 || n[0]["application"] != "cart" ||
		n[0]["condition"] != "non-transactional" || n[0]["tag"] != prevRev[7:19] || n[0]["level"] != "ERROR" {
		t.Errorf("not-undone log lines: %v", n)
	}

	// Replaced between read and patch: the patch failed, the new Job waits.
	if !suspended(t, cp, nsE, "shop-migration-"+tag) {
		t.Error("a Job put in place of the one read was started")
	}
	if u := logEntries(t, logs.String(), nsE, "application unanswerable"); len(u) != 1 || !strings.Contains(u[0]["cause"].(string), "changed since read") {
		t.Errorf("the replaced Job's log lines: %v", u)
	}
	if !errors.Is(kube.StartJob(context.Background(), releasegate.JobStart{Namespace: nsE, Name: "shop-migration-" + tag, ResourceVersion: "1", UID: "x"}), releasegate.ErrConflict) {
		t.Error("a patch naming another version was not refused as a conflict")
	}

	// The warmups ran beside the round; the next round writes their
	// verdicts.
	reconciler.WaitWarmups()
	round(t, reconciler, logs)
	// Serving: recorded with Flagger's digests and warmed up once through
	// every host of every member.
	rec, ok := readRecord(t, cp, nsA, "auth")
	if !ok || rec.Serving != rev || rec.Pinned != "" || rec.Primaries["auth-api"] != "api-2" || rec.Warmup == nil || !rec.Warmup.Warmed {
		t.Fatalf("the serving Application's record: %+v %+v\n%s", rec, rec.Warmup, logs)
	}
	for _, hp := range []string{"auth.example.com/", "auth.example.com/api", "id.example.com/"} {
		if e.hit(hp) != 1 {
			t.Errorf("warmup requested %s %d times, want once", hp, e.hit(hp))
		}
	}
	if w := logEntries(t, logs.String(), nsA, "warmup"); len(w) != 3 {
		t.Errorf("warmup log lines: %v", w)
	}
	// A 5xx stops the warmup, and the record keeps what it met.
	docs, _ := readRecord(t, cp, nsA, "docs")
	if w := docs.Warmup; docs.Serving != rev || w == nil || w.Warmed || w.Failed == nil ||
		w.Failed.Request != "docs.example.com/broken" || w.Failed.Status != http.StatusBadGateway || e.hit("docs.example.com/after") != 0 {
		t.Errorf("a failing warmup's record: %+v %+v", docs, docs.Warmup)
	}
	// No public host reaches it: warmed without a request.
	wiki, _ := readRecord(t, cp, nsA, "wiki")
	if w := wiki.Warmup; w == nil || !w.Warmed || w.Failed != nil || e.hit("wiki.private.example.com/") != 0 {
		t.Errorf("an Application no public host reaches: %+v", wiki.Warmup)
	}

	checkMetrics(t, cp, reconciler, nsB, nsD)
	checkReleases(t, cp, reconciler, counter, nsA, nsB)

	// A restart: a new gate, no memory but the records. Nothing is written
	// again, nothing warmed twice, and the held release keeps its since.
	restarted, logs2 := loggedReconciler(kube, e.warmer())
	counter.Reset()
	if err := restarted.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted.WaitWarmups()
	if w := counter.Matching("configmaps", "PUT") + counter.Matching("configmaps", "POST"); w != 0 {
		t.Errorf("the restarted gate wrote %d records: %v\n%s", w, counter.Requests(), logs2)
	}
	if e.hit("auth.example.com/") != 1 {
		t.Error("a revision was warmed twice")
	}
	again, _ := readRecord(t, cp, nsB, "auth")
	if !again.Since.Equal(*recB.Since) {
		t.Errorf("since moved across a restart: %v, was %v", again.Since, recB.Since)
	}
	if held := logEntries(t, logs2.String(), nsB, "release held"); len(held) != 1 || held[0]["reason"] != "stale-proof" {
		t.Errorf("the restarted gate's held lines: %v", held)
	}
	// Without the replacement the proven Job is started now.
	if suspended(t, cp, nsE, "shop-migration-"+tag) {
		t.Error("the Job the render wrote was not started on the next round")
	}
}

func checkMetrics(t *testing.T, cp *testenv.ControlPlane, reconciler *releasegate.Reconciler, heldNS, undoNS string) {
	t.Helper()
	scrapers := cp.Namespace(t)
	if _, err := cp.Apply(context.Background(), []byte(`apiVersion: v1
kind: Pod
metadata: {name: prometheus-0, namespace: `+scrapers+`, labels: {app.kubernetes.io/name: prometheus}}
spec:
  serviceAccountName: prometheus
  containers: [{name: prometheus, image: prometheus:3}]
status: {phase: Running, podIP: 10.3.0.9, podIPs: [{ip: 10.3.0.9}]}
`)); err != nil {
		t.Fatal(err)
	}
	scrape := func(h http.Handler, from string) (int, string) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = from
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	h, err := reconciler.MetricsHandler(releasegate.ScraperIdentity{Namespace: scrapers, Selector: "app.kubernetes.io/name=prometheus", ServiceAccount: "prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	code, body := scrape(h, "10.3.0.9:41000")
	if code != http.StatusOK {
		t.Fatalf("the scraper got %d %s", code, body)
	}
	for _, want := range []string{
		`release_gate_held_since_timestamp_seconds{application="auth",namespace="` + heldNS + `",pinned="` + rev + `",reason="stale-proof",serving=""}`,
		`release_gate_held_deadline_seconds{application="auth",namespace="` + heldNS + `",pinned="` + rev + `",reason="stale-proof",serving=""} 1800`,
		`release_gate_undo_refused{application="cart",condition="non-transactional",namespace="` + undoNS + `",tag="` + prevRev[7:19] + `"} 1`,
		`release_gate_unanswerable{application="billing",`,
		`release_gate_tended_timestamp_seconds 1.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	if code, _ := scrape(h, "10.3.0.10:41000"); code != http.StatusForbidden {
		t.Errorf("another address scraped: %d", code)
	}
	none, err := reconciler.MetricsHandler(releasegate.ScraperIdentity{})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := scrape(none, "10.3.0.9:41000"); code != http.StatusForbidden {
		t.Errorf("with no scraper configured a scrape got %d", code)
	}
}

func checkReleases(t *testing.T, cp *testenv.ControlPlane, reconciler *releasegate.Reconciler, counter *testenv.RequestCounter, nsA, nsB string) {
	t.Helper()
	schema := jsondoc.MustCompile(release.ReleasesSchema, jsondoc.AssertFormats())
	h := reconciler.ReleasesHandler()
	counter.Reset()
	var body []byte
	for range 50 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/releases", nil))
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("/releases: %d %s", w.Code, w.Body)
		}
		body = w.Body.Bytes()
	}
	if n := counter.Total(); n > 3 {
		t.Errorf("50 answers cost %d API requests: %v", n, counter.Requests())
	}
	var got releasegate.Releases
	if err := schema.DecodeStrict(body, &got); err != nil {
		t.Fatalf("/releases does not match its schema: %v\n%s", err, body)
	}
	byKey := map[string]releasegate.ReleaseApplication{}
	var order []string
	for _, a := range got.Applications {
		byKey[a.Namespace+"/"+a.Application] = a
		order = append(order, a.Namespace+"/"+a.Application)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("/releases not ordered: %v", order)
		}
	}
	if a := byKey[nsA+"/billing"]; a.Unreadable == nil || len(a.Members) != 0 {
		t.Errorf("unreadable inputs: %+v", a)
	}
	a := byKey[nsA+"/auth"]
	if a.Unreadable != nil || a.Record == nil || a.Record.Serving == nil || *a.Record.Serving != rev || a.Record.Warmup == nil ||
		len(a.Members) != 2 || *a.Members[0].Revision != rev || a.Migration == nil || *a.Migration.TestedAgainst != prevRev {
		t.Errorf("the serving Application in /releases: %s", body)
	}
	if b := byKey[nsB+"/auth"]; b.Record == nil || b.Record.Serving != nil || b.Record.Pinned == nil || b.Record.Since == nil {
		t.Errorf("the held Application in /releases: %+v", b)
	}
}

// A member that failed before the gate first saw this revision stays Failed
// until Flagger starts on it, its status.lastTransitionTime stamped on every
// tick meanwhile: the round goes by when the Promoted condition changed, and
// neither holds the release nor undoes its migration.
func TestAFailureFromBeforeTheRevisionHoldsNothing(t *testing.T) {
	cp, reconciler, logs := ownReconciler(t)
	ns := cp.Namespace(t)
	hourAgo := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	a := &app{ns: ns, name: "pay", migration: true, testedAgainst: prevRev,
		members: []member{{process: "pay-api", phase: "Failed", applied: "p-2", promoted: "p-1", image: "pay:2", primaryImage: "pay:1",
			transitioned: time.Now().Add(-2 * time.Hour)}},
		jobs: []job{{name: "pay-migration-" + tag, complete: true}, {name: "pay-migration-down-" + tag, suspended: true}},
		record: &release.Record{Namespace: ns, Application: "pay", Serving: prevRev, Primaries: digestsOf("pay-api", "p-1"),
			Pinned: rev, Since: &hourAgo, Migrated: rev}}
	a.apply(t, cp)
	round(t, reconciler, logs)
	if strings.Contains(logs.String(), `"msg":"release held"`) || strings.Contains(logs.String(), `"msg":"application unanswerable"`) {
		t.Errorf("held, or undecided, for a failure from before the revision:\n%s", logs)
	}
	if !suspended(t, cp, ns, "pay-migration-down-"+tag) {
		t.Error("a migration was undone for a failure from before the revision")
	}
}

// failedPay is the pay Application ten minutes into a release Flagger has
// just failed, its new copy holding pods and its Jobs as given.
func failedPay(ns string, pods []pod, jobs ...job) *app {
	since := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	return &app{ns: ns, name: "pay", migration: true, testedAgainst: prevRev,
		members: []member{{process: "pay-api", phase: "Failed", applied: "p-2", promoted: "p-1", image: "pay:2", primaryImage: "pay:1",
			transitioned: time.Now().Add(-time.Minute), pods: pods}},
		jobs: jobs,
		record: &release.Record{Namespace: ns, Application: "pay", Serving: prevRev, Primaries: digestsOf("pay-api", "p-1"),
			Pinned: rev, Since: &since}}
}

// A migration the gate did not start, that ran for a release Flagger then
// failed, is recorded as left applied though its undo cannot be decided (no
// down Job): the next release must not start a migration on top of it.
func TestAMigrationThatRanIsRecordedThoughTheRoundCannotDecide(t *testing.T) {
	cp, reconciler, logs := ownReconciler(t)
	ns := cp.Namespace(t)
	failedPay(ns, nil, job{name: "pay-migration-" + tag, complete: true}).apply(t, cp)
	round(t, reconciler, logs)
	if u := logEntries(t, logs.String(), ns, "application unanswerable"); len(u) != 1 || !strings.Contains(u[0]["cause"].(string), "down Job") {
		t.Fatalf("unanswerable log lines: %v\n%s", u, logs)
	}
	if rec, ok := readRecord(t, cp, ns, "pay"); !ok || rec.Migrated != rev {
		t.Fatalf("the record %+v does not say the migration of %s ran", rec, tag)
	}
}

// An undo waits while a new copy has a pod, whatever labels the pod carries
// beyond its Deployment's selector: a pod without the part-of label counts.
func TestAnUndoCountsPodsWithoutThePartOfLabel(t *testing.T) {
	cp, reconciler, logs := ownReconciler(t)
	ns := cp.Namespace(t)
	failedPay(ns, []pod{{ready: true, labels: "app.kubernetes.io/instance: pay-api"}},
		job{name: "pay-migration-" + tag, complete: true}, job{name: "pay-migration-down-" + tag, suspended: true}).apply(t, cp)
	round(t, reconciler, logs)
	if held := logEntries(t, logs.String(), ns, "release held"); len(held) != 1 || held[0]["reason"] != "analysis-failed" {
		t.Fatalf("held log lines: %v\n%s", held, logs)
	}
	if !suspended(t, cp, ns, "pay-migration-down-"+tag) {
		t.Error("a migration was undone while its new copy had a pod")
	}
}

// An undo waits while a new copy has a pod being deleted: until its kubelet
// confirms, it may still run new code against the schema.
func TestAnUndoCountsAPodBeingDeleted(t *testing.T) {
	cp, reconciler, logs := ownReconciler(t)
	ns := cp.Namespace(t)
	a := failedPay(ns, []pod{{ready: true}},
		job{name: "pay-migration-" + tag, complete: true}, job{name: "pay-migration-down-" + tag, suspended: true})
	a.members[0].deleting = []int{0}
	a.apply(t, cp)
	round(t, reconciler, logs)
	if held := logEntries(t, logs.String(), ns, "release held"); len(held) != 1 || held[0]["reason"] != "analysis-failed" {
		t.Fatalf("held log lines: %v\n%s", held, logs)
	}
	if !suspended(t, cp, ns, "pay-migration-down-"+tag) {
		t.Error("a migration was undone while its new copy had a pod being deleted")
	}
}

// A release that changes a ConfigMap alone leaves the pod template and
// Flagger's record as they were until Flagger's next tick: the round compares
// the ConfigMaps the copies take their environment from, and records the
// revision as serving only once Flagger's copy holds what the member's does.
func TestARoundComparesTheConfigMapsOfTheCopies(t *testing.T) {
	cp, reconciler, logs := ownReconciler(t)
	ns := cp.Namespace(t)
	a := &app{ns: ns, name: "auth",
		members: []member{{process: "auth-api", phase: "Succeeded", applied: "api-1", promoted: "api-1", image: "api:1", primaryImage: "api:1",
			envConfig: "full", primaryEnvConfig: "lite"}},
		record: &release.Record{Namespace: ns, Application: "auth", Serving: prevRev, Primaries: digestsOf("auth-api", "api-1")}}
	a.apply(t, cp)
	round(t, reconciler, logs)
	if rec, _ := readRecord(t, cp, ns, "auth"); rec.Serving != prevRev || rec.Pinned != rev {
		t.Fatalf("serving %q pinned %q before Flagger promoted the ConfigMap\n%s", rec.Serving, rec.Pinned, logs)
	}
	primaryEnv, err := cp.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "auth-api-env-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	primaryEnv.Data["MODE"] = "full"
	if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Update(t.Context(), primaryEnv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	round(t, reconciler, logs)
	if rec, _ := readRecord(t, cp, ns, "auth"); rec.Serving != rev || rec.Pinned != "" {
		t.Fatalf("serving %q pinned %q once Flagger's copy holds the member's\n%s", rec.Serving, rec.Pinned, logs)
	}
}

// ownReconciler is a control plane of the test's own, so its rounds meet no other
// test's Applications, and a Reconciler on it under the gate's grant whose
// warmups request nothing.
func ownReconciler(t *testing.T) (*testenv.ControlPlane, *releasegate.Reconciler, *testenv.LogBuffer) {
	t.Helper()
	cp := testenv.Own(t)
	kube, err := releasegate.NewKube(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	reconciler, logs := loggedReconciler(kube, warmerFunc(func(context.Context, []string, []string) (owntraffic.Warmup, error) { return owntraffic.Warmup{}, nil }))
	return cp, reconciler, logs
}

// loggedReconciler is a Reconciler on cluster, warming through warmer, whose JSON
// log lines the returned buffer holds.
func loggedReconciler(cluster releasegate.ReconcileCluster, warmer releasegate.Warmer) (*releasegate.Reconciler, *testenv.LogBuffer) {
	logs := &testenv.LogBuffer{}
	return releasegate.NewReconciler(cluster, gateNS, warmer, slog.New(slog.NewJSONHandler(logs, nil)), time.Now), logs
}

// round runs one round, failing the test when it fails.
func round(t *testing.T, reconciler *releasegate.Reconciler, logs *testenv.LogBuffer) {
	t.Helper()
	if err := reconciler.Round(context.Background()); err != nil {
		t.Fatalf("round: %v\n%s", err, logs)
	}
}

// failingDeployments is the gate's cluster with its Deployments list
// refused, as an API server that failed it would.
type failingDeployments struct{ *releasegate.Kube }

func (failingDeployments) Deployments(context.Context) ([]releasegate.NamespacedDeployment, error) {
	return nil, errors.New("the API server failed the list")
}

// A Deployments list that fails leaves unanswered only the Applications
// that needed it; the round goes on with the others.
func TestAFailedDeploymentsListFailsOnlyWhoNeedsIt(t *testing.T) {
	cp := testenv.Own(t)
	kube, err := releasegate.NewKube(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	settling := &app{ns: ns, name: "docs",
		members: []member{{process: "docs", phase: "Succeeded", applied: "d-1", promoted: "d-1", image: "docs:1", primaryImage: "docs:1"}}}
	proven := &app{ns: ns, name: "shop", migration: true, testedAgainst: prevRev,
		members: []member{{process: "shop-api", phase: "Progressing", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
		jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
		record:  &release.Record{Namespace: ns, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
	// Held and migrated: its undo needs the Deployments, its hold does not.
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	held := &app{ns: ns, name: "pay", migration: true, testedAgainst: prevRev,
		members: []member{{process: "pay-api", phase: "Failed", applied: "p-2", promoted: "p-1", image: "pay:2", primaryImage: "pay:1",
			transitioned: time.Now().Add(-time.Minute)}},
		jobs: []job{{name: "pay-migration-" + tag, complete: true}, {name: "pay-migration-down-" + tag, suspended: true}},
		record: &release.Record{Namespace: ns, Application: "pay", Serving: prevRev, Primaries: digestsOf("pay-api", "p-1"),
			Pinned: rev, Since: &since, Migrated: rev}}
	settling.apply(t, cp)
	proven.apply(t, cp)
	held.apply(t, cp)
	reconciler, logs := loggedReconciler(failingDeployments{kube}, nil)
	round(t, reconciler, logs)
	u := logEntries(t, logs.String(), ns, "application unanswerable")
	if len(u) != 2 || !strings.Contains(u[0]["cause"].(string), "list the Deployments") {
		t.Errorf("unanswerable lines: %v", u)
	}
	if h := logEntries(t, logs.String(), ns, "release held"); len(h) != 1 || h[0]["application"] != "pay" {
		t.Errorf("the hold decided without the Deployments was not reported: %v", h)
	}
	if !suspended(t, cp, ns, "pay-migration-down-"+tag) {
		t.Error("a down was started without the Deployments read")
	}
	if suspended(t, cp, ns, "shop-migration-"+tag) {
		t.Errorf("the Application that needed no Deployments was not reconciled\n%s", logs)
	}
}

// failingPods is the gate's cluster with its pod lists refused, as an API
// server that failed them would.
type failingPods struct{ *releasegate.Kube }

func (failingPods) Pods(context.Context, string, labels.Selector) ([]release.Pod, error) {
	return nil, errors.New("the API server failed the list")
}

// A pod list that fails leaves an undo that counts new copies undecided:
// the release is still reported held, and its down is not started.
func TestAFailedPodsListLeavesTheUndoUndecided(t *testing.T) {
	cp := testenv.Own(t)
	kube, err := releasegate.NewKube(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	failedPay(ns, nil, job{name: "pay-migration-" + tag, complete: true}, job{name: "pay-migration-down-" + tag, suspended: true}).apply(t, cp)
	reconciler, logs := loggedReconciler(failingPods{kube}, warmerFunc(func(context.Context, []string, []string) (owntraffic.Warmup, error) { return owntraffic.Warmup{}, nil }))
	round(t, reconciler, logs)
	if u := logEntries(t, logs.String(), ns, "application unanswerable"); len(u) != 1 || !strings.Contains(u[0]["cause"].(string), "list the pods of "+ns+"/pay") {
		t.Fatalf("unanswerable log lines: %v\n%s", u, logs)
	}
	if held := logEntries(t, logs.String(), ns, "release held"); len(held) != 1 || held[0]["reason"] != "analysis-failed" {
		t.Fatalf("held log lines: %v\n%s", held, logs)
	}
	if !suspended(t, cp, ns, "pay-migration-down-"+tag) {
		t.Error("a migration was undone though its new copies could not be counted")
	}
}
