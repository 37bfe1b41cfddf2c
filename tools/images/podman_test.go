package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podman runs podman as root against storage of its own, thrown away when
// the test ends: runc as the runtime (the default crun fails on some hosts'
// cgroups) and ulimits podman would otherwise read from the host's limits.
// Its per-boot folder and its locks are its own too: with the host's
// /run/libpod and shared-memory locks, two test runs at once take each
// other's lock numbers, and one's reset makes the other's podman think the
// host rebooted.
type podman struct {
	dir  string
	root []string // the flags that pick the throwaway storage
	env  []string
}

const containersConf = `[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]

[engine]
runtime = "runc"
lock_type = "file"
tmp_dir = %q
`

func newPodman(t *testing.T) *podman {
	t.Helper()
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: scripts/test-deps.sh installs podman and runc", tool)
		}
	}
	// podman refuses a run root longer than about 50 characters, which a
	// t.TempDir() is: a short folder of its own in the system's temp.
	dir, err := os.MkdirTemp("", "p")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, containersConf, filepath.Join(dir, "tmp")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &podman{dir: dir, root: []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run")},
		env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
	t.Cleanup(func() {
		// Containers first, then the storage, which unmounts its layers.
		_, _, _ = p.try("rm", "--all", "--force", "--time", "0")
		if _, stderr, err := p.try("system", "reset", "--force"); err != nil {
			t.Logf("podman system reset: %v %s", err, stderr)
		}
		_ = os.RemoveAll(dir)
	})
	return p
}

// try runs podman with args, for at most two minutes.
func (p *podman) try(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, p.root...), args...)...)
	cmd.Env = p.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// must runs podman with args and fails the test when it fails.
func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := p.try(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout
}

// exitCode is the code a failed podman command exited with, 0 for none.
func exitCode(err error) int {
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// container is one started detached; its logs are read when it fails.
type container struct {
	p    *podman
	t    *testing.T
	name string
}

// start runs image detached on the host's network with a read-only root,
// under the image's own user.
func (p *podman) start(t *testing.T, name, image string, env map[string]string, mounts ...string) container {
	t.Helper()
	args := []string{"run", "--detach", "--name", name, "--network", "host", "--read-only"}
	for _, m := range mounts {
		args = append(args, "--volume", m)
	}
	for k, v := range env {
		args = append(args, "--env", k+"="+v)
	}
	p.must(t, append(args, image)...)
	return container{p: p, t: t, name: name}
}

func (s container) logs() string {
	stdout, stderr, _ := s.p.try("logs", s.name)
	return stdout + stderr
}

func (s container) inspect(format string) string {
	s.t.Helper()
	return strings.TrimSpace(s.p.must(s.t, "inspect", "--format", format, s.name))
}

// waitHealthy polls /healthz at addr until it answers 200, failing at the
// deadline or as soon as the container is no longer running.
func (s container) waitHealthy(addr string) {
	t := s.t
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if s.inspect("{{.State.Running}}") != "true" {
			t.Fatalf("%s stopped before /healthz answered (%s):\n%s", s.name, s.inspect("exit {{.State.ExitCode}}"), s.logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /healthz did not answer 200 within 90 s (%v):\n%s", s.name, err, s.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkUser holds the container's process to uid and gid 65532, as the
// kernel sees it, and its root filesystem to read-only.
func (s container) checkUser() {
	t := s.t
	t.Helper()
	pid := s.inspect("{{.State.Pid}}")
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		key, ids, ok := strings.Cut(line, ":")
		if !ok || (key != "Uid" && key != "Gid") {
			continue
		}
		for _, id := range strings.Fields(ids) {
			if id != "65532" {
				t.Errorf("%s runs with %s %s, want 65532", s.name, key, strings.TrimSpace(ids))
				break
			}
		}
	}
	if ro := s.inspect("{{.HostConfig.ReadonlyRootfs}}"); ro != "true" {
		t.Errorf("%s: read-only root filesystem %s", s.name, ro)
	}
}

// stop sends SIGTERM and holds the service to a drain that ends in exit 0.
func (s container) stop() {
	t := s.t
	t.Helper()
	s.p.must(t, "stop", "--time", "30", s.name)
	if code := s.inspect("{{.State.ExitCode}}"); code != "0" {
		t.Errorf("%s exited %s on SIGTERM:\n%s", s.name, code, s.logs())
	}
}

// readableBy writes data as a file only uid 65532 reads, as a mounted
// Secret is in a pod whose securityContext names that user.
func readableBy(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	return path
}
