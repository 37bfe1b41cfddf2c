package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
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

// postgresVariables are what Postgres.Configure reads.
var postgresVariables = []settings.Variable{
	{Name: "BACKUP_HOST", Default: settings.Required, Meaning: "the PostgreSQL server's host"},
	{Name: "BACKUP_PORT", Default: "5432", Meaning: "its port"},
	{Name: "PGUSER", Default: settings.Required, Meaning: "the dump login; other libpq variables such as PGSSLMODE pass through to pg_dumpall"},
	{Name: "PGPASSWORD", Default: settings.Required, Meaning: "its password"},
	{Name: "BACKUP_PG_DUMPALL", Default: "pg_dumpall", Meaning: "the program to run; the image sets the path of its major version"},
}

// Name implements Method.
func (Postgres) Name() string { return "postgres" }

// Summary implements Method.
func (Postgres) Summary() string { return "Dump a PostgreSQL server with pg_dumpall" }

// Extension implements Method: a gzipped plain-SQL dump.
func (Postgres) Extension() string { return ".sql.gz" }

// Variables implements Method.
func (Postgres) Variables() []settings.Variable { return postgresVariables }

// Configure implements Method.
func (Postgres) Configure(env *settings.Reader, _ string, _ *slog.Logger) (Method, error) {
	return Postgres{
		Program:  env.String("BACKUP_PG_DUMPALL", "pg_dumpall"),
		Host:     env.Required("BACKUP_HOST"),
		Port:     env.PositiveInt("BACKUP_PORT", 5432),
		User:     env.Required("PGUSER"),
		Password: env.Required("PGPASSWORD"),
	}, nil
}

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

// Restore implements Method: the dump becomes one file in target.
func (Postgres) Restore(_ context.Context, read ReadFunc, work, target string, into *Restored) error {
	return restoreOneFile(read, work, target, into)
}

// Check implements Method: a dump cut short would load part of a server.
func (Postgres) Check(_ context.Context, restored *Restored) error {
	if err := checkFile(restored.Path, CheckDump); err != nil {
		return err
	}
	restored.Checks = append(restored.Checks, "pg_dumpall's banners and every COPY block ending")
	return nil
}

// Describe implements Method.
func (Postgres) Describe(restored Restored) (what, where string) { return "the dump", restored.Path }

// LoadHint implements Method. The dump creates every role, the superuser the
// new server already has among them: that one statement fails, and
// ON_ERROR_STOP would end the load there.
func (Postgres) LoadHint(path string) string {
	return "restored " + path + "; load it into an empty server as its superuser:\n" +
		"  psql --no-password --dbname postgres --file " + shellQuote(path) + "\n" +
		"  (one error is expected: the superuser the server already has exists)\n"
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

// Lines pg_dumpall writes first and last; a dump without both was cut short.
var (
	dumpHead = []byte("-- PostgreSQL database cluster dump")
	dumpTail = []byte("-- PostgreSQL database cluster dump complete")
)

// CheckDump checks that r holds a whole plain pg_dumpall: its opening and
// closing banners, and every COPY … FROM stdin block ended by "\.". Lines of
// any length are read in bounded memory.
func CheckDump(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var sawHead, inCopy bool
	var last []byte
	lineNo := 0
	for {
		line, more, err := readLineStart(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		lineNo++
		trimmed := bytes.TrimRight(line, "\r")
		switch {
		case inCopy:
			if !more && bytes.Equal(trimmed, []byte(`\.`)) {
				inCopy = false
			}
		case !sawHead:
			if bytes.Equal(trimmed, dumpHead) {
				sawHead = true
			} else if len(bytes.TrimSpace(trimmed)) > 0 && !bytes.HasPrefix(trimmed, []byte("--")) {
				return fmt.Errorf("line %d: a statement before the pg_dumpall banner", lineNo)
			}
		case bytes.HasPrefix(trimmed, []byte("COPY ")) && !more && bytes.HasSuffix(trimmed, []byte(" FROM stdin;")):
			inCopy = true
		}
		// pg_dumpall frames its banners with bare "--" lines.
		if t := bytes.TrimSpace(trimmed); len(t) > 0 && !bytes.Equal(t, []byte("--")) {
			last = append(last[:0], trimmed...)
		}
	}
	switch {
	case !sawHead:
		return errors.New("not a pg_dumpall dump: no banner")
	case inCopy:
		return errors.New(`the dump ends inside a COPY block`)
	case !bytes.Equal(last, dumpTail):
		return errors.New("the dump was cut short: no closing banner")
	}
	return nil
}

// readLineStart returns the first 4 KiB of the next line and whether the
// line went on beyond them; the rest of a long line is skipped.
func readLineStart(br *bufio.Reader) ([]byte, bool, error) {
	const keep = 4 << 10
	var start []byte
	more := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (len(start) > 0 || more) {
				return start, more, nil
			}
			return nil, false, err
		}
		if room := keep - len(start); room > 0 {
			start = append(start, chunk[:min(len(chunk), room)]...)
			if len(chunk) > room {
				more = true
			}
		} else if len(chunk) > 0 {
			more = true
		}
		if !isPrefix {
			return start, more, nil
		}
	}
}
