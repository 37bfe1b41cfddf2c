package ociimage

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// Compiler builds a package of this module into a binary at out: the one
// step of a build that needs the toolchain, so a test can hand its own.
type Compiler interface {
	Build(ctx context.Context, pkg, out string) error
}

// GoBuild is the Compiler the images are built with: go build, static
// (CGO_ENABLED=0, since the images hold no libc), for Platform or another, with
// -trimpath so the binary does not depend on where the checkout is, and with
// the checkout's version and commit stamped as internal/cli reads them back.
type GoBuild struct {
	Dir string // the module's root, where go build runs
	Go  string // the go command; "" is go on PATH
	// Version is the tag a release stamps (-ldflags -X), so its binaries say
	// the tag rather than Go's pseudo-version; "" leaves Go's record.
	Version string
	// Commit is stamped the same way, for a build with no .git to read; ""
	// leaves the revision Go records.
	Commit string
	// Architecture is GOARCH for a release's other platforms; "" is
	// Platform's. Go cross-compiles a static binary with no emulator.
	Architecture string
}

func (b GoBuild) goCommand() string {
	if b.Go == "" {
		return "go"
	}
	return b.Go
}

// ModuleRoot is the folder of the module dir is in, where go build must run
// for the commands' package paths to mean this module's.
func ModuleRoot(ctx context.Context, goCommand, dir string) (string, error) {
	if goCommand == "" {
		goCommand = "go"
	}
	cmd := exec.CommandContext(ctx, goCommand, "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run it from the repository")
	}
	return filepath.Dir(gomod), nil
}

// Build builds the package pkg (./cmd/<command>) into out and checks that the
// result is a static binary.
func (b GoBuild) Build(ctx context.Context, pkg, out string) error {
	// -buildvcs=auto stamps the checkout's version and commit where there is
	// one, whatever GOFLAGS says, and builds without them where there is not.
	// The stamp rides in -ldflags, which go splits at spaces: a tag has none.
	ldflags := strings.Join(append([]string{"-s", "-w"}, cli.LDFlags(b.Version, b.Commit)...), " ")
	//nolint:gosec // the go command and a package of this module, no shell
	cmd := exec.CommandContext(ctx, b.goCommand(), "build", "-trimpath", "-buildvcs=auto", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = b.Dir
	arch := b.Architecture
	if arch == "" {
		arch = Platform.Architecture
	}
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+Platform.OS, "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if reason := firstProblem(stderr.String()); reason != "" {
			return fmt.Errorf("go build %s: %s", pkg, reason)
		}
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return static(out)
}

// firstProblem is the line of go build's output that names what went wrong:
// the first that is not a "# package" heading.
func firstProblem(output string) string {
	for line := range strings.Lines(output) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	return ""
}

// static refuses a binary that asks for a dynamic loader: the images hold no
// libc, so it would not start.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is not a static binary (it names a dynamic loader): build it with CGO_ENABLED=0", filepath.Base(path))
		}
	}
	return nil
}

// Stamped is the version and commit b stamps with -X: a -trimpath build
// does not record its -ldflags, so the labels take them from here.
func (b GoBuild) Stamped() cli.Stamp { return cli.Stamp{Version: b.Version, Commit: b.Commit} }

// Stamper is a Compiler that stamps a version or commit of its own.
type Stamper interface{ Stamped() cli.Stamp }

// StampOf reads the version and commit the binary at path was built with,
// as its --version prints them: what its build stamped where it stamped
// something, else Go's record, "(devel)" without a module version and
// "unknown" without a commit (a build outside a checkout).
func StampOf(path string, stamped cli.Stamp) (Stamp, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Stamp{}, fmt.Errorf("read the build of %s: %w", filepath.Base(path), err)
	}
	b := cli.BuildOf(stamped, info, info.GoVersion, "")
	return Stamp{Version: b.Version, Revision: b.Commit}, nil
}
