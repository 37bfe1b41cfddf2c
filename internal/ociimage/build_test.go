package ociimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

var hello struct {
	once sync.Once
	path string
	err  error
}

// helloBinary builds testdata/hello once for the package's tests, the way
// the images' binaries are built.
func helloBinary(t *testing.T) string {
	t.Helper()
	hello.once.Do(func() {
		dir, err := os.MkdirTemp("", "ociimage-")
		if err != nil {
			hello.err = err
			return
		}
		hello.path = filepath.Join(dir, "hello")
		hello.err = GoBuild{Dir: moduleRoot(t)}.Build(context.Background(), "./internal/ociimage/testdata/hello", hello.path)
	})
	if hello.err != nil {
		t.Fatal(hello.err)
	}
	return hello.path
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := ModuleRoot(context.Background(), "", ".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestBuildStampsTheCheckout builds a binary as the images' are built: it is
// static, and the version and commit Go stamped in it are what its --version
// prints through internal/cli, the same StampOf puts on the image's labels.
func TestBuildStampsTheCheckout(t *testing.T) {
	path := helloBinary(t)
	if err := static(path); err != nil {
		t.Fatal(err)
	}
	stamp, err := StampOf(path, cli.Stamp{})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(stamp.Revision) {
		t.Errorf("revision %q: the checkout's commit was not stamped", stamp.Revision)
	}
	if stamp.Version == "(devel)" || stamp.Version == "" {
		t.Errorf("version %q: the checkout's version was not stamped", stamp.Version)
	}
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if line := strings.TrimSpace(string(out)); !strings.HasPrefix(line, "hello "+stamp.Version+", commit "+stamp.Revision) {
		t.Errorf("--version line %q does not carry the stamp %+v", line, stamp)
	}
}

// TestBuildStampsTheReleaseTag builds as a release does, with the tag and
// commit given: the binary says them, not Go's pseudo-version, with the Go
// toolchain and the platform, and StampOf reads the same back for the labels.
func TestBuildStampsTheReleaseTag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hello")
	b := GoBuild{Dir: moduleRoot(t), Version: "v9.8.7", Commit: "0123456789abcdef0123456789abcdef01234567"}
	if err := b.Build(context.Background(), "./internal/ociimage/testdata/hello", path); err != nil {
		t.Fatal(err)
	}
	stamp, err := StampOf(path, b.Stamped())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stamp{Version: b.Version, Revision: b.Commit}); stamp != want {
		t.Errorf("StampOf = %+v, want %+v", stamp, want)
	}
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "hello v9.8.7, commit " + b.Commit + ", go"
	if line := strings.TrimSpace(string(out)); !strings.HasPrefix(line, want) || !strings.HasSuffix(line, ", "+Platform.OS+"/"+Platform.Architecture) {
		t.Errorf("--version line %q, want %q..., %s/%s", line, want, Platform.OS, Platform.Architecture)
	}
}

func TestBuildFailuresNameTheCause(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	notGo := filepath.Join(dir, "not-go")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dynamic := filepath.Join(dir, "dynamic")
	cgo := exec.Command("go", "build", "-o", dynamic, "./internal/ociimage/testdata/dynamic")
	cgo.Dir, cgo.Env = root, append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cgo.CombinedOutput(); err != nil {
		t.Fatalf("build a cgo binary (it needs gcc, which scripts/test-deps.sh installs): %v\n%s", err, out)
	}
	for _, c := range []struct {
		what string
		err  func() error
		want string
	}{
		{"a package that is not there", func() error {
			return GoBuild{Dir: root}.Build(context.Background(), "./internal/ociimage/testdata/none", filepath.Join(dir, "none"))
		}, "go build ./internal/ociimage/testdata/none: "},
		{"a go command that is not there", func() error {
			return GoBuild{Dir: root, Go: filepath.Join(dir, "no-go")}.Build(context.Background(), "./cmd/backup", filepath.Join(dir, "x"))
		}, "go build ./cmd/backup: "},
		{"a binary that needs a dynamic loader", func() error { return static(dynamic) }, "dynamic is not a static binary"},
		{"a file that is no binary", func() error { return static(notGo) }, "read not-go"},
		{"a stamp read from no Go binary", func() error { _, err := StampOf(notGo, cli.Stamp{}); return err }, "read the build of not-go"},
		{"a module root outside any module", func() error { _, err := ModuleRoot(context.Background(), "", dir); return err }, "not inside a Go module"},
		{"a module root without go", func() error { _, err := ModuleRoot(context.Background(), filepath.Join(dir, "no-go"), "."); return err }, "go env GOMOD"},
	} {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.what, err, c.want)
		}
	}
}

func TestFirstProblem(t *testing.T) {
	for _, c := range []struct{ output, want string }{
		{"", ""},
		{"# github.com/x/cmd/a\ncmd/a/main.go:3:1: syntax error\ncmd/a/main.go:4:1: more\n", "cmd/a/main.go:3:1: syntax error"},
		{"package ./nope is not in std\n", "package ./nope is not in std"},
		{"\n# only a heading\n", ""},
	} {
		if got := firstProblem(c.output); got != c.want {
			t.Errorf("firstProblem(%q) = %q, want %q", c.output, got, c.want)
		}
	}
}
