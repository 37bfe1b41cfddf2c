package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/periodic"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const pin = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// TestRunReportsAndAForgedEventWritesNothing runs the binary whole under its
// grant: it reports a release at start, a Flux event prompts a pass that
// finds the cluster as it is (so a forged event naming anything writes
// nothing), and a real change prompted by an event is written.
func TestRunReportsAndAForgedEventWritesNothing(t *testing.T) {
	cp := testenv.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fluxNS := cp.Namespace(t)
	apply := func(ready string) {
		t.Helper()
		fluxunit.Unit{Namespace: fluxNS, Project: "docs", Pin: pin, Repository: "acme/docs", Version: "2.1.0", URL: "https://docs.example",
			Applied: "latest@" + pin, Attempted: "latest@" + pin, Ready: ready, Reason: "Progressing"}.Apply(t, cp)
	}
	apply("Unknown")
	fake := fakegithub.New(t)
	id := fake.AddDeployment("acme/docs", fakegithub.NewDeployment{Payload: json.RawMessage(`{"project":"docs","version":"2.1.0"}`)})
	fake.AddStatus("acme/docs", id, fakegithub.Status{State: "queued", LogURL: "https://ci.example/runs/9"})
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"readAt":"2026-11-30T10:00:00Z","truncated":false,"applications":[]}`))
	}))
	defer gate.Close()

	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"GITHUB_API_URL": fake.URL(), "FLUX_NAMESPACE": fluxNS, "INTERVAL": "1h", "ADDR": addr,
		"GATE_URL": gate.URL, "KUBECONFIG": cp.GrantKubeconfig(t, "../../deploy/reporter/rbac.yaml", "delivery-system", "reporter"),
	}
	logs := &testenv.LogBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs) }()
	poll := wait.Poll{Within: 15 * time.Second, Every: 50 * time.Millisecond, Detail: logs}
	eventually := func(what string, ok func() bool) { t.Helper(); poll.For(t, what, ok) }
	statuses := func() []fakegithub.Status { return fake.Statuses("acme/docs", id) }
	eventually("the first pass's status", func() bool { return len(statuses()) == 2 })
	if got := statuses()[1]; got.State != "in_progress" || got.Description != "applied by Flux" ||
		got.LogURL != "https://ci.example/runs/9" || got.EnvironmentURL != "https://docs.example" {
		t.Fatalf("first status %+v", got)
	}
	post := func(body string) int {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/flux", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	passes := func() int { return fake.CallsMatching("GET", "/repos/acme/docs/deployments/") }

	// A forged event claiming the release succeeded prompts a pass, which
	// finds the cluster unchanged and writes nothing.
	before := passes()
	forged := `{"involvedObject":{"kind":"Kustomization","name":"project-docs","namespace":"` + fluxNS + `"},"severity":"info","reason":"ReconciliationSucceeded","message":"docs 2.1.0 ready","metadata":{"revision":"` + pin + `"}}`
	if code := post(forged); code != http.StatusAccepted {
		t.Fatalf("/flux answered %d", code)
	}
	eventually("the prompted pass", func() bool { return passes() > before })
	// Passes never overlap: once one more prompted pass has read GitHub,
	// the forged event's pass has finished, writes and all.
	prompted := passes()
	post(`{}`)
	eventually("a pass after it", func() bool { return passes() > prompted })
	if n := len(statuses()); n != 2 || fake.CallsMatching("POST", "/statuses") != 1 {
		t.Fatalf("a forged event wrote: %+v", statuses())
	}
	// A body beyond the bound is refused.
	if code := post(strings.Repeat("x", 2<<20)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized event answered %d", code)
	}

	// A real change, prompted by an event, is written.
	apply("True")
	post(`{}`)
	eventually("the success", func() bool { return len(statuses()) == 3 })
	if got := statuses()[2]; got.State != "success" || got.Description != "docs 2.1.0 applied by Flux and ready" {
		t.Fatalf("second status %+v", got)
	}
	resp, err := http.Get("http://" + addr + "/fresh")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/fresh: %v %v", resp, err)
	}
	resp.Body.Close()

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; logs:\n%s", code, logs)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("did not stop")
	}
}

func TestBadConfigurationStopsAtStart(t *testing.T) {
	fake := fakegithub.New(t)
	good := map[string]string{"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM)}
	cfg, err := loadConfig(testenv.Getenv(good), os.ReadFile)
	if err != nil || cfg.namespace != "flux-system" || cfg.interval != 30*time.Second || cfg.addr != ":8080" || cfg.gateURL != DefaultGateURL {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	for name, change := range map[string][2]string{
		"interval":  {"INTERVAL", "soon"},
		"gate URL":  {"GATE_URL", "release-gate:8080"},
		"no app id": {"GITHUB_APP_ID", ""},
	} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		env[change[0]] = change[1]
		logs := &testenv.LogBuffer{}
		if code := run(context.Background(), nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
		if lines := strings.Count(strings.TrimSpace(logs.String()), "\n") + 1; lines != 1 || !strings.Contains(logs.String(), change[0]) ||
			!strings.Contains(logs.String(), `"msg":"`+cli.BadSettingMsg+`"`) {
			t.Errorf("%s: log %q", name, logs)
		}
	}
}

type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestFluxEventBoundsAndDiscardsTheBody covers what the server's own bound
// does not: a body of unknown length past the bound, and one that breaks.
func TestFluxEventBoundsAndDiscardsTheBody(t *testing.T) {
	handler := fluxEvent(&periodic.Loop{Interval: time.Hour})
	for name, tc := range map[string]struct {
		body io.Reader
		want int
	}{
		"within the bound": {strings.NewReader(`{"message":"anything"}`), http.StatusAccepted},
		"past the bound":   {strings.NewReader(strings.Repeat("x", 64)), http.StatusRequestEntityTooLarge},
		"broken":           {failingBody{}, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/flux", tc.body)
		req.Body = http.MaxBytesReader(rec, io.NopCloser(tc.body), 32)
		handler(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d", name, rec.Code)
		}
	}
}

func TestNoClusterStopsAtStart(t *testing.T) {
	fake := fakegithub.New(t)
	env := map[string]string{"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing")}
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
}

func TestAnAddressInUseStopsIt(t *testing.T) {
	cp := testenv.Shared(t)
	fake := fakegithub.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := map[string]string{"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"GITHUB_API_URL": fake.URL(), "FLUX_NAMESPACE": cp.Namespace(t), "ADDR": ln.Addr().String(), "KUBECONFIG": cp.GrantKubeconfig(t, "../../deploy/reporter/rbac.yaml", "delivery-system", "reporter")}
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs); code != 1 || !strings.Contains(logs.String(), "server stopped") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
}

// variables are the variables the table in docs/reporter.md names for the Reporter.
var variables = []string{"GITHUB_APP_ID", "GITHUB_APP_INSTALLATION_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE",
	"GITHUB_API_URL", "FLUX_NAMESPACE", "INTERVAL", "ADDR", "GATE_URL", "KUBECONFIG", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "reporter", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, os.ReadFile, time.Now, stdout, stderr)
	}})
}

// TestHelpNamesEveryVariableItReads starts the Reporter with a
// configuration that stops only at the cluster, the last thing it reads.
func TestHelpNamesEveryVariableItReads(t *testing.T) {
	fake := fakegithub.New(t)
	env := clitest.Record(map[string]string{"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002",
		"GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM), "KUBECONFIG": filepath.Join(t.TempDir(), "missing")})
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, env.Getenv, os.ReadFile, time.Now, io.Discard, logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
	env.Named(t, variables)
}
