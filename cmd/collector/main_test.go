package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/collector"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestRunCapturesServesFreshAndDrains(t *testing.T) {
	cp := testenv.Shared(t)
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := fakegithub.New(t)
	fake.AddRepository("estate-org/estate")
	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"CLUSTER_NAME": "production", "ESTATE_REPOSITORY": "estate-org/estate", "ESTATE_PATH": "clusters/production/cluster-state.yml",
		"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"GITHUB_API_URL": fake.EnterpriseURL(), "INTERVAL": "300ms", "ADDR": addr, "KUBECONFIG": kubeconfigPath,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &testenv.LogBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs) }()

	poll := wait.Poll{Within: 10 * time.Second, Every: 50 * time.Millisecond, Detail: logs}
	eventually := func(what string, ok func() bool) { t.Helper(); poll.For(t, what, ok) }
	fresh := func() int {
		resp, err := http.Get("http://" + addr + "/fresh")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually("the first commit", func() bool {
		_, _, ok := fake.File("estate-org/estate", "clusters/production/cluster-state.yml")
		return ok
	})
	content, _, _ := fake.File("estate-org/estate", "clusters/production/cluster-state.yml")
	if s, err := collector.Decode(content); err != nil || s.Cluster != "production" {
		t.Fatalf("committed %v %v", s, err)
	}
	if code := fresh(); code != http.StatusOK {
		t.Fatalf("/fresh after a capture: %d", code)
	}
	// Captures that keep failing flip /fresh to 503 after twice the interval,
	// and each failure is logged while the loop keeps going.
	fake.FailWith(http.StatusBadGateway)
	eventually("/fresh answering 503", func() bool { return fresh() == http.StatusServiceUnavailable })
	if !strings.Contains(logs.String(), `"msg":"capture failed"`) {
		t.Fatalf("no failure logged:\n%s", logs)
	}
	fake.FailWith(0)
	eventually("/fresh recovering", func() bool { return fresh() == http.StatusOK })
	if n := len(fake.Commits("estate-org/estate")); n != 1 {
		t.Fatalf("an unchanged cluster was committed %d times", n)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; logs:\n%s", code, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the binary did not stop")
	}
}

func TestBadConfigurationStopsWithOneLineNamingIt(t *testing.T) {
	fake := fakegithub.New(t)
	good := map[string]string{
		"CLUSTER_NAME": "production", "ESTATE_REPOSITORY": "estate-org/estate",
		"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing"), "ADDR": "127.0.0.1:0",
	}
	cases := []struct {
		change map[string]string
		names  string
	}{
		{map[string]string{"CLUSTER_NAME": ""}, "CLUSTER_NAME"},
		{map[string]string{"ESTATE_REPOSITORY": ""}, "ESTATE_REPOSITORY"},
		{map[string]string{"ESTATE_REPOSITORY": "estate"}, "ESTATE_REPOSITORY"},
		{map[string]string{"INTERVAL": "often"}, "INTERVAL"},
		{map[string]string{"ADDR": "nonsense"}, "ADDR"},
		{map[string]string{"GITHUB_APP_ID": "x"}, "GITHUB_APP_ID"},
		{map[string]string{"GITHUB_APP_INSTALLATION_ID": ""}, "GITHUB_APP_INSTALLATION_ID"},
		{map[string]string{"GITHUB_APP_PRIVATE_KEY": ""}, "GITHUB_APP_PRIVATE_KEY"},
		{map[string]string{"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_PRIVATE_KEY_FILE": "/nonexistent/key.pem"}, "GITHUB_APP_PRIVATE_KEY_FILE"},
		{map[string]string{"GITHUB_API_URL": "not a url"}, "GITHUB_API_URL"},
		{nil, "KUBECONFIG"},
	}
	for _, tc := range cases {
		t.Run(tc.names, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range good {
				env[k] = v
			}
			for k, v := range tc.change {
				env[k] = v
			}
			var logs bytes.Buffer
			if code := run(context.Background(), nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, &logs); code != 2 {
				t.Fatalf("exit %d with a bad configuration, want 2", code)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			var line struct {
				Level, Msg, Error string
			}
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil || line.Level != "ERROR" || line.Msg != cli.BadSettingMsg ||
				!strings.Contains(line.Error, tc.names) {
				t.Fatalf("logs %q, want one JSON error line naming %s", logs.String(), tc.names)
			}
		})
	}
}

func TestAnAddressInUseStopsTheBinary(t *testing.T) {
	fake := fakegithub.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	unreachable := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(unreachable), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"CLUSTER_NAME": "production", "ESTATE_REPOSITORY": "estate-org/estate",
		"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"GITHUB_API_URL": fake.URL(), "KUBECONFIG": kubeconfig, "ADDR": taken.Addr().String(),
	}
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), nil, testenv.Getenv(env), os.ReadFile, time.Now, io.Discard, logs); code != 1 {
		t.Fatalf("exit %d with the address taken", code)
	}
	if !strings.Contains(logs.String(), `"msg":"server stopped"`) || !strings.Contains(logs.String(), "listen on") {
		t.Fatalf("logs:\n%s", logs)
	}
}

// variables are the variables the table in docs/collector.md names for the Collector.
var variables = []string{"CLUSTER_NAME", "ESTATE_REPOSITORY", "ESTATE_PATH", "ESTATE_BRANCH", "GITHUB_APP_ID",
	"GITHUB_APP_INSTALLATION_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE", "GITHUB_API_URL", "INTERVAL", "ADDR", "KUBECONFIG", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "collector", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, os.ReadFile, time.Now, stdout, stderr)
	}})
}

// TestHelpNamesEveryVariableItReads starts the Collector with a
// configuration that stops only at the cluster, the last thing it reads.
func TestHelpNamesEveryVariableItReads(t *testing.T) {
	fake := fakegithub.New(t)
	env := clitest.Record(map[string]string{
		"CLUSTER_NAME": "production", "ESTATE_REPOSITORY": "estate-org/estate",
		"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM),
		"KUBECONFIG": filepath.Join(t.TempDir(), "missing"),
	})
	var logs bytes.Buffer
	if code := run(context.Background(), nil, env.Getenv, os.ReadFile, time.Now, io.Discard, &logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d: %s", code, logs.String())
	}
	env.Named(t, variables)
}
