package backupworker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/backup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/backupworker"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus/bustest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// TestAWorkerBacksUpAndTheGenerationRestores: the agent's ask is answered
// once the files method wrote a generation of the data directory, its
// SQLite database copied consistently, and that generation restores.
func TestAWorkerBacksUpAndTheGenerationRestores(t *testing.T) {
	nc, _ := bustest.Connect(t, bustest.Embedded(t))
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sqlite3", filepath.Join(data, "app.db"), "create table t(v text); insert into t values ('kept');").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs := &testenv.LogBuffer{}
	s := &backupworker.Worker{Node: "n1", Dir: dir, Conn: nc, Now: time.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the worker ended with %v", err)
		}
	}()
	client := backupworker.Client{Node: "n1", Conn: nc, Within: 30 * time.Second}
	// The worker may not have subscribed yet: the first ask can find no one.
	wait.Poll{Within: 10 * time.Second, Detail: logs}.Until(t, "the worker answering", func() (bool, string) {
		err := client.BackUp(context.Background(), "notes/db", data)
		if err != nil && !strings.Contains(err.Error(), "no responders") {
			t.Fatalf("backup: %v\n%s", err, logs)
		}
		return err == nil, fmt.Sprint(err)
	})
	claim := filepath.Join(dir, "notes_2fdb")
	gens, err := backup.ClaimSource{Dir: claim}.List(context.Background())
	if err != nil || len(gens) != 1 {
		t.Fatalf("generations %v, %v", gens, err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	if _, err := (backup.Restorer{Source: backup.ClaimSource{Dir: claim}}).Restore(context.Background(), gens[0], target); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sqlite3", filepath.Join(target, "app.db"), "select v from t;").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "kept" {
		t.Fatalf("the restored database says %q, %v", out, err)
	}
	// A bad ask is answered with its reason, and is no backup.
	if err := client.BackUp(context.Background(), "notes/db", "relative/dir"); err == nil || !strings.Contains(err.Error(), "not a clean absolute path") {
		t.Fatalf("a relative data directory: %v", err)
	}
}

func FuzzDecodeAsk(f *testing.F) {
	f.Add([]byte(`{"module":"web","dataDir":"/var/lib/mesh/web/data/db"}`))
	f.Add([]byte(`{"module":"web","dataDir":"../etc"}`))
	f.Add([]byte(`{"module":"","dataDir":"/x"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ask, err := backupworker.DecodeAsk(raw)
		if err != nil {
			return
		}
		if !filepath.IsAbs(ask.DataDir) || filepath.Clean(ask.DataDir) != ask.DataDir || strings.Contains(ask.DataDir, "/../") {
			t.Fatalf("%q decoded with the data directory %q", raw, ask.DataDir)
		}
	})
}
