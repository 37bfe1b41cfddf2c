package ociimage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// dockerfile holds every image as a stage named for its target, after one
// build stage that compiles every command.
var dockerfile = filepath.Join("..", "..", "deploy", "Dockerfile")

// stagesOf parses a Dockerfile as BuildKit does, failing on any warning its
// parser or its linter gives.
func stagesOf(t *testing.T, path string) []instructions.Stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, w := range ast.Warnings {
		t.Errorf("%s:%d: %s", path, w.Location.Start.Line, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, description, _, message string, location []parser.Range) {
		line := 0
		if len(location) > 0 {
			line = location[0].Start.Line
		}
		t.Errorf("%s:%d: %s: %s (%s)", path, line, rule, message, description)
	}})
	stages, _, err := instructions.Parse(ast.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return stages
}

// TestDockerfile holds deploy/Dockerfile to what make images builds: a
// golang stage that builds every target's command static, then a stage per
// target, named for it and in the same order, on a nonroot base that copies
// its binary to the same path, runs as 65532 and starts with the same
// entrypoint, in exec form.
func TestDockerfile(t *testing.T) {
	path := dockerfile
	stages := stagesOf(t, path)
	targets := Targets()
	if len(stages) != 1+len(targets) {
		t.Fatalf("%s: %d stages, want a builder and %d images", path, len(stages), len(targets))
	}
	build := stages[0]
	if !strings.HasPrefix(build.BaseName, "golang:") || build.Name != "build" {
		t.Errorf("%s: the first stage is %s AS %s, want golang AS build", path, build.BaseName, build.Name)
	}
	var packages []string
	for _, target := range targets {
		if !slices.Contains(packages, target.Package()) {
			packages = append(packages, target.Package())
		}
	}
	if !builds(build, packages) {
		t.Errorf("%s: no RUN in the build stage builds %v, and nothing else, static into /out/", path, packages)
	}
	for i, target := range targets {
		stage := stages[1+i]
		if stage.Name != target.Name {
			t.Errorf("%s: stage %d is %q, want %s", path, 1+i, stage.Name, target.Name)
			continue
		}
		checkFinal(t, path, target, stage, "/out/"+target.Command)
	}
	// A Dockerfile beside a command's manifests would be a second, unchecked
	// way to build its image.
	found, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: every image is a stage of %s", f, path)
	}
}

// builds reports whether stage has a RUN that builds exactly pkgs into /out/
// with cgo off and -trimpath, stamping the build arguments VERSION and COMMIT
// as internal/cli reads them, so a release's image says its tag.
func builds(stage instructions.Stage, pkgs []string) bool {
	for _, c := range stage.Commands {
		run, ok := c.(*instructions.RunCommand)
		if !ok {
			continue
		}
		line := strings.Join(run.CmdLine, " ")
		i := strings.Index(line, " -o /out/ ")
		if i < 0 {
			continue
		}
		if strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, " go build ") && strings.Contains(line, " -trimpath ") &&
			strings.Contains(line, "-X "+cli.VersionSymbol+"=${VERSION}") && strings.Contains(line, "-X "+cli.CommitSymbol+"=${COMMIT}") &&
			slices.Equal(strings.Fields(line[i+len(" -o /out/ "):]), pkgs) {
			return true
		}
	}
	return false
}

func checkFinal(t *testing.T, path string, target Target, stage instructions.Stage, binary string) {
	t.Helper()
	// backup-postgres alone needs pg_dumpall, and so a postgres base.
	wantBase := "gcr.io/distroless/static-debian12:nonroot"
	if target.Name == "backup-postgres" {
		wantBase = "postgres:${PG_MAJOR}-bookworm"
	}
	if stage.BaseName != wantBase {
		t.Errorf("%s: %s's stage is FROM %s, want %s", path, target.Name, stage.BaseName, wantBase)
	}
	var user string
	var entrypoint *instructions.EntrypointCommand
	copied := false
	for _, c := range stage.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			entrypoint = c
		case *instructions.CopyCommand:
			copied = copied || (c.From == "build" && slices.Equal(c.SourcePaths, []string{binary}) && c.DestPath == BinaryDir+"/"+target.Command)
		}
	}
	if user != User && user != UserName {
		t.Errorf("%s: %s runs as %q, want %s", path, target.Name, user, User)
	}
	if entrypoint == nil || entrypoint.PrependShell || !slices.Equal(entrypoint.CmdLine, target.Entrypoint()) {
		t.Errorf("%s: %s's entrypoint is %+v, want %q in exec form", path, target.Name, entrypoint, target.Entrypoint())
	}
	if !copied {
		t.Errorf("%s: %s's stage does not copy %s from build to %s/%s", path, target.Name, binary, BinaryDir, target.Command)
	}
}
