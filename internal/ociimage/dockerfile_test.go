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

// dockerfileOf is where a target's Dockerfile is: one per command, so
// backup's three images are three stages of one file, named for the method.
func dockerfileOf(t Target) string {
	return filepath.Join("..", "..", "deploy", t.Command, "Dockerfile")
}

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

// TestDockerfiles holds each image's Dockerfile to what make images builds:
// a golang stage that builds the target's own command static, and a final
// stage on a nonroot base that copies that binary to the same path, runs as
// 65532 and starts with the same entrypoint, in exec form.
func TestDockerfiles(t *testing.T) {
	files := map[string]bool{}
	for _, target := range Targets() {
		path := dockerfileOf(target)
		files[path] = true
		stages := stagesOf(t, path)
		if len(stages) < 2 {
			t.Errorf("%s: %d stages, want a builder and the image", path, len(stages))
			continue
		}
		build := stages[0]
		if !strings.HasPrefix(build.BaseName, "golang:") || build.Name != "build" {
			t.Errorf("%s: the first stage is %s AS %s, want golang AS build", path, build.BaseName, build.Name)
		}
		binary := "/out/" + target.Command
		if !builds(build, binary, target.Package()) {
			t.Errorf("%s: no RUN in the build stage builds %s static into %s", path, target.Package(), binary)
		}
		final := stages[len(stages)-1]
		if len(target.Args) > 0 {
			i := slices.IndexFunc(stages, func(s instructions.Stage) bool { return s.Name == target.Args[0] })
			if i < 0 {
				t.Errorf("%s: no stage %s for %s", path, target.Args[0], target.Name)
				continue
			}
			final = stages[i]
		}
		checkFinal(t, path, target, final, binary)
	}
	found, err := filepath.Glob(filepath.Join("..", "..", "deploy", "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if !files[f] {
			t.Errorf("%s builds no image make images builds", f)
		}
	}
}

// builds reports whether stage has a RUN that builds pkg into out with cgo
// off and -trimpath, stamping the build arguments VERSION and COMMIT as
// internal/cli reads them, so a release's image says its tag.
func builds(stage instructions.Stage, out, pkg string) bool {
	for _, c := range stage.Commands {
		run, ok := c.(*instructions.RunCommand)
		if !ok {
			continue
		}
		line := strings.Join(run.CmdLine, " ")
		if strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, " go build ") &&
			strings.Contains(line, " -trimpath ") && strings.Contains(line, "-o "+out+" ") && strings.HasSuffix(line, " "+pkg) &&
			strings.Contains(line, "-X "+cli.VersionSymbol+"=${VERSION}") && strings.Contains(line, "-X "+cli.CommitSymbol+"=${COMMIT}") {
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
