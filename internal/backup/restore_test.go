package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func tarOf(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.Mode = 0o644
		body := []byte(strings.Repeat("x", int(h.Size)))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUnpack(t *testing.T) {
	dir := t.TempDir()
	n, err := unpack(context.Background(), bytes.NewReader(tarOf(t,
		tar.Header{Name: "d/", Typeflag: tar.TypeDir},
		tar.Header{Name: "d/e/f.txt", Typeflag: tar.TypeReg, Size: 3},
		tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "d/e/f.txt"},
	)), dir)
	if err != nil || n != 1 {
		t.Fatalf("unpacked %d: %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "link")); string(b) != "xxx" {
		t.Fatalf("link reads %q", b)
	}
	for name, entry := range map[string]tar.Header{
		"an entry leaving the target":  {Name: "../escape", Typeflag: tar.TypeReg, Size: 1},
		"an absolute entry":            {Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1},
		"a device":                     {Name: "dev", Typeflag: tar.TypeChar},
		"a file through a symlink out": {Name: "out/x", Typeflag: tar.TypeReg, Size: 1},
	} {
		dir := t.TempDir()
		if err := os.Symlink("/tmp", filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		if _, err := unpack(context.Background(), bytes.NewReader(tarOf(t, entry)), dir); err == nil {
			t.Errorf("%s: unpacked", name)
		}
	}
	if _, err := unpack(context.Background(), strings.NewReader("not a tar archive at all, but long enough to be read as a header block"), t.TempDir()); err == nil {
		t.Error("unpacked garbage")
	}
}

func TestRestoreRefusesToOverwrite(t *testing.T) {
	target := t.TempDir()
	work := filepath.Join(target, ".w")
	if err := os.MkdirAll(filepath.Join(work, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(target, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := moveInto(work, target); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("moveInto: %v", err)
	}
}

// A file another process creates in the target while the restore publishes
// is never replaced, and what was already published goes back out.
func TestRestoreNeverReplacesAFileThatAppearsWhilePublishing(t *testing.T) {
	target := t.TempDir()
	work := filepath.Join(target, ".w")
	for _, name := range []string{"a", "b"} {
		if err := os.MkdirAll(work, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte("restored "+name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	beforePublish = func(name string) {
		if name == "b" {
			if err := os.WriteFile(filepath.Join(target, "b"), []byte("someone else's"), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { beforePublish = nil })
	if err := moveInto(work, target); err == nil || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("moveInto: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "b")); err != nil || string(b) != "someone else's" {
		t.Fatalf("target/b = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(target, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a, published before the failure, is still in the target: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "a")); err != nil || string(b) != "restored a" {
		t.Fatalf("work/a = %q, %v", b, err)
	}
}

// A dump restored where a file of its name already is fails and leaves that
// file as it was.
func TestRestoreOfADumpRefusesToOverwrite(t *testing.T) {
	claim, g := dumpOnClaim(t)
	r := Restorer{Source: ClaimSource{Dir: claim}}
	target := t.TempDir()
	got, err := r.Restore(context.Background(), g, target)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got.Path); string(b) != "SELECT 1;\n" {
		t.Fatalf("restored %q", b)
	}
	if err := os.WriteFile(got.Path, []byte("edited by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(context.Background(), g, target); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second restore into the same target: %v", err)
	}
	if b, _ := os.ReadFile(got.Path); string(b) != "edited by hand" {
		t.Fatalf("the file already there now reads %q", b)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 1 {
		t.Fatalf("target holds %d entries, want the one file", len(entries))
	}
}

func TestRestoreFromTheClaimFailsOnAMissingOrBrokenGeneration(t *testing.T) {
	claim := t.TempDir()
	g := Generation{Method: "files", Time: time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)}
	r := Restorer{Source: ClaimSource{Dir: claim}}
	if _, err := r.Restore(context.Background(), g, t.TempDir()); err == nil {
		t.Fatal("restored a missing generation")
	}
	if err := os.WriteFile(filepath.Join(claim, g.Name()), []byte("not gzip"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(context.Background(), g, t.TempDir()); err == nil {
		t.Fatal("restored a broken generation")
	}
	if _, err := (Restorer{Source: ClaimSource{Dir: filepath.Join(claim, "absent")}}).List(context.Background()); err == nil {
		t.Fatal("listed an absent claim")
	}
}

// A restore killed mid-stream leaves its work folder in the target; the
// next restore there removes it, and a restore already running there keeps
// any other out.
func TestRestoreClearsAKilledRestoresWorkFolder(t *testing.T) {
	claim, g := dumpOnClaim(t)
	target := t.TempDir()
	killed := filepath.Join(target, workPrefix+"1234")
	if err := os.MkdirAll(filepath.Join(killed, "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := Restorer{Source: ClaimSource{Dir: claim}}

	unlock, err := lockTarget(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(context.Background(), g, target); err == nil || !strings.Contains(err.Error(), "another restore") {
		t.Fatalf("a restore beside a running one: %v", err)
	}
	if _, err := os.Stat(killed); err != nil {
		t.Fatalf("a running restore's work folder was touched: %v", err)
	}
	unlock()

	if _, err := r.Restore(context.Background(), g, target); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(target)
	if len(entries) != 1 || entries[0].Name() != strings.TrimSuffix(g.Name(), ".gz") {
		t.Fatalf("target holds %v, want the dump alone", entries)
	}
}

// dumpOnClaim is a claim holding one postgres generation, "SELECT 1;".
func dumpOnClaim(t *testing.T) (claim string, g Generation) {
	t.Helper()
	claim = t.TempDir()
	g = Generation{Method: "postgres", Time: time.Date(2026, 10, 26, 3, 15, 0, 0, time.UTC)}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("SELECT 1;\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(claim, g.Name()), gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return claim, g
}

// An unpacked file and folder keep the mode the archive holds, whatever the
// umask, and, for a restore run as root, their owner.
func TestUnpackKeepsModesAndOwners(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "shared/", Typeflag: tar.TypeDir, Mode: 0o2770, Uid: 1000, Gid: 1000},
		{Name: "shared/app.db", Typeflag: tar.TypeReg, Mode: 0o660, Size: 2, Uid: 1000, Gid: 1000},
		{Name: "readonly/", Typeflag: tar.TypeDir, Mode: 0o555},
		{Name: "readonly/x", Typeflag: tar.TypeReg, Mode: 0o444, Size: 2},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte("ok"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "readonly"), 0o700) })
	if _, err := unpack(context.Background(), &buf, dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		"shared": os.ModeDir | os.ModeSetgid | 0o770, "shared/app.db": 0o660,
		"readonly": os.ModeDir | 0o555, "readonly/x": 0o444,
	} {
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s has mode %v, want %v", name, info.Mode(), want)
		}
		if st := info.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && strings.HasPrefix(name, "shared") && (st.Uid != 1000 || st.Gid != 1000) {
			t.Errorf("%s is owned by %d:%d, want 1000:1000", name, st.Uid, st.Gid)
		}
	}
}

// A read-only folder restored at the top of a target is published there by
// a restore that does not run as root, and keeps its mode. Run as root, the
// test runs itself again as nobody: root may rename any folder.
func TestPublishAReadOnlyFolderWithoutRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv("BACKUP_TEST_AS_NOBODY") != "" {
			t.Fatal("still root")
		}
		// The test binary's own folder is root's alone: nobody runs a copy.
		dir, err := os.MkdirTemp("", "as-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		binary, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		self := filepath.Join(dir, "backup.test")
		if err := os.WriteFile(self, binary, 0o755); err != nil { //nolint:gosec // a test binary nobody must run
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // as above
			t.Fatal(err)
		}
		child := exec.Command(self, "-test.run=^"+t.Name()+"$", "-test.v")
		child.Dir = dir
		child.Env = append(os.Environ(), "BACKUP_TEST_AS_NOBODY=1", "TMPDIR=/tmp")
		child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
		out, err := child.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err != nil && !errors.As(err, &exit):
			t.Skipf("cannot run as nobody here (a user namespace mapping root alone?): %v", err)
		case err != nil:
			t.Fatalf("as nobody: %v\n%s", err, out)
		case !strings.Contains(string(out), "--- PASS: "+t.Name()):
			t.Fatalf("as nobody, the test did not run:\n%s", out)
		}
		return
	}
	base, err := os.MkdirTemp("", "publish-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = removeRestored(base) }()
	work, target := filepath.Join(base, "work"), filepath.Join(base, "target")
	for _, d := range []string{filepath.Join(work, "docs"), target} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "docs", "a"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(work, "docs"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := moveInto(work, target); err != nil {
		t.Fatalf("publish a read-only folder: %v", err)
	}
	info, err := os.Stat(filepath.Join(target, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o555 {
		t.Fatalf("published folder has mode %v, want 0555", info.Mode())
	}
}
