package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	pin      = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	token    = "facts-token-for-the-tests"
	hmacKey  = "hmac-key-for-the-tests"
	rbacFile = "../../deploy/release-record/rbac.yaml"
)

// started is the binary running under its grant, on a free address.
type started struct {
	t    *testing.T
	addr string
	logs *testenv.LogBuffer
	done chan int
	stop context.CancelFunc
}

func start(t *testing.T, env map[string]string) *started {
	t.Helper()
	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	env["ADDR"] = addr
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{t: t, addr: addr, logs: &testenv.LogBuffer{}, done: make(chan int, 1), stop: cancel}
	go func() { s.done <- run(ctx, nil, testenv.Getenv(env), time.Now, io.Discard, s.logs) }()
	s.eventually("the server answers", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return s
}

func (s *started) eventually(what string, ok func() bool) {
	s.t.Helper()
	wait.Poll{Within: 20 * time.Second, Every: 25 * time.Millisecond, Detail: s.logs}.For(s.t, what, ok)
}

func (s *started) post(path string, header map[string]string, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(releaserecord.EffectHeader) + " " + string(raw)
}

func (s *started) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.addr + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func (s *started) end() {
	s.t.Helper()
	s.stop()
	select {
	case code := <-s.done:
		if code != 0 {
			s.t.Fatalf("exit %d; logs:\n%s", code, s.logs)
		}
	case <-time.After(30 * time.Second):
		s.t.Fatal("did not stop")
	}
}

func sign(body string) string {
	mac := hmac.New(sha256.New, []byte(hmacKey))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestRunUnderItsGrant runs the binary whole: it looks at a Flux unit at
// start and again on a signed /flux, takes an Argo Rollouts fact, and sends
// every event to a real CloudEvents receiver.
func TestRunUnderItsGrant(t *testing.T) {
	cp := testenv.Shared(t)
	ctx := context.Background()
	fluxNS := cp.Namespace(t)
	recordNS, kubeconfig := cp.GrantRecordsKubeconfig(t, rbacFile, "release-record")
	applyUnit := func(version, applied, ready string) {
		t.Helper()
		fluxunit.Unit{Namespace: fluxNS, Project: "docs", Pin: pin, Repository: "acme/docs", Version: version,
			Applied: applied, Attempted: "latest@" + pin, Ready: ready, Reason: "Progressing"}.Apply(t, cp)
	}
	applyUnit("2.1.0", "", "Unknown")
	recv := cdeventstest.Start(t)
	s := start(t, map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "RECORD_NAMESPACE": recordNS, "CDEVENTS_SINK": recv.URL,
		"FACTS_TOKEN": token, "ALLOWED_NAMESPACES": "docs|shop", "FLUX_NAMESPACE": fluxNS, "FLUX_WEBHOOK_HMAC_KEY": hmacKey,
		"GATE_URL": "http://127.0.0.1:1", "INTERVAL": "1h", "KUBECONFIG": kubeconfig})
	record := func(id string) releaserecord.Record {
		got, err := cp.Kube.CoreV1().ConfigMaps(recordNS).Get(ctx, releaserecord.RecordName(id), metav1.GetOptions{})
		if err != nil {
			return releaserecord.Record{}
		}
		r, _ := releaserecord.DecodeRecord(got.Name, got.Data)
		return r
	}
	const flux = "docs@2.1.0:prod-eu/prod"
	s.eventually("the first look's record", func() bool { return record(flux).State == releaserecord.StateMerged })

	// An unsigned or wrongly signed /flux is refused; a signed one prompts.
	event := `{"involvedObject":{"kind":"Kustomization","name":"project-docs"},"reason":"ReconciliationSucceeded"}`
	if code, _ := s.post("/flux", nil, event); code != http.StatusUnauthorized {
		t.Fatalf("an unsigned /flux: %d", code)
	}
	if code, _ := s.post("/flux", map[string]string{"X-Signature": sign("{}")}, event); code != http.StatusUnauthorized {
		t.Fatalf("a /flux signed over another body: %d", code)
	}
	applyUnit("2.1.0", "latest@"+pin, "True")
	if code, _ := s.post("/flux", map[string]string{"X-Signature": sign(event)}, event); code != http.StatusAccepted {
		t.Fatalf("a signed /flux: %d", code)
	}
	s.eventually("healthy", func() bool { return record(flux).State == releaserecord.StateHealthy })
	if code, _ := s.post("/flagger", nil, `{"name":"api","phase":"Succeeded"}`); code != http.StatusAccepted {
		t.Fatalf("/flagger: %d", code)
	}

	// Argo Rollouts: the token is required; a Rollout's fact before its
	// sync's starts the release's record, and the sync fills it after.
	bearer := map[string]string{"Authorization": "Bearer " + token}
	fact := `{"namespace":"shop","name":"api","releaseId":"api@1.4.0:prod-eu/prod","phase":"Healthy","aborted":false,"podTemplateHash":"6d4f9c7b8","generation":"3","observedGeneration":"3","message":""}`
	if code, _ := s.post("/facts/prod-eu", nil, fact); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, body := s.post("/facts/prod-eu", bearer, fact); code != http.StatusOK || !strings.HasPrefix(body, "applied") || !strings.Contains(body, `"state":"healthy"`) {
		t.Fatalf("healthy before its sync: %d %s", code, body)
	}
	merged := `{"namespace":"shop","name":"api-prod","app":"api","env":"prod","releaseId":"api@1.4.0:prod-eu/prod","rollbackOf":"","image":"ghcr.io/acme/api:1.4.0","operationPhase":"Running","retryCount":0,"message":"","revision":"abc","repoURL":"https://github.com/acme/api"}`
	if code, body := s.post("/argocd/prod-eu", bearer, merged); code != http.StatusOK || !strings.Contains(body, "learnt its git revision abc") {
		t.Fatalf("its sync after: %d %s", code, body)
	}
	if code, body := s.post("/facts/prod-eu", bearer, fact); code != http.StatusAccepted || !strings.HasPrefix(body, "ignored") {
		t.Fatalf("healthy again: %d %s", code, body)
	}
	// Another env's Application on this cluster is not this service's: 202,
	// so its notifications engine does not send it again for ever.
	stage := strings.ReplaceAll(merged, `"env":"prod","releaseId":"api@1.4.0:prod-eu/prod"`, `"env":"stage","releaseId":"api@1.4.0:prod-eu/stage"`)
	if code, body := s.post("/argocd/prod-eu", bearer, stage); code != http.StatusAccepted || !strings.Contains(body, "another service's") {
		t.Fatalf("another env: %d %s", code, body)
	}
	if code, body := s.post("/facts/prod-us", bearer, fact); code != http.StatusBadRequest {
		t.Fatalf("another cluster: %d %s", code, body)
	}
	got := recv.WaitFor(t, 4, 10*time.Second)
	var types []string
	for _, e := range got {
		types = append(types, releaserecord.TypeOf(e.CDEvent).String())
	}
	want := []string{"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.deployed.0.3.0",
		"dev.cdeventsx.delivery-release.deploying.0.1.0", "dev.cdevents.service.deployed.0.3.0"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v", types)
	}
	resp, err := http.Get("http://" + s.addr + "/fresh")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/fresh: %v %v", resp, err)
	}
	resp.Body.Close()
	// The read side answers from the same records, under the same grant.
	s.eventually("the read API lists both releases", func() bool {
		code, body := s.get("/v1/releases?state=healthy")
		return code == http.StatusOK && strings.Contains(body, `"releaseId":"`+flux+`"`) && strings.Contains(body, `"releaseId":"api@1.4.0:prod-eu/prod"`)
	})
	if code, body := s.get("/v1/rollback-eligible?app=api&env=prod&cluster=prod-eu&image=ghcr.io/acme/api:1.4.0"); code != http.StatusOK || !strings.Contains(body, `"eligible":true`) {
		t.Fatalf("rollback-eligible: %d %s", code, body)
	}
	// The figures answer the metrics stack alone (releasehistory's tests
	// scrape them): with no scraper set, no one.
	if code, body := s.get("/metrics"); code != http.StatusForbidden || !strings.Contains(body, "metrics stack alone") {
		t.Fatalf("/metrics with no scraper set: %d %s", code, body)
	}
	s.end()
}

// TestShadowModeSendsNothing: with FACTS_MODE=shadow and no sink, a pushed
// fact's events are logged as shadow-event and kept in emittedShadow.
func TestShadowModeSendsNothing(t *testing.T) {
	cp := testenv.Shared(t)
	recordNS, kubeconfig := cp.GrantRecordsKubeconfig(t, rbacFile, "release-record")
	s := start(t, map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "RECORD_NAMESPACE": recordNS, "FACTS_MODE": "shadow",
		"FACTS_TOKEN": token, "FLUX_OBSERVE": "false", "KUBECONFIG": kubeconfig})
	bearer := map[string]string{"Authorization": "Bearer " + token}
	merged := `{"namespace":"shop","name":"api-prod","app":"api","env":"prod","releaseId":"api@1.4.0:prod-eu/prod","rollbackOf":"","image":"","operationPhase":"Succeeded","retryCount":0,"message":"","revision":"abc","repoURL":""}`
	failed := `{"namespace":"shop","name":"api-prod","app":"api","env":"prod","releaseId":"","rollbackOf":"","image":"","operationPhase":"Failed","retryCount":3,"message":"one or more objects failed to apply","revision":"abc","repoURL":""}`
	for _, body := range []string{merged, failed} {
		if code, answer := s.post("/argocd/prod-eu", bearer, body); code != http.StatusOK {
			t.Fatalf("%d %s", code, answer)
		}
	}
	if n := strings.Count(s.logs.String(), `"msg":"shadow-event"`); n != 2 {
		t.Fatalf("%d shadow-event lines:\n%s", n, s.logs)
	}
	cm, err := cp.Kube.CoreV1().ConfigMaps(recordNS).Get(context.Background(), releaserecord.RecordName("api@1.4.0:prod-eu/prod"), metav1.GetOptions{})
	if err != nil || cm.Data["emittedShadow"] != "deploying,failed.sync-failed" || cm.Data["emittedLive"] != "" || cm.Data["state"] != "sync-failed" {
		t.Fatalf("%v %v", cm.Data, err)
	}
	if code, _ := s.post("/flux", nil, "{}"); code != http.StatusAccepted {
		t.Fatal("/flux without observing")
	}
	s.end()
}

func TestBadConfigurationStopsAtStart(t *testing.T) {
	good := map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "CDEVENTS_SINK": "http://sink.example/"}
	cfg, err := loadConfig(testenv.Getenv(good))
	if err != nil || cfg.recordNamespace != "delivery-system" || cfg.mode != releaserecord.ModeEmit || cfg.fluxNamespace != "flux-system" ||
		cfg.interval != 30*time.Second || cfg.addr != ":8080" || cfg.gateURL != releaserecord.DefaultGateURL || !cfg.observeFlux || !cfg.namespaces.MatchString("any") {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	for name, change := range map[string][2]string{
		"no cluster":                  {"CLUSTER_NAME", ""},
		"no environment":              {"ENVIRONMENT", ""},
		"a cluster no label":          {"CLUSTER_NAME", "Prod EU"},
		"no sink in emit":             {"CDEVENTS_SINK", ""},
		"a sink not http":             {"CDEVENTS_SINK", "sink.example:80"},
		"a sink with a login":         {"CDEVENTS_SINK", "https://user:pw@sink.example/"},
		"an unknown mode":             {"FACTS_MODE", "loud"},
		"a pattern that fails":        {"ALLOWED_NAMESPACES", "("},
		"observe neither":             {"FLUX_OBSERVE", "maybe"},
		"an interval":                 {"INTERVAL", "soon"},
		"a gate not http":             {"GATE_URL", "release-gate:8080"},
		"a read cache":                {"READ_CACHE", "briefly"},
		"keep none healthy":           {"KEEP_HEALTHY", "0"},
		"an object link not http":     {"OBJECT_LINK", "javascript:alert('{name}')"},
		"an object link with a login": {"OBJECT_LINK", "https://user:pw@ui.example/{name}"},
	} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		env[change[0]] = change[1]
		logs := &testenv.LogBuffer{}
		if code := run(context.Background(), nil, testenv.Getenv(env), time.Now, io.Discard, logs); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
		if lines := strings.Count(strings.TrimSpace(logs.String()), "\n") + 1; lines != 1 || !strings.Contains(logs.String(), change[0]) ||
			!strings.Contains(logs.String(), `"msg":"`+cli.BadSettingMsg+`"`) {
			t.Errorf("%s: log %q", name, logs)
		}
	}
	// Shadow mode needs no sink.
	if _, err := loadConfig(testenv.Getenv(map[string]string{"CLUSTER_NAME": "c", "ENVIRONMENT": "e", "FACTS_MODE": "shadow"})); err != nil {
		t.Fatal(err)
	}
}

func TestNoClusterStopsAtStart(t *testing.T) {
	env := map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "CDEVENTS_SINK": "http://sink.example/",
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing")}
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, testenv.Getenv(env), time.Now, io.Discard, logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
}

// variables are the variables the table in docs/release-record.md names.
var variables = []string{"CLUSTER_NAME", "ENVIRONMENT", "RECORD_NAMESPACE", "FACTS_MODE", "CDEVENTS_SINK", "FACTS_TOKEN",
	"ALLOWED_NAMESPACES", "FLUX_OBSERVE", "FLUX_NAMESPACE", "FLUX_WEBHOOK_HMAC_KEY", "GATE_URL", "GATE_NAMESPACE", "INTERVAL", "ADDR", "READ_CACHE", "OBJECT_LINK", "KEEP_HEALTHY", "KUBECONFIG", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "release-record", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, time.Now, stdout, stderr)
	}})
}

// TestHelpNamesEveryVariableItReads starts it with a configuration that
// stops only at the cluster, the last thing it reads.
func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "CDEVENTS_SINK": "http://sink.example/",
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing")})
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, env.Getenv, time.Now, io.Discard, logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
	env.Named(t, variables)
}
