package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/agent"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// waitGone waits until pid is no more, failing after a deadline.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	wait.Poll{Within: 10 * time.Second, Every: 10 * time.Millisecond}.For(t, fmt.Sprintf("process %d gone", pid), func() bool { return !alive(pid) })
}

// TestStopReachesTheWholeGroup: a command that ignores SIGTERM is killed
// after the grace, and what it started goes with it.
func TestStopReachesTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	script := "trap '' TERM; sleep 60 & echo $! > child; wait"
	logs := &testenv.LogBuffer{}
	p, err := agent.StartProcess(dir, composition.Command{Argv: []string{"sh", "-c", script}}, logs)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	wait.Poll{Within: 10 * time.Second, Every: 10 * time.Millisecond, Detail: logs}.For(t, "the command's child", func() bool {
		raw, _ := os.ReadFile(filepath.Join(dir, "child"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return child != 0
	})
	start := time.Now()
	p.Stop(300 * time.Millisecond)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("stopped in %s: SIGTERM was not ignored, so this test shows nothing", took)
	}
	waitGone(t, child)
}

// TestAProcessRunsInItsFolderWithItsEnvironment: argv[0] inside the
// version's folder, the working directory and the environment as the
// composition says, and nothing of the agent's own environment but PATH.
func TestAProcessRunsInItsFolderWithItsEnvironment(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "run"), []byte("#!/bin/sh\necho \"$GREETING $(pwd) ${HOME:-nohome}\"\n"), 0o755); err != nil { //nolint:gosec // a script the test runs
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	p, err := agent.StartProcess(dir, composition.Command{Argv: []string{"bin/run"}, Env: map[string]string{"GREETING": "hello"}, Dir: "work"}, logs)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if got, want := strings.TrimSpace(logs.String()), "hello "+filepath.Join(dir, "work")+" nohome"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

func TestCheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ok.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer failing.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	h := func(url string, cmd ...string) composition.Health {
		return composition.Health{HTTP: url, Command: cmd, Interval: composition.Duration(time.Second), Timeout: composition.Duration(200 * time.Millisecond)}
	}
	for _, c := range []struct {
		name string
		h    composition.Health
		ok   bool
	}{
		{"an HTTP 200", h(ok.URL), true},
		{"an HTTP 503", h(failing.URL), false},
		{"an HTTP server slower than the timeout", h(slow.URL), false},
		{"a command that exits 0", h("", "true"), true},
		{"a command that exits 1", h("", "false"), false},
		{"a command slower than the timeout", h("", "sleep", "5"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := agent.Check(context.Background(), c.h, t.TempDir()); (err == nil) != c.ok {
				t.Fatalf("check: %v, want ok %v", err, c.ok)
			}
		})
	}
}
