package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// Process is a module's command running under the agent: in a process group
// of its own, so a stop reaches everything it started.
type Process struct {
	pid    int
	exited chan struct{}
	err    error
}

// StartProcess runs c from the version folder dir: argv[0] a path inside
// the folder when it holds a '/', else found on PATH; the working directory
// c.Dir inside the folder; the environment PATH and c.Env alone, so what a
// module sees is what its composition says.
func StartProcess(dir string, c composition.Command, output io.Writer) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("the composition runs no command")
	}
	argv := slices.Clone(c.Argv)
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		argv[0] = filepath.Join(dir, filepath.FromSlash(argv[0]))
	}
	// A module outlives any request of the agent's: Stop ends it, no context.
	cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec,noctx // the command a verified composition names
	cmd.Dir = filepath.Join(dir, filepath.FromSlash(c.Dir))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		cmd.Env = append(cmd.Env, k+"="+c.Env[k])
	}
	cmd.Stdout, cmd.Stderr = output, output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Argv[0], err)
	}
	p := &Process{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// errNotOurs is how an adopted process ended: not the agent's child, its
// status is not the agent's to read.
var errNotOurs = errors.New("started by an earlier agent, its exit status unknown")

// Adopt takes over the process group pid that an earlier agent started
// from the version folder dir, when its leader still runs from there, so an
// agent's restart does not restart what did not change. Not its parent, the
// agent learns of its end by looking every poll.
func Adopt(pid int, dir string, poll time.Duration) (*Process, bool) {
	if pid <= 1 || !alive(pid) {
		return nil, false
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		return nil, false
	}
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if real, rerr := filepath.EvalSymlinks(dir); rerr == nil {
		dir = real
	}
	if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
		return nil, false // the id was given to another process since
	}
	p := &Process{pid: pid, exited: make(chan struct{})}
	go func() {
		t := time.NewTicker(poll)
		defer t.Stop()
		for range t.C {
			if !alive(pid) {
				p.err = errNotOurs
				close(p.exited)
				return
			}
		}
	}()
	return p, true
}

// alive is whether pid runs: there, and not a zombie no one has reaped.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")) //nolint:gosec // the kernel's own file of a process
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process's id, which is also its group's.
func (p *Process) Pid() int { return p.pid }

// Stop sends the group SIGTERM and, if it has not ended within grace,
// SIGKILL; it returns once the process has ended.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.exited
	}
	// Whatever the leader left behind in its group goes with it.
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
}

// Check runs a composition's health check once within its timeout: the
// HTTP URL answers 2xx, or the command exits 0 run from dir.
func Check(ctx context.Context, h composition.Health, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.Timeout))
	defer cancel()
	if h.HTTP != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.HTTP, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("health %s: %w", h.HTTP, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("health %s answered %s", h.HTTP, resp.Status)
		}
		return nil
	}
	argv := slices.Clone(h.Command)
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		argv[0] = filepath.Join(dir, filepath.FromSlash(argv[0]))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // the check a verified composition names
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("health %s: %w: %s", strings.Join(h.Command, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// WaitHealthy checks every interval until a check passes, the process
// ends, or within has passed; it answers the last check's error.
func WaitHealthy(ctx context.Context, p *Process, h composition.Health, dir string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		err := Check(ctx, h, dir)
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			ended := p.err
			if ended == nil {
				ended = errors.New("exit status 0")
			}
			return fmt.Errorf("the process ended: %w (last check: %w)", ended, err)
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(h.Interval)):
		}
	}
}

// Result is how the process ended, once it has.
func (p *Process) Result() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// Clean is whether the process ended by itself with status 0.
func (p *Process) Clean() bool { return p.err == nil }
