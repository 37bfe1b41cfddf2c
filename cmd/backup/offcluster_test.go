package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const recipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"

func TestPartialOffClusterSettingsStopTheRunBeforeAnythingIsWritten(t *testing.T) {
	base := map[string]string{"BACKUP_RETAIN": "3", "BACKUP_SOURCE_DIR": t.TempDir(),
		"BACKUP_OFF_CLUSTER": "s3://backup-storage/jorisjonkers-dev", "BACKUP_OFF_CLUSTER_PATH": "apps/data",
		"BACKUP_OFF_CLUSTER_RECIPIENT": recipient, "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
		"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
	cases := []struct {
		name    string
		changes map[string]string
		want    string
	}{
		{"a destination without a recipient", map[string]string{"BACKUP_OFF_CLUSTER_RECIPIENT": "-"}, "BACKUP_OFF_CLUSTER_RECIPIENT: required"},
		{"a recipient that is not an age key", map[string]string{"BACKUP_OFF_CLUSTER_RECIPIENT": "ssh-ed25519 AAAAC3Nz"}, "not an age X25519 public key"},
		{"a recipient without a destination", map[string]string{"BACKUP_OFF_CLUSTER": "-"}, "BACKUP_OFF_CLUSTER_PATH is set but BACKUP_OFF_CLUSTER is not"},
		{"a bad destination", map[string]string{"BACKUP_OFF_CLUSTER": "https://backup-storage"}, "is not s3://bucket"},
		{"a destination without a path", map[string]string{"BACKUP_OFF_CLUSTER_PATH": "-"}, "BACKUP_OFF_CLUSTER_PATH: required"},
		{"no endpoint", map[string]string{"AWS_ENDPOINT_URL": "-"}, "AWS_ENDPOINT_URL: required"},
		{"a bad endpoint", map[string]string{"AWS_ENDPOINT_URL": "s3.example.com"}, "AWS_ENDPOINT_URL"},
		{"no access key", map[string]string{"AWS_ACCESS_KEY_ID": "-"}, "AWS_ACCESS_KEY_ID: required"},
		{"no secret key", map[string]string{"AWS_SECRET_ACCESS_KEY": "-"}, "AWS_SECRET_ACCESS_KEY: required"},
		{"a part size below S3's", map[string]string{"BACKUP_OFF_CLUSTER_PART_MIB": "4"}, "BACKUP_OFF_CLUSTER_PART_MIB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			vars := map[string]string{"BACKUP_DIR": dir}
			for k, v := range base {
				vars[k] = v
			}
			for k, v := range c.changes {
				if v == "-" {
					delete(vars, k)
				} else {
					vars[k] = v
				}
			}
			var out bytes.Buffer
			if code := run(context.Background(), []string{"files"}, env(vars), clock, &out, &out); code != 2 {
				t.Fatalf("exit %d: %s", code, out.String())
			}
			lines := testenv.JSONLines(t, out.String())
			if len(lines) != 1 || !strings.Contains(lines[0]["error"].(string), c.want) {
				t.Fatalf("want one line naming %q, got %s", c.want, out.String())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("a stopped run wrote %v", entries)
			}
		})
	}
}

func TestCopyRestoreAndDrillFromTheCommandLine(t *testing.T) {
	m := testenv.NewMinIO(t)
	ctx := context.Background()
	m.MakeBucket(t, "backup-storage")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	keyFile := filepath.Join(work, "key.txt")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	source, claim := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(source, "a.txt"), []byte("alpha"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"BACKUP_RETAIN": "2", "BACKUP_SOURCE_DIR": source, "BACKUP_DIR": claim,
		"BACKUP_OFF_CLUSTER": "s3://backup-storage/jorisjonkers-dev", "BACKUP_OFF_CLUSTER_PATH": "docling-serve-archive",
		"BACKUP_OFF_CLUSTER_RECIPIENT": id.Recipient().String(), "AWS_ENDPOINT_URL": m.URL(),
		"AWS_ACCESS_KEY_ID": m.AccessKey, "AWS_SECRET_ACCESS_KEY": m.SecretKey}
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"files"}, env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("backup exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "copied the generation off the cluster") {
		t.Fatalf("no copy logged: %s", stderr.String())
	}

	stdout.Reset()
	if code := run(ctx, []string{"restore", "--list"}, env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("list exit %d: %s", code, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "files-20261026T031500Z.tar.gz" {
		t.Fatalf("listed %q", got)
	}
	target := filepath.Join(work, "restored")
	if code := run(ctx, []string{"restore", "--identity", keyFile, "--target", target, "files-20261026T031500Z.tar.gz.age"},
		env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("restore exit %d: %s", code, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(target, "a.txt")); string(b) != "alpha" {
		t.Fatalf("restored a.txt as %q", b)
	}
	fromClaim := filepath.Join(work, "from-claim")
	if code := run(ctx, []string{"restore", "--claim", "--target", fromClaim, "files-20261026T031500Z.tar.gz"},
		env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("restore from the claim exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(ctx, []string{"drill", "--identity", keyFile, "--scratch", work}, env(vars), clock, &stdout, &stderr); code != 0 {
		t.Fatalf("drill exit %d: %s", code, stderr.String())
	}
	if lines := testenv.JSONLines(t, stderr.String()); len(lines) != 1 || lines[0]["msg"] != "drill passed" {
		t.Fatalf("drill said %s", stderr.String())
	}
	// On a terminal the drill shows its progress and says what it checked.
	t.Run("on a terminal", func(t *testing.T) {
		onTerminal(t)
		var stderr bytes.Buffer
		if code := run(ctx, []string{"drill", "--identity", keyFile, "--scratch", work}, env(vars), clock, &stdout, &stderr); code != 0 {
			t.Fatalf("drill exit %d: %s", code, stderr.String())
		}
		for _, want := range []string{
			"fetching, decrypting and unpacking jorisjonkers-dev/docling-serve-archive/files-20261026T031500Z.tar.gz.age\n",
			"100%",
			"checking files-20261026T031500Z.tar.gz\n",
			"drill passed: files-20261026T031500Z.tar.gz from s3://backup-storage/jorisjonkers-dev/docling-serve-archive\n",
			"  restored  1 file into a scratch folder, since removed\n",
			"  passed    the provider's SHA-256 checksum, age's authentication, gzip's CRC, the archive reads whole\n",
		} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("no %q in\n%s", want, stderr.String())
			}
		}
	})

	// Usage mistakes stop before anything is read.
	for _, args := range [][]string{
		{"restore", "--target", target, "files-20261026T031500Z.tar.gz"}, // no identity
		{"restore", "--identity", keyFile, "files-20261026T031500Z.tar.gz"},
		{"restore", "--identity", keyFile, "--target", target, "notes.txt"},
		{"restore", "--bogus"},
		{"drill", "--claim"},
	} {
		stderr.Reset()
		if code := run(ctx, args, env(vars), clock, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d", args, code)
		}
	}
	// A wrong identity fails the restore.
	other, _ := age.GenerateX25519Identity()
	otherKey := filepath.Join(work, "other.txt")
	_ = os.WriteFile(otherKey, []byte(other.String()+"\n"), 0o600)
	if code := run(ctx, []string{"restore", "--identity", otherKey, "--target", filepath.Join(work, "x"), "files-20261026T031500Z.tar.gz"},
		env(vars), clock, &stdout, &stderr); code != 1 {
		t.Fatalf("a wrong identity: exit %d", code)
	}
}

func TestPrintLoadCommands(t *testing.T) {
	var out bytes.Buffer
	for _, name := range []string{"postgres-20261026T031500Z.sql.gz", "rabbitmq-20261026T031500Z.json.gz", "files-20261026T031500Z.tar.gz"} {
		g, err := parseGeneration(name)
		if err != nil {
			t.Fatal(err)
		}
		printLoadCommands(&out, g, "/restore/"+strings.TrimSuffix(name, ".gz"))
	}
	if strings.Contains(out.String(), "ON_ERROR_STOP") {
		t.Errorf("the load stops at the superuser the new server already has:\n%s", out.String())
	}
	for _, want := range []string{"psql --no-password --dbname postgres --file '/restore/postgres-20261026T031500Z.sql'",
		"rabbitmqctl import_definitions '/restore/rabbitmq-20261026T031500Z.json'", "unpacked into"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in %s", want, out.String())
		}
	}
}
