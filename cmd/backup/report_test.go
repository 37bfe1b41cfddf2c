package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// onTerminal makes the run take its stderr for a terminal.
func onTerminal(t *testing.T) {
	t.Helper()
	was := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { isTerminal = was })
}

// claimWithAGeneration backs a folder of two files up onto a claim and
// returns the claim's variables.
func claimWithAGeneration(t *testing.T) map[string]string {
	t.Helper()
	source, claim := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"a.txt": "alpha", "b.txt": "beta"} {
		if err := os.WriteFile(filepath.Join(source, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"BACKUP_RETAIN": "2", "BACKUP_SOURCE_DIR": source, "BACKUP_DIR": claim}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"files"}, env(vars), clock, io.Discard, &stderr); code != 0 {
		t.Fatalf("backup exit %d: %s", code, stderr.String())
	}
	return vars
}

const generation = "files-20261026T031500Z.tar.gz"

// A restore whose stderr is no terminal, or that is asked for --json, logs
// the one JSON line it always did, with the same fields.
func TestRestoreLogsJSONOffATerminalOrWithJSON(t *testing.T) {
	vars := claimWithAGeneration(t)
	for _, c := range []struct {
		name     string
		terminal bool
		args     []string
	}{
		{"no terminal", false, nil},
		{"--json on a terminal", true, []string{"--json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.terminal {
				onTerminal(t)
			}
			target := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := append([]string{"restore", "--claim", "--target", target, generation}, c.args...)
			if code := run(context.Background(), args, env(vars), clock, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			lines := testenv.JSONLines(t, stderr.String())
			if len(lines) != 1 {
				t.Fatalf("want one line, got %s", stderr.String())
			}
			keys := make([]string, 0, len(lines[0]))
			for k := range lines[0] {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if want := []string{"files", "generation", "level", "msg", "path", "time"}; !slices.Equal(keys, want) {
				t.Errorf("fields %q, want %q", keys, want)
			}
			if l := lines[0]; l["msg"] != "restored" || l["generation"] != generation || l["path"] != target || l["files"] != 2.0 {
				t.Errorf("logged %v", l)
			}
			if stdout.String() != "unpacked into "+target+"\n" {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

func TestRestoreSpeaksToAPersonOnATerminal(t *testing.T) {
	onTerminal(t)
	vars := claimWithAGeneration(t)
	info, err := os.Stat(filepath.Join(vars["BACKUP_DIR"], generation))
	if err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"restore", "--claim", "--target", target, generation}, env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stderr.String()
	for _, want := range []string{
		"reading and unpacking " + generation + "\n",
		"100%",
		"restored " + generation + " from the claim at " + vars["BACKUP_DIR"] + "\n",
		"  into      2 files into " + target + "\n",
		"  size      " + size(info.Size()) + " as stored\n",
		"  passed    gzip's CRC, the archive reads whole\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, `"msg"`) {
		t.Errorf("a JSON line on the terminal:\n%s", out)
	}
	if !strings.Contains(stdout.String(), "unpacked into "+target) {
		t.Errorf("stdout %q", stdout.String())
	}

	// Failures are plain lines too, and exit as they always did.
	for _, c := range []struct {
		args []string
		vars map[string]string
		code int
		want string
	}{
		{[]string{"restore", "--claim", "--target", t.TempDir(), "files-20261027T031500Z.tar.gz"}, vars, 1,
			"restore of files-20261027T031500Z.tar.gz failed: "},
		{[]string{"restore", "--target", t.TempDir(), generation}, vars, 2,
			"backup restore did not start: BACKUP_OFF_CLUSTER is not set"},
		{[]string{"restore", "--claim", "--target", t.TempDir(), "notes.txt"}, vars, 2, "backup restore did not start: "},
		{[]string{"restore", "--claim", "--list"}, map[string]string{"BACKUP_DIR": filepath.Join(t.TempDir(), "absent")}, 1,
			"listing the generations failed: "},
		{[]string{"drill", "--claim"}, vars, 2, "backup drill did not start: the drill restores the newest off-cluster copy: drop --claim"},
	} {
		stderr.Reset()
		if code := run(context.Background(), c.args, env(c.vars), clock, io.Discard, &stderr); code != c.code {
			t.Errorf("%q: exit %d, want %d", c.args, code, c.code)
		}
		if !strings.HasPrefix(stderr.String(), c.want) || strings.Contains(stderr.String(), `"msg"`) {
			t.Errorf("%q: want a plain line opening %q, got %q", c.args, c.want, stderr.String())
		}
	}
}

func TestTerminalReport(t *testing.T) {
	var out bytes.Buffer
	r := &terminalReport{w: &out}
	g := backup.Generation{Method: "files", Time: time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)}

	// A stage that moves all its bytes ends with a full bar; one cut short
	// ends its line; one that moves none is a line.
	r.Begin("fetching, decrypting and unpacking "+g.Name()+".age", 3<<20)
	for range 3 {
		r.Advance(1 << 20)
	}
	r.End()
	r.Begin("fetching, decrypting and unpacking "+g.Name()+".age", 3<<20)
	r.Advance(1 << 20)
	r.End()
	r.Begin("checking "+g.Name(), 0)
	r.End()
	if !strings.Contains(out.String(), "100%") || !strings.Contains(out.String(), "3.0 MiB") || !strings.HasSuffix(out.String(), "\nchecking "+g.Name()+"\n") {
		t.Errorf("the stages printed %q", out.String())
	}

	out.Reset()
	r.passedOver([]backup.Generation{{Method: "files", Time: g.Time.Add(time.Hour)}})
	r.drillPassed("s3://backup-storage/jorisjonkers-dev/apps/data", backup.Restored{Generation: g, Files: 1, Databases: 1, Size: 1536,
		Checks: []string{"the provider's SHA-256 checksum", "age's authentication", "gzip's CRC", "the archive reads whole",
			"integrity_check of 1 SQLite database"}})
	r.drillFailed(errors.New("files-20261026T031500Z.tar.gz: SQLite database app.db: malformed"))
	want := "passed over copies stamped after the drill's own time (a clock ran ahead when they were written): files-20261026T041500Z.tar.gz\n" +
		"drill passed: files-20261026T031500Z.tar.gz from s3://backup-storage/jorisjonkers-dev/apps/data\n" +
		"  restored  1 file into a scratch folder, since removed\n" +
		"  size      1.5 KiB (1536 bytes) as stored\n" +
		"  passed    the provider's SHA-256 checksum, age's authentication, gzip's CRC, the archive reads whole, integrity_check of 1 SQLite database\n" +
		"drill failed: files-20261026T031500Z.tar.gz: SQLite database app.db: malformed\n"
	if out.String() != want {
		t.Errorf("said\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	dump := backup.Generation{Method: "postgres", Time: g.Time}
	r.restored("the claim at /backup", backup.Restored{Generation: dump, Path: "/restore/postgres-20261026T031500Z.sql", Size: 512,
		Checks: []string{"gzip's CRC"}})
	if want := "restored postgres-20261026T031500Z.sql.gz from the claim at /backup\n" +
		"  into      /restore/postgres-20261026T031500Z.sql\n" +
		"  size      512 bytes as stored\n" +
		"  passed    gzip's CRC\n"; out.String() != want {
		t.Errorf("said\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1.0 KiB (1024 bytes)",
		64 << 20: "64.0 MiB (67108864 bytes)", 3 << 40: "3.0 TiB (3298534883328 bytes)"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestJSONReportLinesAreThoseOfBefore(t *testing.T) {
	var out bytes.Buffer
	r := newReporter(false, &out, slogJSON(&out))
	g := backup.Generation{Method: "files", Time: time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)}
	r.Begin("fetching", 10)
	r.Advance(10)
	r.End()
	r.passedOver([]backup.Generation{g})
	r.drillPassed("s3://b/p", backup.Restored{Generation: g, Files: 2, Databases: 1})
	r.drillFailed(errors.New("broken"))
	r.restoreFailed(g, errors.New("broken"))
	r.listFailed(errors.New("broken"))
	var got []string
	for _, line := range testenv.JSONLines(t, out.String()) {
		delete(line, "time")
		b, _ := json.Marshal(line)
		got = append(got, string(b))
	}
	want := []string{
		`{"copies":["files-20261026T031500Z.tar.gz"],"level":"WARN","msg":"the drill passed over copies stamped after its own time; a clock ran ahead when they were written"}`,
		`{"files":2,"generation":"files-20261026T031500Z.tar.gz","level":"INFO","msg":"drill passed","sqlite_databases":1}`,
		`{"error":"broken","level":"ERROR","msg":"drill failed"}`,
		`{"error":"broken","generation":"files-20261026T031500Z.tar.gz","level":"ERROR","msg":"restore failed"}`,
		`{"error":"broken","level":"ERROR","msg":"restore failed"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func slogJSON(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// A restore is described as its method puts it; one of a method no longer
// known is named by its path alone.
func TestARestoreOfAnUnknownMethodIsNamedByItsPath(t *testing.T) {
	r := backup.Restored{Generation: backup.Generation{Method: "mysql", Time: t0}, Path: "/restore/x"}
	if what, where := restoredWhat(r), into(r); what != "the generation" || where != "/restore/x" {
		t.Errorf("described as %q, %q", what, where)
	}
}
