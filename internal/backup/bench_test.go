package backup

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// The benchmarks run the real binary and the standard tools as processes,
// one after the other, so wall time and peak RSS are each program's own.
// Sizes are set by BACKUP_BENCH_TREE_MIB (default 1024), BACKUP_BENCH_SQLITE_MIB
// (default 200) and BACKUP_BENCH_PG_MIB (default 512).

func benchSize(b *testing.B, name string, def int) int64 {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return int64(def) << 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q is not a positive number of MiB", name, v)
	}
	return int64(n) << 20
}

// buildBackup compiles the command the images run.
func buildBackup(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "backup")
	out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/JorisJonkers-dev/delivery/cmd/backup").CombinedOutput()
	if err != nil {
		b.Fatalf("build: %v: %s", err, out)
	}
	return bin
}

// measured runs a program to completion and returns its wall time and peak RSS.
func measured(b *testing.B, cmd *exec.Cmd) (time.Duration, int64) {
	b.Helper()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v: %s", cmd.Args, err, out)
	}
	usage, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if usage != nil {
		rss = usage.Maxrss << 10 // Linux reports KiB
	}
	return took, rss
}

// writeTree fills dir with size bytes of log-like text in 4 MiB files across
// folders: it compresses about as well as the application data volumes hold.
func writeTree(b *testing.B, dir string, size int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"GET", "POST", "/api/orders", "/api/users", "200", "404", "user", "order", "created", "updated", "latency_ms", "request_id"}
	const fileSize = 4 << 20
	for i := 0; int64(i)*fileSize < size; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%16))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("f%05d.log", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		var written int
		for written < fileSize {
			n, _ := fmt.Fprintf(w, "%d %s %s %s %x %d\n", rng.Int64N(1<<40), words[rng.IntN(len(words))],
				words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.Uint64(), rng.IntN(5000))
			written += n
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// writeSQLite makes a WAL-mode database of about size bytes.
func writeSQLite(b *testing.B, path string, size int64) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=OFF",
		"CREATE TABLE docs (id INTEGER PRIMARY KEY, title TEXT, body BLOB)", "CREATE INDEX docs_title ON docs (title)"} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	const rowBytes = 2000
	rows := size / rowBytes
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.Prepare("INSERT INTO docs (title, body) VALUES ('doc ' || ?, zeroblob(1000) || randomblob(?))")
	if err != nil {
		b.Fatal(err)
	}
	for i := range rows {
		if _, err := stmt.Exec(i, rowBytes-1000); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkFilesVersusTarAndSQLiteBackup(b *testing.B) {
	treeSize := benchSize(b, "BACKUP_BENCH_TREE_MIB", 1024)
	dbSize := benchSize(b, "BACKUP_BENCH_SQLITE_MIB", 200)
	bin := buildBackup(b)
	work := b.TempDir()
	small, large := filepath.Join(work, "small"), filepath.Join(work, "large")
	writeTree(b, small, treeSize/4)
	writeTree(b, large, treeSize)
	writeSQLite(b, filepath.Join(large, "app.db"), dbSize)
	writeSQLite(b, filepath.Join(small, "app.db"), dbSize/4)

	ours := func(source string) (time.Duration, int64) {
		claim := filepath.Join(work, "claim-"+filepath.Base(source))
		if err := os.MkdirAll(claim, 0o755); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "files")
		cmd.Env = append(os.Environ(), "BACKUP_RETAIN=1", "BACKUP_SOURCE_DIR="+source, "BACKUP_DIR="+claim)
		return measured(b, cmd)
	}
	baseline := func(source string) (time.Duration, int64) {
		out := filepath.Join(work, "baseline-"+filepath.Base(source))
		if err := os.MkdirAll(out, 0o755); err != nil {
			b.Fatal(err)
		}
		t1, rss1 := measured(b, exec.Command("sqlite3", filepath.Join(source, "app.db"), ".backup '"+filepath.Join(out, "app.db")+"'"))
		t2, rss2 := measured(b, exec.Command("tar", "-czf", filepath.Join(out, "tree.tar.gz"), "-C", source, "."))
		return t1 + t2, max(rss1, rss2)
	}
	for b.Loop() {
		baseTime, _ := baseline(large)
		ourTime, ourRSS := ours(large)
		_, smallRSS := ours(small)
		b.ReportMetric(baseTime.Seconds(), "baseline-s")
		b.ReportMetric(ourTime.Seconds(), "backup-s")
		b.ReportMetric(baseTime.Seconds()/ourTime.Seconds(), "speedup")
		b.ReportMetric(float64(ourRSS)/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(smallRSS)/(1<<20), "peak-RSS-quarter-tree-MiB")
	}
}

func BenchmarkPostgresVersusPgDumpallGzip(b *testing.B) {
	size := benchSize(b, "BACKUP_BENCH_PG_MIB", 512)
	bin := buildBackup(b)
	ctx := context.Background()
	pg, err := testenv.StartPostgresServer(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pg.Stop() }()
	// Rows of about 200 bytes: text that compresses like application data.
	rows := size / 200
	if _, err := pg.PsqlContext(ctx, "postgres", fmt.Sprintf(`
CREATE TABLE events AS SELECT g AS id, now() - g * interval '1 second' AS at,
  'user-' || (g %% 9973) AS actor, md5(g::text) || ' ' || md5((g * 7)::text) || ' ' || repeat('ok ', 20) AS payload
FROM generate_series(1, %d) g;
CREATE INDEX ON events (actor);`, rows)); err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	for b.Loop() {
		base := exec.Command("sh", "-c", `"$0" --no-password | gzip > "$1"`, pg.Bin("pg_dumpall"), filepath.Join(work, "baseline.sql.gz"))
		base.Env = append(os.Environ(), pg.Env()...)
		baseTime, _ := measured(b, base)
		claim := filepath.Join(work, "claim")
		_ = os.RemoveAll(claim)
		if err := os.MkdirAll(claim, 0o755); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "postgres")
		cmd.Env = append(os.Environ(), "BACKUP_RETAIN=1", "BACKUP_DIR="+claim, "BACKUP_PG_DUMPALL="+pg.Bin("pg_dumpall"),
			"BACKUP_HOST="+pg.Host, "BACKUP_PORT="+strconv.Itoa(pg.Port), "PGUSER="+pg.User, "PGPASSWORD="+pg.Password)
		ourTime, ourRSS := measured(b, cmd)
		b.ReportMetric(baseTime.Seconds(), "baseline-s")
		b.ReportMetric(ourTime.Seconds(), "backup-s")
		b.ReportMetric(ourTime.Seconds()/baseTime.Seconds(), "ratio")
		b.ReportMetric(float64(ourRSS)/(1<<20), "peak-RSS-MiB")
	}
}
