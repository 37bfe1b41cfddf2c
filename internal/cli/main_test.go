package cli_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// mainChild makes this test binary the child the signal tests start: it
// runs cli.Main with a run that says "ready", waits for its context, says
// "draining" and then either ends with 7 or, stuck, never ends.
const mainChild = "CLI_MAIN_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(mainChild); mode != "" {
		cli.Main(func(ctx context.Context) int {
			_, _ = os.Stdout.WriteString("ready\n")
			<-ctx.Done()
			_, _ = os.Stdout.WriteString("draining\n")
			if mode == "stuck" {
				select {}
			}
			return 7
		})
	}
	os.Exit(m.Run())
}

// child is the started child: its lines on stdout, in order, its stderr
// for a failure's message, and its end.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testenv.LogBuffer
	// ended is closed once the child ended, with err what Wait said.
	ended chan struct{}
	err   error
}

// startChild starts the child and waits until its run is waiting.
func startChild(t *testing.T, mode string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 4), stderr: &testenv.LogBuffer{}, ended: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), mainChild+"="+mode)
	c.cmd.Stderr = c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for lines := bufio.NewScanner(out); lines.Scan(); {
			c.lines <- lines.Text()
		}
		c.err = c.cmd.Wait()
		close(c.ended)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.ended
	})
	c.await(t, "ready")
	return c
}

// await waits, within a deadline, for the child's next line to be want.
func (c *child) await(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-c.lines:
		if got != want {
			t.Fatalf("the child said %q, want %q; stderr:\n%s", got, want, c.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not say %q; stderr:\n%s", want, c.stderr)
	}
}

// status waits, within a deadline, for the child's end.
func (c *child) status(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-c.ended:
		exit, ok := errors.AsType[*exec.ExitError](c.err)
		if !ok {
			t.Fatalf("the child ended with %v, not an exit; stderr:\n%s", c.err, c.stderr)
		}
		status, _ := exit.Sys().(syscall.WaitStatus)
		return status
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not end; stderr:\n%s", c.stderr)
		return 0
	}
}

// TestMainEndsTheContextOnASignal: SIGTERM and SIGINT end run's context, and
// the process exits with what run answered rather than being killed.
func TestMainEndsTheContextOnASignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startChild(t, "drains")
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			c.await(t, "draining")
			if status := c.status(t); !status.Exited() || status.ExitStatus() != 7 {
				t.Fatalf("the child ended %v, want run's exit code 7; stderr:\n%s", status, c.stderr)
			}
		})
	}
}

// TestASecondSignalEndsAStuckRun: once the first signal ended the context,
// a second one kills a run whose drain hangs, as the signal's default does.
func TestASecondSignalEndsAStuckRun(t *testing.T) {
	c := startChild(t, "stuck")
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	c.await(t, "draining")
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if status := c.status(t); !status.Signaled() || status.Signal() != syscall.SIGINT {
		t.Fatalf("the stuck child ended %v, want killed by SIGINT; stderr:\n%s", status, c.stderr)
	}
}
