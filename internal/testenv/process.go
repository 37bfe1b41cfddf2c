package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is a test server's process, started in a process group of its
// own so that stopping it reaches every child it started. If the test
// binary dies first (a -timeout panic, SIGKILL), which runs no cleanup, the
// kernel kills the process itself; a child it started in the background
// (RabbitMQ's script starts the broker so) outlives it.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess starts cmd. The caller sets its arguments, environment and
// output; cmd is not tied to a context, because the server outlives the
// deadline of its start.
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The kernel sends the death signal when the thread that started
		// the child ends, not the process, and Go ends a thread whenever a
		// goroutine locked to it returns: a server started from such a
		// thread would be killed mid-test. Its own thread is held, locked,
		// until the server ends.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// ended says how the process ended, or "" while it runs.
func (p *process) ended() string {
	select {
	case <-p.done:
		return p.cmd.ProcessState.String()
	default:
		return ""
	}
}

// exited is closed once the process has ended.
func (p *process) exited() <-chan struct{} { return p.done }

// awaitHTTP asks url, within a minute, until it answers 200 OK, looking
// again every pause: the process is up once it serves. It gives up at once
// if the process ends, and names server, addr and its log either way, so a
// test that cannot have the server says why.
func (p *process) awaitHTTP(ctx context.Context, server, addr, url string, pause time.Duration, log *LogBuffer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		last = err
		select {
		case <-p.exited():
			return fmt.Errorf("%s exited at start: %s", server, log.String())
		case <-ctx.Done():
			return fmt.Errorf("%s at %s not ready (%w): %s", server, addr, errors.Join(last, ctx.Err()), log.String())
		case <-time.After(pause):
		}
	}
}

// stopGrace is how long a server the tests started has to end on SIGTERM
// before its group is killed.
const stopGrace = 10 * time.Second

// terminate asks the group to end with SIGTERM and waits for it, killing it
// after stopGrace.
func (p *process) terminate() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	p.await(stopGrace)
}

// await waits for the process to end, killing its group after grace.
func (p *process) await(grace time.Duration) {
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
