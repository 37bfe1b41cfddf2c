package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var t0 = time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)

func clock() time.Time { return t0 }

func TestFilesRunEndToEnd(t *testing.T) {
	source, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(source, "a.txt"), []byte("alpha"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BACKUP_RETAIN": "2", "BACKUP_SOURCE_DIR": source, "BACKUP_DIR": dir}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"files"}, env(vars), clock, io.Discard, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "files-20261026T031500Z.tar.gz")); err != nil {
		t.Fatal(err)
	}
	lines := testenv.JSONLines(t, out.String())
	last := lines[len(lines)-1]
	if last["msg"] != "backup complete" || last["generation"] != "files-20261026T031500Z.tar.gz" {
		t.Fatalf("last line %v", last)
	}

	vars["BACKUP_ROLLBACK"] = "rb-42"
	out.Reset()
	if code := run(context.Background(), []string{"files"}, env(vars), clock, io.Discard, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "rollback-rb-42-files-20261026T031500Z.tar.gz")); err != nil {
		t.Fatal(err)
	}
}

func TestEveryBadSettingStopsTheRunWithOneLine(t *testing.T) {
	dir := t.TempDir()
	base := map[string]string{"BACKUP_RETAIN": "3", "BACKUP_DIR": dir, "BACKUP_SOURCE_DIR": t.TempDir(),
		"BACKUP_HOST": "db", "PGUSER": "u", "PGPASSWORD": "p", "RABBITMQ_USERNAME": "u", "RABBITMQ_PASSWORD": "p"}
	with := func(changes map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range changes {
			if v == "-" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"BACKUP_RETAIN missing", []string{"files"}, with(map[string]string{"BACKUP_RETAIN": "-"}), "BACKUP_RETAIN: required"},
		{"BACKUP_RETAIN malformed", []string{"files"}, with(map[string]string{"BACKUP_RETAIN": "fourteen"}), "BACKUP_RETAIN"},
		{"BACKUP_RETAIN zero", []string{"files"}, with(map[string]string{"BACKUP_RETAIN": "0"}), "BACKUP_RETAIN"},
		{"BACKUP_ROLLBACK malformed", []string{"files"}, with(map[string]string{"BACKUP_ROLLBACK": "../x"}), "BACKUP_ROLLBACK"},
		{"claim inside the volume", []string{"files"}, with(map[string]string{"BACKUP_SOURCE_DIR": filepath.Dir(dir)}), "inside BACKUP_SOURCE_DIR"},
		{"postgres without a host", []string{"postgres"}, with(map[string]string{"BACKUP_HOST": "-"}), "BACKUP_HOST"},
		{"postgres with a bad port", []string{"postgres"}, with(map[string]string{"BACKUP_PORT": "x"}), "BACKUP_PORT"},
		{"postgres without a password", []string{"postgres"}, with(map[string]string{"PGPASSWORD": "-"}), "PGPASSWORD"},
		{"rabbitmq without a user", []string{"rabbitmq"}, with(map[string]string{"RABBITMQ_USERNAME": "-"}), "RABBITMQ_USERNAME"},
		{"rabbitmq without a password", []string{"rabbitmq"}, with(map[string]string{"RABBITMQ_PASSWORD": "-"}), "RABBITMQ_PASSWORD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(context.Background(), c.args, env(c.vars), clock, io.Discard, &out); code != 2 {
				t.Fatalf("exit %d", code)
			}
			lines := testenv.JSONLines(t, out.String())
			if len(lines) != 1 || lines[0]["level"] != "ERROR" || !strings.Contains(lines[0]["error"].(string), c.want) {
				t.Fatalf("want one error line naming %q, got %s", c.want, out.String())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Fatalf("a stopped run wrote %v", entries)
			}
		})
	}
}

// variables are every variable docs/backup.md's table names for backup.
var variables = []string{"BACKUP_RETAIN", "BACKUP_ROLLBACK", "BACKUP_DIR", "BACKUP_SOURCE_DIR", "BACKUP_HOST", "BACKUP_PORT",
	"PGUSER", "PGPASSWORD", "BACKUP_PG_DUMPALL", "RABBITMQ_USERNAME", "RABBITMQ_PASSWORD", "BACKUP_OFF_CLUSTER",
	"BACKUP_OFF_CLUSTER_PATH", "BACKUP_OFF_CLUSTER_RECIPIENT", "BACKUP_OFF_CLUSTER_PART_MIB", "AWS_ENDPOINT_URL",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "backup", Variables: variables, Start: []string{"files"},
		Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
			return run(context.Background(), args, getenv, clock, stdout, stderr)
		}})
}

// unread is an environment a run must not read.
func unread(t *testing.T) func(string) string {
	return func(name string) string {
		t.Errorf("%s was read", name)
		return ""
	}
}

func TestEachCommandsHelpNamesItsFlagsAndVariables(t *testing.T) {
	destination := []string{"BACKUP_OFF_CLUSTER", "BACKUP_OFF_CLUSTER_PATH", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}
	copying := append([]string{"BACKUP_RETAIN", "BACKUP_ROLLBACK", "BACKUP_DIR", "BACKUP_OFF_CLUSTER_RECIPIENT", "BACKUP_OFF_CLUSTER_PART_MIB"}, destination...)
	for command, want := range map[string][]string{
		"files":    append([]string{"BACKUP_SOURCE_DIR"}, copying...),
		"postgres": append([]string{"BACKUP_HOST", "BACKUP_PORT", "PGUSER", "PGPASSWORD", "BACKUP_PG_DUMPALL"}, copying...),
		"rabbitmq": append([]string{"BACKUP_HOST", "BACKUP_PORT", "RABBITMQ_USERNAME", "RABBITMQ_PASSWORD"}, copying...),
		"restore":  append([]string{"--identity FILE", "--claim", "--list", "--target DIR", "--json", "BACKUP_DIR"}, destination...),
		"drill":    append([]string{"--identity FILE", "--scratch DIR", "--json"}, destination...),
	} {
		for _, help := range [][]string{{command, "--help"}, {command, "-h"}, {"help", command}} {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), help, unread(t), clock, &stdout, &stderr); code != 0 {
				t.Errorf("%q: exit %d: %s", help, code, stderr.String())
			}
			if !strings.Contains(stdout.String(), "Usage:\n  backup "+command) {
				t.Errorf("%q printed no usage:\n%s", help, stdout.String())
			}
			for _, name := range want {
				if !strings.Contains(stdout.String(), name) {
					t.Errorf("%q does not name %s:\n%s", help, name, stdout.String())
				}
			}
		}
	}
}

func TestCommandLineMistakesExitTwoWithTheUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "backup: a command is required: drill, files, postgres, rabbitmq or restore"},
		{[]string{"mysql"}, `unknown command "mysql" for "backup"`},
		{[]string{"files", "postgres"}, `unknown command "postgres" for "backup files"`},
		{[]string{"files", "--retain", "3"}, "backup files: unknown flag: --retain"},
		{[]string{"restore", "--bogus"}, "backup restore: unknown flag: --bogus"},
		{[]string{"restore", "--claim"}, "name the one generation to restore"},
		{[]string{"restore", "--claim", "files-20261026T031500Z.tar.gz"}, "--target: name the folder to restore into"},
		{[]string{"restore", "--list", "files-20261026T031500Z.tar.gz"}, "--list takes no generation"},
		{[]string{"drill", "files-20261026T031500Z.tar.gz"}, `unknown command "files-20261026T031500Z.tar.gz" for "backup drill"`},
		{[]string{"drill", "--target", "/restore"}, "backup drill: unknown flag: --target"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, unread(t), clock, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d", c.args, code)
		}
		if !strings.Contains(stderr.String(), c.want) || !strings.Contains(stderr.String(), "Usage:") || stdout.Len() > 0 {
			t.Errorf("%q: want %q and the usage on stderr alone, got stdout %q stderr %q", c.args, c.want, stdout.String(), stderr.String())
		}
	}
}

// TestHelpNamesEveryVariableItReads configures every command with every
// variable set, so each read is made, and holds the reads to the help.
func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{"BACKUP_RETAIN": "3", "BACKUP_DIR": t.TempDir(), "BACKUP_SOURCE_DIR": t.TempDir(),
		"BACKUP_ROLLBACK": "", "BACKUP_HOST": "db", "PGUSER": "u", "PGPASSWORD": "p", "RABBITMQ_USERNAME": "u", "RABBITMQ_PASSWORD": "p",
		"BACKUP_OFF_CLUSTER": "s3://backup-storage/jorisjonkers-dev", "BACKUP_OFF_CLUSTER_PATH": "apps/data",
		"BACKUP_OFF_CLUSTER_RECIPIENT": recipient, "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
		"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
	for _, method := range []string{"files", "postgres", "rabbitmq"} {
		if _, err := configure(method, env.Getenv, nil); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	if _, err := restorerFor(env.Getenv, true, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := restorerFor(env.Getenv, false, "", true); err != nil {
		t.Fatal(err)
	}
	env.Named(t, variables)
}

func TestAFailedRunExitsNonZeroNamingTheCause(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"BACKUP_RETAIN": "1", "BACKUP_DIR": dir, "BACKUP_HOST": "127.0.0.1", "BACKUP_PORT": "1",
		"RABBITMQ_USERNAME": "u", "RABBITMQ_PASSWORD": "p"}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"rabbitmq"}, env(vars), clock, io.Discard, &out); code != 1 {
		t.Fatalf("exit %d", code)
	}
	lines := testenv.JSONLines(t, out.String())
	if len(lines) != 1 || lines[0]["msg"] != "backup failed" || !strings.Contains(lines[0]["error"].(string), "connection refused") {
		t.Fatalf("got %s", out.String())
	}
}
