package backup

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const seedSQL = `
CREATE ROLE shop_owner LOGIN PASSWORD 'owner-pw';
CREATE ROLE shop_reader NOLOGIN;
CREATE DATABASE shop OWNER shop_owner;
`

const shopSQL = `
SET ROLE shop_owner;
CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, note text);
INSERT INTO orders SELECT g, 'customer ' || g, CASE WHEN g % 7 = 0 THEN 'zoë ✓' END FROM generate_series(1, 500) g;
CREATE SEQUENCE invoice_numbers START 1000;
SELECT nextval('invoice_numbers');
GRANT SELECT ON orders TO shop_reader;
`

// facts are what a restore must bring back: roles, databases and their
// owners, the rows, the grant and the sequence's position.
func facts(t *testing.T, p *testenv.Postgres) string {
	t.Helper()
	cluster := p.Psql(t, "postgres", `
SELECT rolname, rolcanlogin, rolsuper FROM pg_roles WHERE rolname !~ '^pg_' ORDER BY 1;
SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname <> 'template0' ORDER BY 1;`)
	shop := p.Psql(t, "shop", `
SELECT count(*), sum(id), string_agg(DISTINCT note, ',') FROM orders;
SELECT md5(string_agg(id || customer || coalesce(note, ''), '|' ORDER BY id)) FROM orders;
SELECT has_table_privilege('shop_reader', 'orders', 'SELECT');
SELECT last_value FROM invoice_numbers;`)
	return cluster + shop
}

func TestPostgresDumpRestoresIntoAFreshInstance(t *testing.T) {
	source := testenv.StartPostgres(t)
	source.Psql(t, "postgres", seedSQL)
	source.Psql(t, "shop", shopSQL)
	want := facts(t, source)

	dir := t.TempDir()
	method := Postgres{Program: source.Bin("pg_dumpall"), Host: source.Host, Port: source.Port, User: source.User, Password: source.Password}
	result, err := Job{Dir: dir, Method: method, Retain: 2}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(result.Path), "postgres-") || !strings.HasSuffix(result.Path, ".sql.gz") {
		t.Fatalf("generation named %s", result.Path)
	}
	dump := filepath.Join(t.TempDir(), "dump.sql")
	if err := os.WriteFile(dump, gunzipFile(t, result.Path), 0o600); err != nil {
		t.Fatal(err)
	}

	fresh := testenv.StartPostgres(t)
	// The dump recreates the superuser that initdb already made; that one
	// statement's error is expected, so psql runs without ON_ERROR_STOP, as
	// the load command `backup restore` prints, and the comparison below is
	// the judge.
	restore := exec.Command(fresh.Bin("psql"), "-X", "--no-password", "--dbname", "postgres", "--file", dump)
	restore.Env = append(os.Environ(), fresh.Env()...)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("restore: %v: %s", err, out)
	}
	if got := facts(t, fresh); got != want {
		t.Fatalf("the restored instance differs:\n got %s\nwant %s", got, want)
	}
	// The role's password came back too: it logs in with it.
	login := exec.Command(fresh.Bin("psql"), "-X", "-At", "-h", fresh.Host, "-p", itoa(fresh.Port), "-U", "shop_owner", "-d", "shop", "-c", "SELECT count(*) FROM orders")
	login.Env = append(os.Environ(), "PGPASSWORD=owner-pw")
	if out, err := login.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "500" {
		t.Fatalf("shop_owner login on the restored instance: %v: %s", err, out)
	}

	// A dump pg_dumpall reports as failed is no generation and prunes nothing.
	method.Password = "wrong"
	later := func() time.Time { return time.Now().Add(time.Hour) }
	_, err = Job{Dir: dir, Method: method, Retain: 1, Now: later}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("a wrong password gave %v", err)
	}
	assertFiles(t, dir, filepath.Base(result.Path))
}

func TestPostgresMissingProgram(t *testing.T) {
	dir := t.TempDir()
	_, err := Job{Dir: dir, Method: Postgres{Program: filepath.Join(dir, "no-pg_dumpall"), Host: "127.0.0.1", Port: 1}, Retain: 1}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "pg_dumpall") {
		t.Fatalf("got %v", err)
	}
	assertFiles(t, dir)
}

// fakeDumpall writes a pg_dumpall stand-in: a shell script running body.
func fakeDumpall(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pg_dumpall")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil { //nolint:gosec // a test program
		t.Fatal(err)
	}
	return path
}

// A cancelled dump ends at once, though pg_dumpall's own child (the
// pg_dump it runs through a shell) still holds the output open.
func TestPostgresCancelEndsTheDumpsChildren(t *testing.T) {
	program := fakeDumpall(t, "echo '-- dump'; sleep 60 & wait")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Postgres{Program: program}.Write(ctx, io.Discard)
	if err == nil {
		t.Fatal("a cancelled dump succeeded")
	}
	// Under the output's WaitDelay: only ending the whole group is this quick.
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the cancelled dump took %v to end", took)
	}
}

// A dump the claim cannot take names the write's cause, not pg_dump's
// broken pipe.
func TestPostgresNamesAFailedWrite(t *testing.T) {
	program := fakeDumpall(t, "head -c 10000000 /dev/zero")
	err := Postgres{Program: program}.Write(context.Background(), &fullClaim{room: 1 << 20})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %v, want the claim's ENOSPC", err)
	}
}

// fullClaim takes room bytes, then fails as a full file system does.
type fullClaim struct{ room int }

func (f *fullClaim) Write(p []byte) (int, error) {
	if len(p) > f.room {
		n := f.room
		f.room = 0
		return n, syscall.ENOSPC
	}
	f.room -= len(p)
	return len(p), nil
}
