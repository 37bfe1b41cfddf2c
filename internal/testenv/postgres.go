package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// postgresRoot is where Debian installs each PostgreSQL major version.
const postgresRoot = "/usr/lib/postgresql"

// DepsCommand installs the Debian packages the PostgreSQL and RabbitMQ test
// servers run from; every failure to find them names it.
const DepsCommand = "scripts/test-deps.sh (make test runs it)"

// PostgresBinDir is where Debian installs the server and client programs of
// the newest PostgreSQL major installed: the postgresql package's, 15 on
// Debian 12 and 17 on Debian 13. It is "" when none is. The folder is looked
// for once per test binary; every server program is run from it.
var PostgresBinDir = sync.OnceValue(func() string {
	entries, _ := os.ReadDir(postgresRoot)
	newest := -1
	for _, e := range entries {
		major, err := strconv.Atoi(e.Name())
		if err != nil || major <= newest {
			continue
		}
		if _, err := os.Stat(filepath.Join(postgresRoot, e.Name(), "bin", "initdb")); err == nil {
			newest = major
		}
	}
	if newest < 0 {
		return ""
	}
	return filepath.Join(postgresRoot, strconv.Itoa(newest), "bin")
})

// Postgres is a throwaway PostgreSQL server on 127.0.0.1, its superuser
// logging in with a password over TCP.
type Postgres struct {
	Host     string
	Port     int
	User     string
	Password string
	dir      string
}

// StartPostgres starts a fresh server for this test and stops and removes
// it when the test ends. It fails, naming DepsCommand, when PostgreSQL is
// not installed.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := forTest(t, 2*time.Minute, "no PostgreSQL for this test", StartPostgresServer)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return p
}

// StartPostgresServer starts a server outside a test (a TestMain or a
// benchmark); the caller stops it.
func StartPostgresServer(ctx context.Context) (*Postgres, error) {
	if PostgresBinDir() == "" {
		return nil, fmt.Errorf("PostgreSQL is not installed (no %s/<major>/bin/initdb): install it with %s", postgresRoot, DepsCommand)
	}
	dir, err := os.MkdirTemp("", "delivery-postgres-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Host: "127.0.0.1", User: "postgres", Password: "postgres-test-password", dir: dir}
	if err := p.start(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) start(ctx context.Context) error {
	// Root may not run PostgreSQL: when root, the server runs as the postgres
	// user, which must own its data and socket folder.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("no postgres user to run the server as: install PostgreSQL with %s", DepsCommand)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(p.dir, uid, gid); err != nil {
			return err
		}
	}
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return err
	}
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := p.writeOwned(pwfile, p.Password+"\n"); err != nil {
		return err
	}
	if out, err := p.asServer(ctx, "initdb", "-D", p.dataDir(), "-U", p.User, "--pwfile="+pwfile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	var last error
	for range 3 { // a free port can be taken between asking and binding
		port, err := freePort()
		if err != nil {
			return err
		}
		opts := fmt.Sprintf("-k %s -h 127.0.0.1 -p %d -c fsync=off -c full_page_writes=off -c synchronous_commit=off", p.dir, port)
		out, err := p.asServer(ctx, "pg_ctl", "-D", p.dataDir(), "-l", filepath.Join(p.dir, "server.log"),
			"-w", "-t", "60", "-o", opts, "start").CombinedOutput()
		if err == nil {
			p.Port = port
			return nil
		}
		logTail, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		last = fmt.Errorf("pg_ctl start: %w: %s %s", err, out, tail(logTail, 800))
	}
	return last
}

func (p *Postgres) dataDir() string { return filepath.Join(p.dir, "data") }

// asServer runs a server program as the user that owns the data folder.
func (p *Postgres) asServer(ctx context.Context, program string, args ...string) *exec.Cmd {
	path := filepath.Join(PostgresBinDir(), program)
	if os.Geteuid() == 0 {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.CommandContext(ctx, path, args...)
}

func (p *Postgres) writeOwned(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	info, err := os.Stat(p.dir)
	if err != nil {
		return err
	}
	uid, gid := fileOwner(info)
	return os.Chown(path, uid, gid)
}

// Stop stops the server at once and removes its data.
func (p *Postgres) Stop() error {
	var err error
	// A start that timed out can leave a server running without a port
	// recorded; its pid file says it is there.
	if _, statErr := os.Stat(filepath.Join(p.dataDir(), "postmaster.pid")); p.Port != 0 || statErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, stopErr := p.asServer(ctx, "pg_ctl", "-D", p.dataDir(), "-m", "immediate", "-w", "stop").CombinedOutput(); stopErr != nil {
			err = fmt.Errorf("pg_ctl stop: %w: %s", stopErr, out)
		}
		p.Port = 0
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

// DSN is a connection URL for database as the superuser.
func (p *Postgres) DSN(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(p.User, p.Password),
		Host:     net.JoinHostPort(p.Host, strconv.Itoa(p.Port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Bin is the path of a PostgreSQL program of the server's major version,
// such as pg_dumpall or psql.
func (p *Postgres) Bin(program string) string { return filepath.Join(PostgresBinDir(), program) }

// Env is the PG* environment that points libpq programs at the server.
func (p *Postgres) Env() []string {
	return []string{
		"PGHOST=" + p.Host, "PGPORT=" + strconv.Itoa(p.Port),
		"PGUSER=" + p.User, "PGPASSWORD=" + p.Password, "PGSSLMODE=disable",
	}
}

// Psql runs SQL with psql against database, stopping at the first error, and
// returns its unaligned, tuples-only output.
func (p *Postgres) Psql(t testing.TB, database, sql string) string {
	t.Helper()
	out, err := p.PsqlContext(context.Background(), database, sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PsqlContext is Psql outside a test.
func (p *Postgres) PsqlContext(ctx context.Context, database, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", database, "-f", "-")
	cmd.Env = append(os.Environ(), p.Env()...)
	cmd.Stdin = strings.NewReader(sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql on %s: %w: %s", database, err, stderr.String())
	}
	return stdout.String(), nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
