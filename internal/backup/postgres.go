package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Postgres dumps every database, role and tablespace of a server with the
// real pg_dumpall, whose major version must match the server's. A dump it
// reports as failed (any non-zero exit) is not a generation.
type Postgres struct {
	Program  string // pg_dumpall to run; "" finds it on PATH
	Host     string
	Port     int
	User     string
	Password string
}

// Name is the method's name in generation names.
func (Postgres) Name() string { return "postgres" }

// Write streams the plain-SQL dump into w.
func (p Postgres) Write(ctx context.Context, w io.Writer) error {
	program := p.Program
	if program == "" {
		program = "pg_dumpall"
	}
	// --no-password: a missing or wrong password fails the run at once
	// instead of waiting for a prompt no one answers.
	cmd := exec.CommandContext(ctx, program, "--no-password") //nolint:gosec // the operator names the pg_dumpall to run; no shell, fixed arguments
	// The values handed to the method come last and so win; other libpq
	// variables of the pod (PGSSLMODE, PGSSLROOTCERT, ...) pass through.
	cmd.Env = append(os.Environ(),
		"PGHOST="+p.Host,
		"PGPORT="+strconv.Itoa(p.Port),
		"PGUSER="+p.User,
		"PGPASSWORD="+p.Password,
		"PGCONNECT_TIMEOUT=30",
	)
	// pg_dumpall runs pg_dump for each database through a shell: on cancel
	// the whole process group is ended, and the pipes are not waited on for
	// long, or a pg_dump left holding stdout keeps the run from ending.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out := &firstError{w: w}
	cmd.Stdout = out
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		// A dump that could not be written (the claim full) kills pg_dump
		// on a broken pipe; the write's own error is the cause.
		if out.err != nil {
			return fmt.Errorf("write the dump: %w", out.err)
		}
		reason := strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		if errors.As(err, &exit) && reason != "" {
			return fmt.Errorf("pg_dumpall failed (%s): %s", exit.String(), lastLine(reason))
		}
		return fmt.Errorf("pg_dumpall: %w", err)
	}
	return nil
}

// firstError passes writes to w and keeps the first error one met.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// tailBuffer keeps the last max bytes written to it: enough of a failing
// program's stderr to name the cause, bounded whatever it prints.
type tailBuffer struct {
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
