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
)

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

// A restore logs the one JSON line it always did, with the same fields.
func TestRestoreLogsJSON(t *testing.T) {
	vars := claimWithAGeneration(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"a restore", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := append([]string{"restore", "--claim", "--target", target, generation}, c.args...)
			if code := run(context.Background(), args, env(vars), clock, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			lines := logLines(t, &stderr)
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

func TestJSONReportLinesAreThoseOfBefore(t *testing.T) {
	var out bytes.Buffer
	r := newReporter(slogJSON(&out))
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
	for _, line := range logLines(t, &out) {
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
