package releaserecord_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/server"
)

const token = "facts-token-for-the-tests"

type factServer struct {
	*harness
	url string
}

func newFactServer(t *testing.T) *factServer {
	h := newHarness(t)
	facts := &rr.Facts{Service: h.svc, Cluster: "prod-eu", Env: "prod", Token: token,
		Namespaces: regexp.MustCompile(`^(?:shop|docs|argocd)$`), Sources: []rr.Pushed{rr.Rollouts{}, rr.ArgoCD{}}, Logger: h.svc.Logger}
	srv := httptest.NewServer(server.Handler(server.Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Routes: facts.Routes, MaxBodyBytes: 64 << 10}))
	t.Cleanup(srv.Close)
	return &factServer{harness: h, url: srv.URL}
}

func (s *factServer) post(path, bearer, body string) (int, rr.Answer, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a rr.Answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		s.t.Fatalf("%s answered %d %q", path, resp.StatusCode, raw)
	}
	if resp.Header.Get(rr.EffectHeader) != string(a.Effect) {
		s.t.Fatalf("the header says %q, the body %q", resp.Header.Get(rr.EffectHeader), a.Effect)
	}
	return resp.StatusCode, a, resp.Header.Get(rr.EffectHeader)
}

// rollout is a Rollout fact; change edits its fields before it is sent.
func rollout(change func(map[string]any)) string {
	f := map[string]any{"namespace": "docs", "name": "docs", "releaseId": idA, "phase": "Progressing", "aborted": false,
		"podTemplateHash": "6d4f9c7b8", "generation": "7", "observedGeneration": "7", "message": ""}
	if change != nil {
		change(f)
	}
	raw, _ := json.Marshal(f)
	return string(raw)
}

func argocd(change func(map[string]any)) string {
	f := map[string]any{"namespace": "docs", "name": "docs-prod", "app": "docs", "env": "prod", "releaseId": "", "rollbackOf": "", "image": "",
		"operationPhase": "Failed", "retryCount": 2, "message": "ComparisonError: one or more objects failed to apply", "revision": "0123abc",
		"repoURL": "https://github.com/acme/docs"}
	if change != nil {
		change(f)
	}
	raw, _ := json.Marshal(f)
	return string(raw)
}

func set(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }

func TestPushedFacts(t *testing.T) {
	s := newFactServer(t)
	check := func(name string, code int, a rr.Answer, wantCode int, wantEffect rr.Effect, why string) {
		t.Helper()
		if code != wantCode || a.Effect != wantEffect || !strings.Contains(a.Why, why) {
			t.Errorf("%s: %d %+v, want %d %s %q", name, code, a, wantCode, wantEffect, why)
		}
	}
	// The token.
	code, a, _ := s.post("/facts/prod-eu", "", rollout(nil))
	check("no token", code, a, 401, rr.EffectRefused, "bearer token")
	code, a, _ = s.post("/facts/prod-eu", "wrong", rollout(nil))
	check("a wrong token", code, a, 401, rr.EffectRefused, "bearer token")

	// Refused: 400.
	for name, tc := range map[string]struct{ path, body, why string }{
		"not JSON":                 {"/facts/prod-eu", "{", "not JSON"},
		"off the schema":           {"/facts/prod-eu", rollout(set("phase", "Sideways")), "refused by its schema"},
		"a key more":               {"/facts/prod-eu", rollout(set("extra", 1)), "refused by its schema"},
		"a namespace no DNS label": {"/facts/prod-eu", rollout(set("namespace", "Docs")), "refused by its schema"},
		"a uid no UUID":            {"/facts/prod-eu", rollout(set("uid", "x")), "refused by its schema"},
		"a startedAt not a time":   {"/argocd/prod-eu", argocd(set("startedAt", "yesterday")), "refused by its schema"},
		"another cluster's path":   {"/facts/prod-us", rollout(nil), "posted for the cluster prod-us"},
		"another cluster's id":     {"/facts/prod-eu", rollout(set("releaseId", "docs@2.1.0:prod-us/prod")), "another cluster's"},
		"a malformed id":           {"/facts/prod-eu", rollout(set("releaseId", "docs-2.1.0")), "malformed release id"},
		"an id not the app's":      {"/argocd/prod-eu", argocd(func(m map[string]any) { m["releaseId"], m["operationPhase"] = "api@1.0.0:prod-eu/prod", "Running" }), "not of the app"},
	} {
		code, a, _ := s.post(tc.path, token, tc.body)
		check(name, code, a, 400, rr.EffectRefused, tc.why)
	}

	// Ignored: 202.
	for name, tc := range map[string]struct{ path, body, why string }{
		"an untracked Rollout":       {"/facts/prod-eu", rollout(set("releaseId", "")), "not tracked"},
		"an untracked Application":   {"/argocd/prod-eu", argocd(set("app", "")), "not tracked"},
		"a namespace outside":        {"/facts/prod-eu", rollout(set("namespace", "kube-system")), "outside the allowed pattern"},
		"a stale generation":         {"/facts/prod-eu", rollout(set("observedGeneration", "6")), "stale generation"},
		"an id of another env":       {"/facts/prod-eu", rollout(set("releaseId", "docs@2.1.0:prod-eu/stage")), "is another env's; this is prod"},
		"an Application's other env": {"/argocd/prod-eu", argocd(set("env", "stage")), "is another service's; this is prod"},
		"another env's sync naming it": {"/argocd/prod-eu", argocd(func(m map[string]any) {
			m["env"], m["releaseId"], m["operationPhase"] = "stage", "docs@2.1.0:prod-eu/stage", "Running"
		}), "another service's"},
		"a sync failure with no flight": {"/argocd/prod-eu", argocd(nil), "in flight"},
		"a sync that says nothing":      {"/argocd/prod-eu", argocd(set("operationPhase", "Terminating")), "nothing to record"},
	} {
		code, a, _ := s.post(tc.path, token, tc.body)
		check(name, code, a, 202, rr.EffectIgnored, tc.why)
	}
	if s.store.writes() != 0 || len(s.recv.Events()) != 0 {
		t.Fatalf("refused and ignored facts wrote %d, sent %v", s.store.writes(), s.recv.Types())
	}

	// Argo CD names the release: its record starts, then a Rollout moves it.
	code, a, _ = s.post("/argocd/prod-eu", token, argocd(func(m map[string]any) {
		m["releaseId"], m["operationPhase"], m["retryCount"], m["image"] = idA, "Running", 0, "ghcr.io/acme/docs:2.1.0"
	}))
	check("merged by Argo CD", code, a, 200, rr.EffectApplied, "merged")
	if r := s.store.record(idA); r.GitURL != "https://github.com/acme/docs" || r.GitRevision != "0123abc" || r.Image != "ghcr.io/acme/docs:2.1.0" {
		t.Fatalf("record %+v", r)
	}
	code, a, effect := s.post("/facts/prod-eu", token, rollout(nil))
	check("progressing", code, a, 200, rr.EffectApplied, "progressing")
	if effect != "applied" || a.State != rr.StateProgressing || a.ReleaseID != idA || fmt.Sprint(a.Events) != "[deploying]" || a.Recorded == nil || !*a.Recorded {
		t.Fatalf("the answer %+v", a)
	}
	code, a, _ = s.post("/argocd/prod-eu", token, argocd(nil))
	check("a sync failure in flight", code, a, 200, rr.EffectApplied, "sync failed")
	// The sink down: 502, and nothing written.
	writes := s.store.writes()
	s.recv.Refuse(1)
	code, a, _ = s.post("/facts/prod-eu", token, rollout(set("phase", "Healthy")))
	check("the sink refuses", code, a, 502, rr.EffectRefused, "forwarded")
	if s.store.writes() != writes {
		t.Fatal("a failed forward wrote")
	}
	code, a, _ = s.post("/facts/prod-eu", token, rollout(set("phase", "Healthy")))
	check("healthy", code, a, 200, rr.EffectApplied, "healthy")
	code, a, _ = s.post("/facts/prod-eu", token, rollout(nil))
	check("Progressing after healthy", code, a, 202, rr.EffectIgnored, "after the release was healthy: ignored")
	want := "[dev.cdeventsx.delivery-release.deploying.0.1.0 dev.cdeventsx.delivery-release.failed.0.1.0 dev.cdevents.service.deployed.0.3.0]"
	if got := fmt.Sprint(s.recv.Types()); got != want {
		t.Fatalf("events %s", got)
	}
	// An unreadable record: 409, never overwritten.
	s.store.unreadable[idB] = true
	code, a, _ = s.post("/facts/prod-eu", token, rollout(set("releaseId", idB)))
	check("an unreadable record", code, a, 409, rr.EffectRefused, "never overwritten")
	// A body past the bound.
	code, a, _ = s.post("/facts/prod-eu", token, rollout(set("message", strings.Repeat("x", 70<<10))))
	check("past the bound", code, a, 413, rr.EffectRefused, "larger than the bound")
}

func TestNoTokenRefusesEveryFact(t *testing.T) {
	h := newHarness(t)
	facts := &rr.Facts{Service: h.svc, Cluster: "prod-eu", Env: "prod", Sources: []rr.Pushed{rr.Rollouts{}}, Logger: h.svc.Logger}
	mux := http.NewServeMux()
	facts.Routes(mux)
	for _, bearer := range []string{"", "Bearer ", "Bearer x"} {
		req := httptest.NewRequest(http.MethodPost, "/facts/prod-eu", strings.NewReader(rollout(nil)))
		req.Header.Set("Authorization", bearer)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Fatalf("%q: %d", bearer, rec.Code)
		}
	}
}

func TestPrompts(t *testing.T) {
	key := []byte("a-key-of-the-tests")
	prompts := 0
	p := &rr.Prompts{HMACKey: key, Prompt: func() { prompts++ }}
	mux := http.NewServeMux()
	p.Routes(mux)
	post := func(path, signature, body string) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if signature != "" {
			req.Header.Set(rr.SignatureHeader, signature)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code
	}
	body := `{"involvedObject":{"kind":"Kustomization","name":"project-docs"},"reason":"ReconciliationSucceeded"}`
	for _, alg := range []string{"sha256", "sha384", "sha512"} {
		if code := post("/flux", alg+"="+hmacHex(alg, key, []byte(body)), body); code != http.StatusAccepted {
			t.Fatalf("%s signed: %d", alg, code)
		}
	}
	for name, sig := range map[string]string{
		"unsigned": "", "another body's": "sha256=" + hmacHex("sha256", key, []byte("{}")),
		"not hex": "sha256=zz", "no algorithm": "abc", "sha1": "sha1=" + strings.Repeat("0", 40),
	} {
		if code := post("/flux", sig, body); code != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, code)
		}
	}
	if code := post("/flagger", "", `{"name":"docs","phase":"Progressing"}`); code != http.StatusAccepted {
		t.Fatalf("/flagger: %d", code)
	}
	if prompts != 4 {
		t.Fatalf("%d prompts", prompts)
	}
	// Without a key /flux takes any body as a prompt.
	p.HMACKey = nil
	if code := post("/flux", "", "anything"); code != http.StatusAccepted || prompts != 5 {
		t.Fatalf("unsigned without a key: %d", code)
	}
}

func FuzzDecodeRolloutsFact(f *testing.F) {
	f.Add([]byte(rollout(nil)))
	f.Add([]byte(rollout(set("releaseId", ""))))
	f.Add([]byte(`{"phase":"Healthy"}`))
	f.Add([]byte(rollout(set("name", "docs.v2"))))
	f.Add([]byte(rollout(set("uid", "0b6b2a0e-5d1c-4c1e-9a57-1f0e3c2d4b5a"))))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := rr.Rollouts{}.Decode(raw)
		if err != nil {
			return
		}
		// The generation it orders by must be one the record can hold.
		rec := rr.NewRecord(rr.Release{ID: mustID(t, idA)}, now)
		rec.ObjectGeneration = c.Fact.Order.ObjectGeneration
		if _, err := rr.DecodeRecord(rec.Name(), rec.Data()); err != nil {
			t.Fatalf("generation %q: %v", rec.ObjectGeneration, err)
		}
		switch c.Fact.Phase {
		case rr.PhaseProgressing, rr.PhasePaused, rr.PhaseHealthy, rr.PhaseDegraded:
		default:
			t.Fatalf("phase %q decoded", c.Fact.Phase)
		}
	})
}

func FuzzDecodeArgoCDFact(f *testing.F) {
	f.Add([]byte(argocd(nil)))
	f.Add([]byte(argocd(set("releaseId", idA))))
	f.Add([]byte(argocd(func(m map[string]any) {
		m["operationPhase"], m["retryCount"], m["startedAt"] = "Running", 1, "2026-12-02T10:00:00Z"
	})))
	f.Add([]byte(argocd(set("startedAt", "2026-12-02T10:00:00.5+01:00"))))
	f.Add([]byte(`{"app":"docs"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := rr.ArgoCD{}.Decode(raw)
		if err != nil || c.Ignore != "" {
			return
		}
		if c.Fact.Phase != rr.PhaseSyncFailed && (c.Fact.Phase != rr.PhaseMerged || c.ReleaseID == "") {
			t.Fatalf("%+v decoded", c)
		}
		// An order that does not survive the record's form would make the
		// record unreadable.
		if at := c.Fact.Order.SyncStartedAt; !at.IsZero() {
			rec := rr.NewRecord(rr.Release{ID: mustID(t, idA)}, now)
			rec.SyncStartedAt = at.UTC().Truncate(time.Second)
			if _, err := rr.DecodeRecord(rec.Name(), rec.Data()); err != nil {
				t.Fatalf("startedAt %v: %v", at, err)
			}
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	key := []byte("k")
	f.Add([]byte("{}"), "sha256="+hmacHex("sha256", key, []byte("{}")))
	f.Add([]byte("{}"), "sha512=00")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		if rr.VerifySignature(key, body, header) == nil {
			alg, _, _ := strings.Cut(header, "=")
			if want := alg + "=" + hmacHex(alg, key, body); !strings.EqualFold(header, want) {
				t.Fatalf("%q verified for %q", header, body)
			}
		}
	})
}

// TestTheTemplatesRenderFactsTheSchemasTake renders deploy/argo's templates
// as the notification engines do (Go templates with toJson) over a Rollout
// and an Application, and decodes what they produce.
func TestTheTemplatesRenderFactsTheSchemasTake(t *testing.T) {
	rolloutObj := `{"metadata":{"name":"docs","namespace":"docs","generation":7,"annotations":{"delivery.jorisjonkers.dev/release-id":"` + idA + `"}},
		"status":{"phase":"Degraded","abort":true,"currentPodHash":"6d4f9c7b8","observedGeneration":"7","message":"RolloutAborted: \"analysis\" failed"}}`
	body := renderTemplate(t, "../../deploy/argo/rollouts-notifications.yaml", "template.release-record-fact", "rollout", rolloutObj)
	c, err := rr.Rollouts{}.Decode(body)
	if err != nil || c.ReleaseID != idA || c.Fact.Phase != rr.PhaseDegraded || !c.Fact.Abort || c.Fact.PodHash != "6d4f9c7b8" ||
		c.Generation != "7" || c.ObservedGeneration != "7" || c.Fact.Message != `RolloutAborted: "analysis" failed` {
		t.Fatalf("%s: %+v %v", body, c, err)
	}
	bare := `{"metadata":{"name":"docs","namespace":"docs","generation":1},"status":{"phase":"Progressing"}}`
	if c, err := (rr.Rollouts{}).Decode(renderTemplate(t, "../../deploy/argo/rollouts-notifications.yaml", "template.release-record-fact", "rollout", bare)); err != nil || c.Ignore == "" {
		t.Fatalf("an untracked Rollout: %+v %v", c, err)
	}
	app := `{"metadata":{"name":"docs-prod","labels":{"delivery.jorisjonkers.dev/app":"docs","delivery.jorisjonkers.dev/env":"prod"},
		"annotations":{"delivery.jorisjonkers.dev/release-id":"` + idA + `","delivery.jorisjonkers.dev/image":"ghcr.io/acme/docs:2.1.0"}},
		"spec":{"destination":{"namespace":"docs"},"source":{"repoURL":"https://github.com/acme/docs"}},
		"status":{"sync":{"revision":"0123abc"},"operationState":{"phase":"Running","retryCount":%d,"message":"%s"}}}`
	c, err = rr.ArgoCD{}.Decode(renderTemplate(t, "../../deploy/argo/argocd-notifications.yaml", "template.release-record-sync", "app", fmt.Sprintf(app, 0, "syncing")))
	if err != nil || c.ReleaseID != idA || c.Fact.Phase != rr.PhaseMerged || c.Revision != "0123abc" || c.Fact.Release.GitURL != "https://github.com/acme/docs" ||
		c.Fact.Release.Image != "ghcr.io/acme/docs:2.1.0" || c.App != "docs" || c.Env != "prod" {
		t.Fatalf("%+v %v", c, err)
	}
	// Argo CD's first retry of a failed attempt: a sync failure at once.
	c, err = rr.ArgoCD{}.Decode(renderTemplate(t, "../../deploy/argo/argocd-notifications.yaml", "template.release-record-sync", "app", fmt.Sprintf(app, 1, "one or more objects failed to apply")))
	if err != nil || c.ReleaseID != idA || c.Fact.Phase != rr.PhaseSyncFailed || c.Fact.Message != "one or more objects failed to apply" {
		t.Fatalf("a retry: %+v %v", c, err)
	}
	unlabelled := `{"metadata":{"name":"other"},"spec":{"destination":{"namespace":"x"}},"status":{"sync":{"revision":"r"}}}`
	if c, err := (rr.ArgoCD{}).Decode(renderTemplate(t, "../../deploy/argo/argocd-notifications.yaml", "template.release-record-sync", "app", unlabelled)); err != nil || c.Ignore == "" {
		t.Fatalf("an untracked Application: %+v %v", c, err)
	}
}

func renderTemplate(t *testing.T, file, key, name, object string) []byte {
	t.Helper()
	body, err := notificationBody(file, key)
	if err != nil {
		t.Fatal(err)
	}
	var obj any
	if err := json.Unmarshal([]byte(object), &obj); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := body.Execute(&out, map[string]any{name: obj}); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return out.Bytes()
}

// TestFactsInAnyOrder: a Rollout's fact before its sync's starts the
// record, which the sync then fills; Argo CD's first retry of a failed sync
// fails the release at once, with one failure however many retries follow.
func TestFactsInAnyOrder(t *testing.T) {
	s := newFactServer(t)
	code, a, _ := s.post("/facts/prod-eu", token, rollout(nil))
	if code != 200 || a.State != rr.StateProgressing || fmt.Sprint(a.Events) != "[deploying]" || !strings.Contains(a.Why, "merged by its first fact") {
		t.Fatalf("a Rollout before its sync: %d %+v", code, a)
	}
	sync := func(phase string, retries int) func(map[string]any) {
		return func(m map[string]any) {
			m["releaseId"], m["operationPhase"], m["retryCount"], m["image"], m["startedAt"] = idA, phase, retries, "ghcr.io/acme/docs:2.1.0", "2026-12-02T09:59:00Z"
		}
	}
	code, a, _ = s.post("/argocd/prod-eu", token, argocd(sync("Running", 0)))
	if code != 200 || a.State != rr.StateProgressing || len(a.Events) != 0 || !strings.Contains(a.Why, "learnt its git revision 0123abc") {
		t.Fatalf("the sync after: %d %+v", code, a)
	}
	r := s.store.record(idA)
	if r.Image != "ghcr.io/acme/docs:2.1.0" || r.GitURL != "https://github.com/acme/docs" || r.ObjectGeneration != "Rollout/docs/docs=7" ||
		!r.SyncStartedAt.Equal(time.Date(2026, 12, 2, 9, 59, 0, 0, time.UTC)) || !r.MergedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("record %+v", r)
	}
	for i, tc := range []struct {
		phase   string
		retries int
		code    int
		events  string
		why     string
	}{
		{"Running", 1, 200, "[failed.sync-failed]", "sync failed"},
		{"Running", 2, 202, "[]", "still failing to sync"},
		{"Failed", 5, 202, "[]", "still failing to sync"},
	} {
		code, a, _ := s.post("/argocd/prod-eu", token, argocd(sync(tc.phase, tc.retries)))
		if code != tc.code || fmt.Sprint(a.Events) != tc.events || !strings.Contains(a.Why, tc.why) || a.State != rr.StateSyncFailed {
			t.Fatalf("%d: %s retry %d: %d %+v", i, tc.phase, tc.retries, code, a)
		}
	}
	// The first retry with no release id fails the app's release in flight.
	s.take(idB, rr.PhaseMerged)
	code, a, _ = s.post("/argocd/prod-eu", token, argocd(func(m map[string]any) { m["operationPhase"], m["retryCount"], m["revision"] = "Running", 1, "" }))
	if code != 200 || a.ReleaseID != idB || a.State != rr.StateSyncFailed {
		t.Fatalf("a retry in flight: %d %+v", code, a)
	}
	want := "[dev.cdeventsx.delivery-release.deploying.0.1.0 dev.cdeventsx.delivery-release.failed.0.1.0 " +
		"dev.cdeventsx.delivery-release.deploying.0.1.0 dev.cdeventsx.delivery-release.failed.0.1.0]"
	if got := fmt.Sprint(s.recv.Types()); got != want {
		t.Fatalf("events %s", got)
	}
}
