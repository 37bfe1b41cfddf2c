package cli_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// mainChild makes this test binary the child the signal tests start: it
// runs cli.Main with a run that waits for its context, then says how it
// ended by its exit code.
const mainChild = "CLI_MAIN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(mainChild) != "" {
		cli.Main(func(ctx context.Context) int {
			_, _ = os.Stdout.WriteString("ready\n")
			<-ctx.Done()
			if os.Getenv(mainChild) == "stuck" {
				// A drain that never ends: only a second signal stops it.
				select {}
			}
			return 7
		})
	}
	os.Exit(m.Run())
}

// startChild starts the child and waits until its run is waiting.
func startChild(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainChild+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := make([]byte, len("ready\n"))
	if _, err := out.Read(line); err != nil || string(line) != "ready\n" {
		t.Fatalf("the child did not start: %q %v", line, err)
	}
	return cmd
}

// exitOf waits for the child's exit within a deadline.
func exitOf(t *testing.T, cmd *exec.Cmd) *exec.ExitError {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		exit, ok := errors.AsType[*exec.ExitError](err)
		if !ok {
			t.Fatalf("the child ended with %v, not an exit", err)
		}
		return exit
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not end")
		return nil
	}
}

// TestMainEndsTheContextOnASignal: SIGTERM and SIGINT end run's context, and
// the process exits with what run answered rather than being killed.
func TestMainEndsTheContextOnASignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startChild(t, "drains")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := exitOf(t, cmd).ExitCode(); code != 7 {
				t.Fatalf("exit code %d, want run's 7", code)
			}
		})
	}
}

// TestASecondSignalEndsAStuckRun: a person's second Ctrl-C ends a run whose
// drain hangs, as the signal's default does. Main lets the signal go just
// after the first arrives, so SIGINT is sent again until one kills.
func TestASecondSignalEndsAStuckRun(t *testing.T) {
	cmd := startChild(t, "stuck")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	again := time.NewTicker(50 * time.Millisecond)
	defer again.Stop()
	deadline := time.After(30 * time.Second)
	for {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			var status syscall.WaitStatus
			if exit, ok := errors.AsType[*exec.ExitError](err); ok {
				status, _ = exit.Sys().(syscall.WaitStatus)
			}
			if !status.Signaled() || status.Signal() != syscall.SIGINT {
				t.Fatalf("the stuck child ended %v, want killed by SIGINT", err)
			}
			return
		case <-again.C:
		case <-deadline:
			t.Fatal("SIGINT never ended the stuck child")
		}
	}
}
