package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	cli.Main(func(ctx context.Context) int {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
	})
}

// service is the tool as its --help tells it.
var service = cli.Service{
	Name: "images",
	Summary: wrap("images builds an OCI image per command with no container daemon and no base image: one layer "+
		"with the static binary, the CA bundle, the nonroot user (65532) and /tmp, no shell, linux/amd64, every time "+
		"at the epoch, so the same checkout gives the same digests. It writes $IMAGES_DIR/<name>.tar (podman load -i, "+
		"docker load -i) and every image in the OCI layout $IMAGES_DIR/oci (oci:<layout>:<name>). The images: "+
		strings.Join(ociimage.Names(), ", ")+".", 100) + "\n\n" + wrap(ociimage.NoPgDumpall+".", 100),
	Variables: []settings.Variable{
		{Name: "IMAGES", Default: "every image", Meaning: "the images to build, by name, separated by commas or spaces"},
		{Name: "IMAGES_DIR", Default: "bin/images", Meaning: "where the archives and the layout are written"},
		{Name: "IMAGES_CA_CERTIFICATES", Default: ociimage.CACertificates, Meaning: "the CA bundle the images carry at " + ociimage.CACertificates},
		{Name: "IMAGES_VERSION", Default: "Go's record", Meaning: "the version the binaries say and the labels carry: a release's tag"},
		{Name: "IMAGES_COMMIT", Default: "Go's record", Meaning: "the commit the binaries say and the labels carry, where the checkout has no .git"},
	},
}

// wrap breaks text into lines of at most width characters, for the help.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

// run answers its command line, or builds the images its environment
// names; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, terminal bool) int {
	return cli.NewEnv(getenv, stdout, stderr).Execute(ctx, cli.Command{Service: service,
		Run: func(ctx context.Context, env cli.Env) error { return buildImages(ctx, env, terminal) }}, args)
}

// buildImages builds the images. Progress goes to stderr where it is a
// terminal, a line a step for the person waiting; each image written is a
// line on stdout; a failure is one log line naming the cause.
func buildImages(ctx context.Context, env cli.Env, terminal bool) error {
	s := settings.New(env.Getenv)
	list := s.String("IMAGES", "")
	dir := s.String("IMAGES_DIR", "bin/images")
	ca := s.String("IMAGES_CA_CERTIFICATES", ociimage.CACertificates)
	version := s.String("IMAGES_VERSION", "")
	commit := s.String("IMAGES_COMMIT", "")
	if err := s.Err(); err != nil {
		return cli.BadSetting(err)
	}
	targets, err := ociimage.Select(list)
	if err != nil {
		return cli.BadSetting(fmt.Errorf("IMAGES: %w", err))
	}
	root, err := ociimage.ModuleRoot(ctx, "", ".")
	if err != nil {
		return cli.Failed("no module to build", err)
	}
	plan := ociimage.Plan{Targets: targets, Dir: dir, CACerts: ca, Compiler: ociimage.GoBuild{Dir: root, Version: version, Commit: commit}}
	if terminal {
		plan.Progress = func(step string) { fmt.Fprintf(env.Stderr, "images: %s\n", step) }
	}
	results, err := ociimage.Build(ctx, plan)
	if err != nil {
		return cli.Failed("build failed", errors.New(oneLine(err)))
	}
	for _, r := range results {
		fmt.Fprintf(env.Stdout, "%-16s  %s  %5.1f MiB  %s\n", r.Target.Name, r.Digest, float64(r.Size)/(1<<20), r.Archive)
	}
	return nil
}

// oneLine is err's message on one line, whatever the tool it came from wrote.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
