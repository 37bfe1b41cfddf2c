package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// entry is one archived item, as a restore sees it.
type entry struct {
	typeflag byte
	link     string
	body     []byte
}

func readArchive(t *testing.T, path string) map[string]entry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(gunzipFile(t, path)))
	out := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = entry{typeflag: hdr.Typeflag, link: hdr.Linkname, body: body}
	}
}

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // temp views and pragmas live on one connection
	t.Cleanup(func() { db.Close() })
	return db
}

func exec1(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func integrity(t *testing.T, path string) string {
	t.Helper()
	db := openSQLite(t, path)
	var result string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&result); err != nil {
		t.Fatal(err)
	}
	return result
}

// restoreDB writes an archived database out and opens it as SQLite would.
func restoreDB(t *testing.T, body []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "restored.db")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// seriesSQL makes a table "series" of n rows to insert from; modernc's
// SQLite has no generate_series.
const seriesSQL = "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n < 5000) SELECT n FROM s"

func filesJob(source, dir string, logger *slog.Logger) Job {
	return Job{Dir: dir, Retain: 3, Logger: logger,
		Method: Files{Source: source, Staging: filepath.Join(dir, StagingDir), Logger: logger}}
}

func TestFilesArchivesTheTree(t *testing.T) {
	source, dir := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(source, "uploads", "2026"), 0o755))
	must(os.WriteFile(filepath.Join(source, "uploads", "2026", "a.txt"), []byte("alpha"), 0o640))
	must(os.WriteFile(filepath.Join(source, "empty"), nil, 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(source, "outside")))
	must(os.Symlink("uploads", filepath.Join(source, "uploads-link")))
	must(syscall.Mkfifo(filepath.Join(source, "pipe"), 0o600))
	// Named like anything but a database: the header tells.
	db := openSQLite(t, filepath.Join(source, "state.bin"))
	exec1(t, db, "PRAGMA journal_mode=WAL")
	exec1(t, db, "PRAGMA wal_autocheckpoint=0")
	exec1(t, db, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
	exec1(t, db, "INSERT INTO notes (body) VALUES ('only in the log')")
	if _, err := os.Stat(filepath.Join(source, "state.bin-wal")); err != nil {
		t.Fatalf("the test database has no log to fold in: %v", err)
	}
	// A file that merely ends like a companion is archived as itself.
	must(os.WriteFile(filepath.Join(source, "diary-journal"), []byte("not sqlite's"), 0o600))

	// A dead run's staging copies are the next run's to clear.
	must(os.MkdirAll(filepath.Join(dir, StagingDir), 0o700))
	must(os.WriteFile(filepath.Join(dir, StagingDir, "1.db"), []byte("half a copy"), 0o600))

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	result, err := filesJob(source, dir, logger).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	archive := readArchive(t, result.Path)
	if e := archive["uploads/2026/a.txt"]; string(e.body) != "alpha" {
		t.Fatalf("a.txt archived as %q", e.body)
	}
	if e := archive["uploads/2026/"]; e.typeflag != tar.TypeDir {
		t.Fatalf("directory archived as %q", e.typeflag)
	}
	if e, ok := archive["empty"]; !ok || len(e.body) != 0 {
		t.Fatal("the empty file is missing")
	}
	if e := archive["outside"]; e.typeflag != tar.TypeSymlink || e.link != "/etc/passwd" || len(e.body) != 0 {
		t.Fatalf("a symlink out of the volume was followed or lost: %+v", e)
	}
	if e := archive["uploads-link"]; e.typeflag != tar.TypeSymlink || e.link != "uploads" {
		t.Fatalf("a symlink inside the volume was not archived as a link: %+v", e)
	}
	if _, ok := archive["pipe"]; ok {
		t.Fatal("a FIFO was archived")
	}
	if !strings.Contains(logs.String(), `"skipped a special file","path":"pipe"`) {
		t.Fatalf("the skipped FIFO was not logged: %s", logs.String())
	}
	for _, name := range []string{"state.bin-wal", "state.bin-shm", "state.bin-journal"} {
		if _, ok := archive[name]; ok {
			t.Fatalf("%s was archived", name)
		}
	}
	if string(archive["diary-journal"].body) != "not sqlite's" {
		t.Fatal("a file named like a companion of no database was left out")
	}
	restored := restoreDB(t, archive["state.bin"].body)
	if got := integrity(t, restored); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
	var body string
	if err := openSQLite(t, restored).QueryRow("SELECT body FROM notes").Scan(&body); err != nil || body != "only in the log" {
		t.Fatalf("the log was not folded in: %q %v", body, err)
	}
	if _, err := os.Stat(filepath.Join(dir, StagingDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staging folder outlived the run: %v", err)
	}
	assertFiles(t, dir, filepath.Base(result.Path))
}

// A writer commits without pause while the backup runs. The copy must pass
// integrity_check and hold every row committed before the copy began.
func TestFilesCopiesALiveWALDatabase(t *testing.T) {
	source, dir := t.TempDir(), t.TempDir()
	path := filepath.Join(source, "live.db")
	db := openSQLite(t, path)
	exec1(t, db, "PRAGMA journal_mode=WAL")
	exec1(t, db, "CREATE TABLE events (id INTEGER PRIMARY KEY, payload BLOB)")
	// Enough data that copying takes a while, and checkpoints keep running.
	exec1(t, db, "CREATE TEMP VIEW series AS "+seriesSQL)
	exec1(t, db, "INSERT INTO events (payload) SELECT randomblob(4000) FROM series LIMIT 4000")

	var committed atomic.Int64
	var last int64
	if err := db.QueryRow("SELECT max(id) FROM events").Scan(&last); err != nil {
		t.Fatal(err)
	}
	committed.Store(last)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var id int64
			if err := db.QueryRow("INSERT INTO events (payload) VALUES (randomblob(1000)) RETURNING id").Scan(&id); err != nil {
				writeErr = err
				return
			}
			committed.Store(id)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for committed.Load() < last+200 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := committed.Load()
	result, err := filesJob(source, dir, nil).Run(context.Background())
	after := committed.Load()
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	if after == before {
		t.Fatal("the writer made no commit during the backup; the test proves nothing")
	}
	restored := restoreDB(t, readArchive(t, result.Path)["live.db"].body)
	if got := integrity(t, restored); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
	var count, maxID int64
	if err := openSQLite(t, restored).QueryRow("SELECT count(*), max(id) FROM events WHERE id <= ?", before).Scan(&count, &maxID); err != nil {
		t.Fatal(err)
	}
	if count != before || maxID != before {
		t.Fatalf("the copy holds %d rows up to %d; %d were committed before it began", count, maxID, before)
	}
	t.Logf("rows committed before the copy: %d, during the run: %d", before, after-before)
}

func TestFilesCorruptDatabaseFailsAfterThreeTries(t *testing.T) {
	source, dir := t.TempDir(), t.TempDir()
	path := filepath.Join(source, "broken.db")
	db := openSQLite(t, path)
	exec1(t, db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	exec1(t, db, "CREATE INDEX t_v ON t (v)")
	exec1(t, db, "CREATE TEMP VIEW series AS "+seriesSQL)
	exec1(t, db, "INSERT INTO t (v) SELECT hex(randomblob(50)) FROM series LIMIT 2000")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Scribble over pages in the middle of the file, leaving the header.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 3*4096), 8*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	// An older generation must survive the failed run.
	old := Generation{Method: "files", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}.Name()
	if err := os.WriteFile(filepath.Join(dir, old), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := filesJob(source, dir, logger)
	job.Retain = 1
	_, err = job.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "after 3 tries") || !strings.Contains(err.Error(), "broken.db") {
		t.Fatalf("got %v", err)
	}
	if n := strings.Count(logs.String(), "SQLite copy failed its check"); n != 3 {
		t.Fatalf("%d tries logged, want 3:\n%s", n, logs.String())
	}
	assertFiles(t, dir, old)
}

// A rollback-journal database is copied and checked like a WAL one; its
// change counter tells a copy taken across a write. TRUNCATE and PERSIST
// keep a journal file between transactions (empty, or with its header
// zeroed), as DELETE does under exclusive locking: one SQLite does not roll
// back, which the copy must not carry.
func TestFilesCopiesARollbackJournalDatabase(t *testing.T) {
	for _, mode := range []struct{ name, pragmas string }{
		{"delete", "PRAGMA journal_mode=DELETE"},
		{"truncate", "PRAGMA journal_mode=TRUNCATE"},
		{"persist", "PRAGMA journal_mode=PERSIST"},
		{"delete, exclusive", "PRAGMA journal_mode=DELETE; PRAGMA locking_mode=EXCLUSIVE"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			source, dir := t.TempDir(), t.TempDir()
			db := openSQLite(t, filepath.Join(source, "plain.sqlite"))
			db.SetMaxOpenConns(1)
			for pragma := range strings.SplitSeq(mode.pragmas, "; ") {
				exec1(t, db, pragma)
			}
			exec1(t, db, "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)")
			exec1(t, db, "INSERT INTO kv VALUES ('a', '1'), ('b', '2')")
			if mode.name != "delete" {
				if _, err := os.Stat(filepath.Join(source, "plain.sqlite-journal")); err != nil {
					t.Fatalf("the journal mode left no journal to copy: %v", err)
				}
			}
			result, err := filesJob(source, dir, nil).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			entries := readArchive(t, result.Path)
			if _, ok := entries["plain.sqlite-journal"]; ok {
				t.Fatal("the archive holds the journal")
			}
			restored := restoreDB(t, entries["plain.sqlite"].body)
			var n int
			if err := openSQLite(t, restored).QueryRow("SELECT count(*) FROM kv").Scan(&n); err != nil || n != 2 {
				t.Fatalf("restored %d rows: %v", n, err)
			}
		})
	}
}

// A hot journal, left by a transaction that has written pages into the
// database file and not committed, is copied with the database, and the
// copy is rolled back to the last commit.
func TestFilesRollsBackAHotJournal(t *testing.T) {
	source, dir := t.TempDir(), t.TempDir()
	db := openSQLite(t, filepath.Join(source, "plain.sqlite"))
	exec1(t, db, "PRAGMA journal_mode=DELETE")
	exec1(t, db, "CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB)")
	exec1(t, db, "INSERT INTO kv VALUES (1, 'a'), (2, 'b')")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A cache of a few pages makes the open transaction spill its pages
	// into the database file.
	for _, q := range []string{"PRAGMA cache_size=2", "BEGIN", "WITH RECURSIVE n(i) AS (SELECT 3 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO kv SELECT i, randomblob(4000) FROM n"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = conn.ExecContext(ctx, "ROLLBACK"); conn.Close() })
	if j, err := os.ReadFile(filepath.Join(source, "plain.sqlite-journal")); err != nil || len(j) == 0 || j[0] == 0 {
		t.Fatalf("no hot journal to copy (%d bytes): %v", len(j), err)
	}
	result, err := filesJob(source, dir, nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restored := restoreDB(t, readArchive(t, result.Path)["plain.sqlite"].body)
	var n int
	if err := openSQLite(t, restored).QueryRow("SELECT count(*) FROM kv").Scan(&n); err != nil || n != 2 {
		t.Fatalf("restored %d rows, want the 2 committed: %v", n, err)
	}
}

func TestFilesStopsWhenCancelled(t *testing.T) {
	source := t.TempDir()
	if err := os.WriteFile(filepath.Join(source, "a"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var sink bytes.Buffer
	err := Files{Source: source, Staging: filepath.Join(t.TempDir(), StagingDir)}.Write(ctx, &sink)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestFilesUnreadableSourceFails(t *testing.T) {
	dir := t.TempDir()
	_, err := filesJob(filepath.Join(dir, "missing"), t.TempDir(), nil).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v", err)
	}
}

func TestFilesShrunkFileIsPadded(t *testing.T) {
	var logs bytes.Buffer
	a := &archiver{logger: slog.New(slog.NewJSONHandler(&logs, nil)), tw: tar.NewWriter(io.Discard), buf: make([]byte, 16)}
	hdr := &tar.Header{Name: "log", Mode: 0o600, Size: 100, Typeflag: tar.TypeReg}
	if err := a.body(hdr, strings.NewReader("only forty bytes of the promised hundred"), "log"); err != nil {
		t.Fatal(err)
	}
	if err := a.tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "shrank") {
		t.Fatal(fmt.Sprint("the shrunk file was not logged: ", logs.String()))
	}
}

func TestFilesGrownFileIsCutAndLogged(t *testing.T) {
	var logs, archive bytes.Buffer
	a := &archiver{logger: slog.New(slog.NewJSONHandler(&logs, nil)), tw: tar.NewWriter(&archive), buf: make([]byte, 16)}
	hdr := &tar.Header{Name: "log", Mode: 0o600, Size: 10, Typeflag: tar.TypeReg}
	if err := a.body(hdr, strings.NewReader("ten bytes.and more written since"), "log"); err != nil {
		t.Fatal(err)
	}
	if err := a.tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "grew") {
		t.Fatal("the grown file was not logged: ", logs.String())
	}
	tr := tar.NewReader(&archive)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(tr); string(b) != "ten bytes." {
		t.Fatalf("archived %q", b)
	}
}

// A copy counts as one moment's only when the source reads the same before
// and after it and the copy carries that too.
func TestSameAcrossCopy(t *testing.T) {
	wal := func(salt string) []byte { return append([]byte("wal:"), salt...) }
	db := func(counter string) []byte { return append([]byte("db:"), counter...) }
	for _, c := range []struct {
		name                  string
		before, copied, after []byte
		ok                    bool
	}{
		{"nothing changed", wal("s1"), wal("s1"), wal("s1"), true},
		{"the log reset before its header was copied", wal("s1"), wal("s2"), wal("s2"), false},
		{"the log reset after its header was copied", wal("s1"), wal("s1"), wal("s2"), false},
		{"a checkpoint truncated the log after it was copied", wal("s1"), wal("s1"), db("c1"), false},
		{"a commit without a log after page 1 was copied", db("c1"), db("c1"), db("c2"), false},
		{"no writer, no log", db("c1"), db("c1"), db("c1"), true},
	} {
		if err := sameAcrossCopy(c.before, c.copied, c.after, "st", "st"); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if err := sameAcrossCopy(db("c1"), db("c1"), db("c1"), "st1", "st2"); err == nil {
		t.Error("a database file written during the copy, its counter unmoved, passed")
	}
	if err := sameAcrossCopy(wal("s1"), wal("s1"), wal("s1"), "st1", "st2"); err != nil {
		t.Errorf("a checkpoint into the database file during a copy with its log failed it: %v", err)
	}
}

// Under exclusive locking SQLite bumps the change counter on the first
// commit only: a later commit leaves the fingerprint as it was, and only the
// file's stamp shows it.
func TestStampSeesACommitTheCounterMisses(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{`PRAGMA locking_mode=EXCLUSIVE`, `CREATE TABLE t (v TEXT)`, `INSERT INTO t VALUES ('aaaa')`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	before, _ := fingerprint(root, "app.db")
	stampBefore, _ := stamp(root, "app.db")
	if err := sameAcrossCopy(before, before, before, stampBefore.text, stampBefore.text); err != nil {
		t.Fatalf("nothing written, yet the copy is refused: %v", err)
	}
	time.Sleep(stampBefore.step())
	if _, err := db.Exec(`UPDATE t SET v = 'bbbb'`); err != nil {
		t.Fatal(err)
	}
	after, _ := fingerprint(root, "app.db")
	stampAfter, _ := stamp(root, "app.db")
	if !bytes.Equal(before, after) {
		t.Fatalf("the change counter moved (%x to %x): this test is of the stamp alone", before, after)
	}
	if err := sameAcrossCopy(before, before, after, stampBefore.text, stampAfter.text); err == nil {
		t.Fatalf("a commit under exclusive locking went unseen: fingerprint %x to %x, stamp %s to %s", before, after, stampBefore.text, stampAfter.text)
	}
}

// A file listed by the walk and removed before it is read (a rollback
// journal at the end of a write) is left out and logged; the volume still
// gets its backup.
func TestFilesLeavesOutAFileRemovedWhileRead(t *testing.T) {
	for _, kind := range []string{"file", "symlink", "folder"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gone")
			var err error
			switch kind {
			case "file":
				err = os.WriteFile(path, []byte("x"), 0o600)
			case "symlink":
				err = os.Symlink("elsewhere", path)
			case "folder":
				err = os.Mkdir(path, 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Fatalf("read %s: %v %v", dir, entries, err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			source, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer source.Close()
			var logs bytes.Buffer
			a := &archiver{files: Files{Source: dir}, source: source, logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				tw: tar.NewWriter(io.Discard), buf: make([]byte, 16)}
			if err := a.add(context.Background(), "gone", entries[0]); err != nil {
				t.Fatalf("a removed %s failed the run: %v", kind, err)
			}
			if a.skipped != 1 || !strings.Contains(logs.String(), "removed while the volume was read") {
				t.Fatalf("skipped %d, logs %s", a.skipped, logs.String())
			}
		})
	}
}

// Each try copies a database as its name now holds it: one replaced by a
// rename since the walk reached it is copied as replaced, and one removed is
// left out as any file removed while the volume is read.
func TestASQLiteCopyIsOfWhatTheNameHoldsNow(t *testing.T) {
	dir, stagingDir := t.TempDir(), t.TempDir()
	for name, v := range map[string]string{"app.db": "old", "next.db": "new"} {
		db := openSQLite(t, filepath.Join(dir, name))
		exec1(t, db, `CREATE TABLE t (v TEXT)`)
		exec1(t, db, `INSERT INTO t VALUES (?)`, v)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	source, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	staging, err := os.OpenRoot(stagingDir)
	if err != nil {
		t.Fatal(err)
	}
	defer staging.Close()
	a := &archiver{files: Files{Source: dir, Staging: stagingDir}, source: source, staging: staging,
		logger: slog.New(slog.DiscardHandler), buf: make([]byte, 1<<16)}
	walked, err := source.Open("app.db")
	if err != nil {
		t.Fatal(err)
	}
	defer walked.Close()
	if err := os.Rename(filepath.Join(dir, "next.db"), filepath.Join(dir, "app.db")); err != nil {
		t.Fatal(err)
	}
	staged, err := a.consistentCopy(context.Background(), "app.db", "1.db")
	if err != nil {
		t.Fatalf("a database replaced by a rename: %v", err)
	}
	var got string
	if err := openSQLite(t, filepath.Join(stagingDir, staged)).QueryRow(`SELECT v FROM t`).Scan(&got); err != nil || got != "new" {
		t.Fatalf("the copy holds %q (%v), want what the name now holds", got, err)
	}
	if err := os.Remove(filepath.Join(dir, "app.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.consistentCopy(context.Background(), "app.db", "2.db"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a database removed: %v, want it left out as removed", err)
	}
}

func TestInside(t *testing.T) {
	for _, c := range []struct {
		dir, source string
		want        bool
	}{
		{"/backup", "/data", false},
		{"/data/backup", "/data", true},
		{"/data", "/data", true},
		{"/data2", "/data", false},
		{"/", "/data", false},
	} {
		if got := inside(c.dir, c.source); got != c.want {
			t.Errorf("inside(%q, %q) = %v", c.dir, c.source, got)
		}
	}
}
