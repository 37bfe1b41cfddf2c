package releasegate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const flagger = "127.0.0.1"

// earlier is a question another member asks before the row's own.
type earlier struct{ path, process string }

// TestWebhooks runs the gate under its RBAC grant against the real API server
// and asks each webhook over loopback, as Flagger would, one row per rule.
func TestWebhooks(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	gate := serve(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS)

	migrationJob := func(complete, failed bool) job {
		return job{name: "auth-migration-" + tag, identity: "auth-migration", suspended: !complete && !failed, complete: complete, failed: failed}
	}
	rows := []struct {
		name     string
		prepare  func(a *app)
		before   []earlier
		path     string
		process  string
		revision string
		status   int
		reason   string
		// cause is what the log says for a 503.
		cause string
	}{
		// confirm-rollout
		{name: "may-start: an Application that never ran a step starts at once",
			path: "/may-start", status: http.StatusOK, reason: "no release step"},
		{name: "may-start: the migration is a step before its first Job exists",
			prepare: func(a *app) { a.migration = true },
			path:    "/may-start", status: http.StatusConflict, reason: "waiting for job auth-migration-" + tag + " not applied"},
		{name: "may-start: a step whose Job is not complete",
			prepare: func(a *app) { a.migration = true; a.jobs = []job{migrationJob(false, false)} },
			path:    "/may-start", status: http.StatusConflict, reason: "not complete"},
		{name: "may-start: a step whose Job failed",
			prepare: func(a *app) { a.migration = true; a.jobs = []job{migrationJob(false, true)} },
			path:    "/may-start", status: http.StatusConflict, reason: "job auth-migration-" + tag + " failed"},
		{name: "may-start: every step completed",
			prepare: func(a *app) {
				a.migration = true
				a.jobs = []job{migrationJob(true, false), {name: "seed-" + tag, identity: "seed", complete: true}}
			},
			path: "/may-start", status: http.StatusOK, reason: "every step of " + tag + " completed (auth-migration; seed)"},
		{name: "may-start: an identity that ran a release Job before is a step",
			prepare: func(a *app) { a.jobs = []job{{name: "seed-2f4a6c8e0b2d", identity: "seed", complete: true}} },
			path:    "/may-start", status: http.StatusConflict, reason: "job seed-" + tag + " not applied"},
		{name: "may-start: at the revision that serves, a Deployment that no longer runs what its primary runs is a render not wholly applied",
			prepare: func(a *app) {
				a.migration = true
				a.jobs = []job{migrationJob(true, false)}
				a.record = &release.Record{Namespace: a.ns, Application: a.name, Serving: rev}
			},
			path: "/may-start", status: http.StatusConflict,
			reason: "waiting for the render: auth-api changed but its Canary still carries " + tag + ", which serves"},
		{name: "may-start: at the revision that serves, a Deployment that runs what its primary runs",
			prepare: func(a *app) {
				a.member("auth-api").image = "api:1"
				a.record = &release.Record{Namespace: a.ns, Application: a.name, Serving: rev}
			},
			path: "/may-start", status: http.StatusOK, reason: "no release step"},
		{name: "may-start: at the revision that serves, a ConfigMap Flagger has not copied holds it",
			prepare: func(a *app) {
				m := a.member("auth-api")
				m.image, m.envConfig, m.primaryEnvConfig = "api:1", "full", "lite"
				a.record = &release.Record{Namespace: a.ns, Application: a.name, Serving: rev}
			},
			path: "/may-start", status: http.StatusConflict, reason: "which serves"},
		{name: "may-start: a template marked with another revision",
			prepare: func(a *app) { a.member("auth-api").templateRevision = prevRev },
			path:    "/may-start", status: http.StatusConflict,
			reason: "waiting for the render: auth-api's template is revision 2f4a6c8e0b2d's, but its Canary carries " + tag},
		{name: "may-start: a template marked with the revision asked",
			prepare: func(a *app) { a.member("auth-api").templateRevision = rev },
			path:    "/may-start", status: http.StatusOK, reason: "no release step"},
		{name: "may-start: a record that does not decode",
			prepare: func(a *app) { a.record = &release.Record{Namespace: "elsewhere", Application: a.name} },
			path:    "/may-start", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "names namespace"},
		{name: "may-start: a down Job is never a step",
			prepare: func(a *app) {
				a.jobs = []job{{name: "auth-migration-down-" + tag, identity: "auth-migration", suspended: true}}
			},
			path: "/may-start", status: http.StatusOK, reason: "no release step"},

		// rollout
		{name: "checks: every pod of the new copy ready, none restarted",
			path: "/checks", status: http.StatusOK, reason: "new copy auth-api: 2 pods ready, none restarted"},
		{name: "checks: a new copy with no pod",
			prepare: func(a *app) { a.member("auth-api").pods = nil },
			path:    "/checks", status: http.StatusConflict, reason: "new copy auth-api has no pod"},
		{name: "checks: a pod not ready",
			prepare: func(a *app) { a.member("auth-api").pods[1].ready = false },
			path:    "/checks", status: http.StatusConflict, reason: "pod auth-api-1 not ready (1 of 2 ready)"},
		{name: "checks: a pod that restarted",
			prepare: func(a *app) { a.member("auth-api").pods[0].restarts = 1 },
			path:    "/checks", status: http.StatusConflict, reason: "pod auth-api-0 restarted 1 times"},
		{name: "checks: a pod of the new copy without the part-of label is still one of its pods",
			prepare: func(a *app) {
				pods := a.member("auth-api").pods
				pods[1].ready, pods[1].labels = false, "app.kubernetes.io/instance: auth-api"
			},
			path: "/checks", status: http.StatusConflict, reason: "pod auth-api-1 not ready (1 of 2 ready)"},
		{name: "checks: a new copy whose selector names no instance is read by its selector",
			prepare: func(a *app) {
				m := a.member("auth-api")
				m.selector = "app: auth-api"
				for i := range m.pods {
					m.pods[i].labels = "app: auth-api"
				}
				m.pods[0].ready = false
			},
			path: "/checks", status: http.StatusConflict, reason: "pod auth-api-0 not ready (1 of 2 ready)"},
		{name: "checks: a step of the revision that has not completed holds, as a newer render restarting an analysis would",
			prepare: func(a *app) { a.migration = true; a.jobs = []job{migrationJob(false, false)} },
			path:    "/checks", status: http.StatusConflict, reason: "waiting for job auth-migration-" + tag + " not complete"},
		{name: "checks: a template marked with another revision holds",
			prepare: func(a *app) { a.member("auth-api").templateRevision = prevRev },
			path:    "/checks", status: http.StatusConflict, reason: "waiting for the render"},
		{name: "may-promote: a step of the revision that has not completed holds, whatever the barrier",
			prepare: func(a *app) { a.migration = true; a.jobs = []job{migrationJob(false, false)} },
			path:    "/may-promote", status: http.StatusConflict, reason: "waiting for job auth-migration-" + tag + " not complete"},
		{name: "may-promote: a template marked with another revision holds",
			prepare: func(a *app) { a.member("auth-api").templateRevision = prevRev },
			path:    "/may-promote", status: http.StatusConflict, reason: "waiting for the render"},
		{name: "checks: the only pod of the new copy being deleted is no pod",
			prepare: func(a *app) { m := a.member("auth-api"); m.pods, m.deleting = m.pods[:1], []int{0} },
			path:    "/checks", status: http.StatusConflict, reason: "new copy auth-api has no pod"},
		{name: "checks: a pod being deleted is not counted ready",
			prepare: func(a *app) { a.member("auth-api").deleting = []int{1} },
			path:    "/checks", status: http.StatusOK, reason: "new copy auth-api: 1 pods ready, none restarted"},
		{name: "rollback: a pod being deleted still counts its restarts",
			prepare: func(a *app) {
				m := a.member("auth-api")
				m.phase, m.deleting = "Progressing", []int{0}
				m.pods[0].restarts = 3
			},
			path: "/rollback", status: http.StatusOK, reason: "roll back: pod auth-api-0 of new copy auth-api restarted 3 times"},
		{name: "checks: a pod whose init container restarted",
			prepare: func(a *app) { a.member("auth-api").pods[1].initRestarts = 2 },
			path:    "/checks", status: http.StatusConflict, reason: "pod auth-api-1 restarted 2 times"},

		// confirm-promotion
		{name: "may-promote: the other member did not change",
			path: "/may-promote", status: http.StatusOK, reason: "barrier open"},
		{name: "may-promote: the other member's primary is a tick behind its Deployment",
			prepare: func(a *app) { a.member("auth-ui").image = "ui:2" },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui primary does not run what its Deployment holds (container app image)"},
		{name: "may-promote: the other member's ConfigMap changed, a tick ahead of Flagger",
			prepare: func(a *app) { m := a.member("auth-ui"); m.envConfig, m.primaryEnvConfig = "full", "lite" },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui primary does not run what its Deployment holds (configMap auth-ui-env changed)"},
		{name: "may-promote: the other member's ConfigMap as Flagger copied it",
			prepare: func(a *app) { m := a.member("auth-ui"); m.envConfig, m.primaryEnvConfig = "full", "full" },
			path:    "/may-promote", status: http.StatusOK, reason: "barrier open"},
		{name: "may-promote: the other member has a spec Flagger has not promoted",
			prepare: func(a *app) { a.member("auth-ui").applied = "ui2" },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui has a spec Flagger has not promoted"},
		{name: "may-promote: the other member still analysed",
			prepare: func(a *app) { a.member("auth-ui").phase = "Progressing" },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui is Progressing"},
		{name: "may-promote: the other member waits but has not asked at this revision",
			prepare: func(a *app) { a.member("auth-ui").phase = "WaitingPromotion" },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui is WaitingPromotion but has not asked at " + tag},
		{name: "may-promote: the other member waits and asked at this revision",
			prepare: func(a *app) { a.member("auth-ui").phase = "WaitingPromotion" },
			before:  []earlier{{"/checks", "auth-ui"}},
			path:    "/may-promote", status: http.StatusOK, reason: "barrier open"},
		{name: "may-promote: the asking member is still analysed",
			prepare: func(a *app) { m := a.member("auth-api"); m.phase, m.iterations = "Progressing", 2 },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-api is Progressing (2 of 4 iterations)"},
		{name: "may-promote: the other member asked to start at this revision but still reads as the release before",
			prepare: func(a *app) { a.member("auth-ui").image = "ui:2" },
			before:  []earlier{{"/may-start", "auth-ui"}},
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui primary does not run what its Deployment holds (container app image)"},
		{name: "may-promote: the asking member analysed with every iteration counted",
			prepare: func(a *app) { a.member("auth-api").phase = "Progressing" },
			path:    "/may-promote", status: http.StatusOK, reason: "barrier open"},
		{name: "may-promote: the other member's Canary carries another revision",
			prepare: func(a *app) { a.member("auth-ui").canaryRev = prevRev },
			path:    "/may-promote", status: http.StatusConflict, reason: "auth-ui does not carry revision " + tag},

		// rollback
		{name: "rollback: the release can still pass",
			path: "/rollback", status: http.StatusConflict, reason: "no rollback: the release can still pass"},
		{name: "rollback: a pod of the member's new copy restarted 3 times",
			prepare: func(a *app) { m := a.member("auth-api"); m.phase = "Progressing"; m.pods[0].restarts = 3 },
			path:    "/rollback", status: http.StatusOK, reason: "roll back: pod auth-api-0 of new copy auth-api restarted 3 times"},
		{name: "rollback: another member's Canary carries this revision and failed",
			prepare: func(a *app) { a.member("auth-ui").phase = "Failed" },
			path:    "/rollback", status: http.StatusOK, reason: "roll back: auth-ui failed its analysis at " + tag},
		{name: "rollback: another member's Canary carries this revision and has a pod restarted 3 times",
			prepare: func(a *app) {
				m := a.member("auth-ui")
				m.phase, m.pods = "Progressing", []pod{{ready: true, restarts: 4}}
			},
			path: "/rollback", status: http.StatusOK, reason: "pod auth-ui-0 of new copy auth-ui restarted 4 times"},
		{name: "rollback: another member failed at another revision",
			prepare: func(a *app) { m := a.member("auth-ui"); m.phase, m.canaryRev = "Failed", prevRev },
			path:    "/rollback", status: http.StatusConflict, reason: "can still pass"},
		{name: "rollback: another member's Canary belongs to another Application",
			prepare: func(a *app) { a.member("auth-api").phase = "Progressing"; a.member("auth-ui").canaryApp = "billing" },
			path:    "/rollback", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "Canary auth-ui belongs to Application billing, not auth"},
		{name: "rollback: not asked while waiting to start",
			prepare: func(a *app) { a.member("auth-api").phase = "Waiting"; a.member("auth-ui").phase = "Failed" },
			path:    "/rollback", status: http.StatusConflict, reason: "auth-api is Waiting, neither analysed nor at the barrier"},
		{name: "rollback: not asked at the barrier without a ready new copy",
			prepare: func(a *app) { a.member("auth-api").pods[0].ready = false; a.member("auth-ui").phase = "Failed" },
			path:    "/rollback", status: http.StatusConflict, reason: "waits at the barrier without a ready new copy"},

		// Revision and membership, the same for every webhook.
		{name: "a question about a replaced render",
			path: "/checks", revision: prevRev, status: http.StatusConflict, reason: "Canary auth-api does not carry revision 2f4a6c8e0b2d"},
		{name: "a question about a Canary that is not there reads the same",
			prepare: func(a *app) { a.member("auth-api").noCanary = true },
			path:    "/checks", revision: prevRev, status: http.StatusConflict, reason: "Canary auth-api does not carry revision 2f4a6c8e0b2d"},
		{name: "a process that is no member",
			path: "/may-start", process: "billing", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "process billing is no member of Application auth"},
		{name: "a Canary of another Application",
			prepare: func(a *app) { a.member("auth-api").canaryApp = "billing" },
			path:    "/may-promote", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "Canary auth-api belongs to Application billing, not auth"},
		{name: "inputs missing",
			prepare: func(a *app) { a.noInputs = true },
			path:    "/may-start", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "auth-release-gate: not found"},
		{name: "inputs not parsing",
			prepare: func(a *app) { a.inputs = `{"members":"auth-api"}` },
			path:    "/may-start", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "inputs: refused by its schema"},
		{name: "inputs of another Application",
			prepare: func(a *app) { a.inputsApp = "billing" },
			path:    "/may-start", status: http.StatusServiceUnavailable, reason: "cannot answer", cause: "is not labelled app.kubernetes.io/part-of=auth"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			a := authApp(ns)
			if row.prepare != nil {
				row.prepare(a)
			}
			a.apply(t, cp)
			for _, e := range row.before {
				if code, reason := gate.ask(t, flagger, e.path, payload(ns, e.process, rev)); code >= 500 || code == http.StatusForbidden {
					t.Fatalf("earlier %s by %s: %d %s", e.path, e.process, code, reason)
				}
			}
			process, revision := row.process, row.revision
			if process == "" {
				process = "auth-api"
			}
			if revision == "" {
				revision = rev
			}
			code, reason := gate.ask(t, flagger, row.path, payload(ns, process, revision))
			if code != row.status || !strings.Contains(reason, row.reason) {
				t.Fatalf("%s: %d %q, want %d containing %q\nlog:\n%s", row.path, code, reason, row.status, row.reason, gate.logs.String())
			}
			if code == http.StatusServiceUnavailable {
				if reason != "the release gate cannot answer this question now; its log names the cause" {
					t.Fatalf("a 503 told the caller %q", reason)
				}
				if line := logLine(gate.logs.String(), ns, "cannot answer"); !strings.Contains(line, row.cause) || row.cause == "" {
					t.Fatalf("the log line %q does not name the cause %q", line, row.cause)
				}
			}
		})
	}
}

// TestBadPayloads: a payload that asks nothing is 400, naming what is wrong.
func TestBadPayloads(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	gate := serve(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS)
	ns := cp.Namespace(t)
	cases := []struct{ name, body, reason string }{
		{"bad JSON", `{"name":`, "not a JSON object"},
		{"missing metadata", `{"name":"auth-api","namespace":"` + ns + `"}`, "no metadata"},
		{"name is not the process", strings.Replace(payload(ns, "auth-api", rev), `"name":"auth-api"`, `"name":"auth-ui"`, 1), "is not the process"},
		{"revision not sha256:<hex>", payload(ns, "auth-api", "sha256:nothex"), "not sha256:<64 hex>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/may-start", "/checks", "/may-promote", "/rollback"} {
				code, reason := gate.ask(t, flagger, path, c.body)
				if code != http.StatusBadRequest || !strings.Contains(reason, c.reason) {
					t.Fatalf("%s: %d %q, want 400 containing %q", path, code, reason, c.reason)
				}
			}
		})
	}
}

// logLine is the gate's last JSON log line about namespace ns with message msg.
func logLine(logs, ns, msg string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var entry map[string]any
		if json.Unmarshal([]byte(lines[i]), &entry) == nil && entry["namespace"] == ns && entry["msg"] == msg {
			return lines[i]
		}
	}
	return ""
}

// TestAPIServerStops: once the API server stops answering, every question is
// 503, and the log says why.
func TestAPIServerStops(t *testing.T) {
	cp := testenv.Own(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	gate := serve(t, cp.Grant(t, gateRBAC, gateNS, gateSA), flaggerNS)
	ns := cp.Namespace(t)
	authApp(ns).apply(t, cp)
	if err := gate.gate.Ready(context.Background()); err != nil {
		t.Fatalf("not ready with the API server up: %v", err)
	}
	if code, reason := gate.ask(t, flagger, "/checks", payload(ns, "auth-api", rev)); code != http.StatusOK {
		t.Fatalf("before the stop: %d %q", code, reason)
	}
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/may-start", "/checks", "/may-promote", "/rollback"} {
		code, reason := gate.ask(t, flagger, path, payload(ns, "auth-api", rev))
		if code != http.StatusServiceUnavailable || !strings.Contains(reason, "cannot answer") {
			t.Fatalf("%s with the API server stopped: %d %q", path, code, reason)
		}
	}
	// The cause is the read that failed, or, once the watch of Flagger's
	// pods has failed to list them again, that: the pods it last saw admit
	// no one.
	if logs := gate.logs.String(); !strings.Contains(logs, `"cause":"read the inputs `+ns+`/auth-release-gate: `) &&
		!strings.Contains(logs, `"cause":"know Flagger's pods: the watch of Flagger's pods cannot list them`) {
		t.Fatalf("the log does not name the cause:\n%s", logs)
	}
	// Readiness was reached once; a later outage is answered per question.
	if err := gate.gate.Ready(context.Background()); err != nil {
		t.Fatalf("readiness fell with the API server: %v", err)
	}
}

// TestReadsItCannotMake: a read the API server refuses is a question the gate
// cannot answer. The gate runs under its own grant less one kind, so each of
// its reads fails for real in turn.
func TestReadsItCannotMake(t *testing.T) {
	cp := testenv.Shared(t)
	flaggerNS := cp.Namespace(t)
	flaggerPod(t, cp, flaggerNS, "flagger-0", flagger)
	ns := cp.Namespace(t)
	a := authApp(ns)
	a.member("auth-api").phase = "Progressing"
	a.apply(t, cp)

	cases := []struct {
		without string
		paths   []string
		cause   string
	}{
		{"jobs", []string{"/may-start", "/checks", "/may-promote"}, "list the Jobs of " + ns + "/auth"},
		{"deployments", []string{"/may-start", "/checks", "/may-promote", "/rollback"}, "list the Deployments of " + ns},
		{"canaries", []string{"/may-start", "/checks", "/may-promote", "/rollback"}, "list the Canaries of " + ns},
		{"configmaps", []string{"/may-start"}, "read the inputs " + ns + "/auth-release-gate"},
	}
	for _, c := range cases {
		t.Run("without "+c.without, func(t *testing.T) {
			gate := serve(t, grantWithout(t, cp, c.without), flaggerNS)
			for _, path := range c.paths {
				code, reason := gate.ask(t, flagger, path, payload(ns, "auth-api", rev))
				if code != http.StatusServiceUnavailable {
					t.Fatalf("%s without %s: %d %q", path, c.without, code, reason)
				}
				if line := logLine(gate.logs.String(), ns, "cannot answer"); !strings.Contains(line, c.cause) || !strings.Contains(line, "forbidden") {
					t.Fatalf("%s: the log line %q does not name the cause %q", path, line, c.cause)
				}
			}
		})
	}
	// Without pods the gate cannot even tell Flagger: it is not ready, and
	// every question is 503, never 403.
	t.Run("without pods", func(t *testing.T) {
		gate := serve(t, grantWithout(t, cp, "pods"), flaggerNS)
		if err := gate.gate.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("ready without pods: %v", err)
		}
		if code, _ := gate.ask(t, flagger, "/may-start", payload(ns, "auth-api", rev)); code != http.StatusServiceUnavailable {
			t.Fatalf("without pods: %d", code)
		}
		if logs := gate.logs.String(); !strings.Contains(logs, `"cause":"know Flagger's pods: `) || !strings.Contains(logs, "forbidden") {
			t.Fatalf("without pods, the log does not name the cause:\n%s", logs)
		}
	})
}

// grantWithout binds a ServiceAccount of its own to the gate's rules less one
// resource, and returns its identity.
func grantWithout(t *testing.T, cp *testenv.ControlPlane, resource string) *rest.Config {
	t.Helper()
	rules := map[string]string{
		"configmaps":  `{apiGroups: [""], resources: [configmaps], verbs: [get, list]}`,
		"pods":        `{apiGroups: [""], resources: [pods], verbs: [list, watch]}`,
		"jobs":        `{apiGroups: [batch], resources: [jobs], verbs: [list]}`,
		"deployments": `{apiGroups: [apps], resources: [deployments], verbs: [list]}`,
		"canaries":    `{apiGroups: [flagger.app], resources: [canaries], verbs: [list]}`,
	}
	delete(rules, resource)
	var rs []string
	for _, r := range rules {
		rs = append(rs, "  - "+r)
	}
	name := "gate-without-" + resource
	_, err := cp.Apply(context.Background(), []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: `+name+`}
rules:
`+strings.Join(rs, "\n")+`
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: `+name+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+name+`}
subjects: [{kind: ServiceAccount, name: `+name+`, namespace: delivery-system}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cp.Grant(t, gateRBAC, gateNS, gateSA) // the namespace
	return cp.As(gateNS, name)
}

// TestOneReadPerKind: an answer reads each kind it needs once, however many
// members the Application has: the namespace's Canaries and Deployments and
// the Application's pods are listed, never read member by member, and the
// caller check reads nothing.
func TestOneReadPerKind(t *testing.T) {
	cp, gate, counter := countedGate(t)
	ns := cp.Namespace(t)
	a := authApp(ns)
	a.members = append(a.members,
		member{process: "auth-worker", phase: "Succeeded", applied: "w", promoted: "w", image: "worker:1", primaryImage: "worker:1"},
		member{process: "auth-cron", phase: "Initialized", applied: "c", promoted: "c", image: "cron:1", primaryImage: "cron:1"})
	a.apply(t, cp)

	kinds := []string{"configmaps", "canaries", "jobs", "deployments", "pods"}
	for _, c := range []struct {
		path   string
		status int
		reads  []string
	}{
		{"/may-start", http.StatusOK, []string{"configmaps", "canaries", "jobs", "deployments"}},
		{"/checks", http.StatusOK, []string{"configmaps", "canaries", "jobs", "deployments", "pods"}},
		{"/may-promote", http.StatusOK, []string{"configmaps", "canaries", "jobs", "deployments"}},
		{"/rollback", http.StatusConflict, []string{"configmaps", "canaries", "deployments", "pods"}},
	} {
		counter.Reset()
		if code, reason := gate.ask(t, flagger, c.path, payload(ns, "auth-api", rev)); code != c.status {
			t.Fatalf("%s: %d %q, want %d", c.path, code, reason, c.status)
		}
		for _, kind := range kinds {
			want := 0
			if slices.Contains(c.reads, kind) {
				want = 1
			}
			if got := counter.Matching("/namespaces/" + ns + "/" + kind); got != want {
				t.Errorf("%s read %s %d times, want %d: %v", c.path, kind, got, want, counter.Requests())
			}
		}
		// Every answer but /rollback reads the gate's record too, in the
		// gate's namespace.
		record := 1
		if c.path == "/rollback" {
			record = 0
		}
		if got := counter.Matching("/namespaces/" + gateNS + "/configmaps/"); got != record {
			t.Errorf("%s read the record %d times, want %d: %v", c.path, got, record, counter.Requests())
		}
		if counter.Total() != len(c.reads)+record {
			t.Errorf("%s made the API requests %v, want %d", c.path, counter.Requests(), len(c.reads)+record)
		}
	}
}

// readCounter counts the bytes read through it.
type readCounter struct {
	r io.Reader
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// The gate's grant writes ConfigMaps in its own namespace alone, where its
// records are: an Application's inputs are never its to write.
func TestTheGrantWritesConfigMapsOnlyInTheGatesNamespace(t *testing.T) {
	cp := testenv.Shared(t)
	kube, err := kubernetes.NewForConfig(cp.Grant(t, gateRBAC, gateNS, gateSA))
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	authApp(ns).apply(t, cp)
	ctx := context.Background()
	inputs, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "auth-release-gate", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gate cannot read the inputs: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, inputs, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the gate updated an Application's inputs: %v", err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the gate created a ConfigMap in %s: %v", ns, err)
	}
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ns + ".grant-check", Namespace: gateNS}}
	created, err := kube.CoreV1().ConfigMaps(gateNS).Create(ctx, own, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the gate cannot create a record: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.CoreV1().ConfigMaps(gateNS).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	if _, err := kube.CoreV1().ConfigMaps(gateNS).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the gate cannot update a record: %v", err)
	}
}
