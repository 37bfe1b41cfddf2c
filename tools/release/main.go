// Command release publishes a release of delivery: every image for
// linux/amd64 and linux/arm64 as one index, signed with cosign and with a
// signed SPDX SBOM, and the manifests as a Flux OCI artifact pinning every
// image by digest, signed too. make release runs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/publish"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// service is the tool as its --help tells it.
var service = cli.Service{
	Name: "release",
	Summary: "release publishes a release of delivery to REGISTRY: every image (" + strings.Join(ociimage.Names(), ", ") + ")\n" +
		"for linux/amd64 and linux/arm64 as one index tagged VERSION, each signed with cosign and with its SPDX SBOM\n" +
		"attested; then the manifests (deploy/'s base, its ServiceMonitors and the jobs' templates) as a Flux OCI\n" +
		"artifact, <REGISTRY>/manifests:VERSION, every image in it pinned by digest, signed the same way. It writes\n" +
		"the digests, the SBOMs and the public key under RELEASE_DIR. Registry credentials are docker's config\n" +
		"(a registry login). Exit 2 on a bad setting, 1 when a build, a push or a signature fails.",
	Variables: []settings.Variable{
		{Name: "VERSION", Default: "none, required", Meaning: "the release's tag, vMAJOR.MINOR.PATCH[-pre]: the images' tag and what the binaries say"},
		{Name: "REGISTRY", Default: "none, required", Meaning: "where the release goes: <REGISTRY>/<image> and <REGISTRY>/manifests"},
		{Name: "RELEASE_SIGNING", Default: "key", Meaning: "key: sign with COSIGN_KEY; none: leave signing to cosign sign over the digests (keyless, in the release workflow)"},
		{Name: "COSIGN_KEY", Default: "none", Meaning: "the cosign private key file (cosign generate-key-pair's cosign.key), with RELEASE_SIGNING=key"},
		{Name: "COSIGN_PASSWORD", Default: "empty", Meaning: "the password the key is sealed with, as cosign reads it"},
		{Name: "RELEASE_DIR", Default: "bin/release", Meaning: "where digests.txt, sbom/<image>.spdx.json and cosign.pub are written"},
		{Name: "RELEASE_COMMIT", Default: "Go's record", Meaning: "the commit the binaries say and the artifact's revision names"},
		{Name: "RELEASE_INSECURE", Default: "false", Meaning: "speak plain HTTP to REGISTRY: a loopback registry only"},
		{Name: "SOURCE_DATE_EPOCH", Default: "now", Meaning: "the SBOMs' and the artifact's creation time, seconds since 1970 (make passes the commit's), so a release is made again byte for byte"},
		{Name: "IMAGES_CA_CERTIFICATES", Default: ociimage.CACertificates, Meaning: "the CA bundle the images carry"},
	},
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return cli.NewEnv(getenv, stdout, stderr).Execute(ctx, cli.Command{Service: service, Run: release}, args)
}

// release reads its settings, then builds, pushes and signs; one line on
// stdout for each thing published.
func release(ctx context.Context, env cli.Env) error {
	s := settings.New(env.Getenv)
	plan := publish.Plan{
		Version:   s.String("VERSION", ""),
		Registry:  s.String("REGISTRY", ""),
		Commit:    s.String("RELEASE_COMMIT", ""),
		Dir:       s.String("RELEASE_DIR", "bin/release"),
		Targets:   ociimage.Targets(),
		Platforms: ociimage.ReleasePlatforms,
	}
	signing := s.String("RELEASE_SIGNING", "key")
	keyFile := s.String("COSIGN_KEY", "")
	ca := s.String("IMAGES_CA_CERTIFICATES", ociimage.CACertificates)
	insecure := s.String("RELEASE_INSECURE", "false")
	epoch := s.String("SOURCE_DATE_EPOCH", "")
	if err := s.Err(); err != nil {
		return cli.BadSetting(err)
	}
	if epoch != "" {
		seconds, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || seconds < 0 {
			return cli.BadSetting(fmt.Errorf("SOURCE_DATE_EPOCH %q is no count of seconds since 1970", epoch))
		}
		created := time.Unix(seconds, 0).UTC()
		plan.Now = func() time.Time { return created }
	}
	var err error
	if plan.Insecure, err = strconv.ParseBool(insecure); err != nil {
		return cli.BadSetting(fmt.Errorf("RELEASE_INSECURE %q is neither true nor false", insecure))
	}
	if err := plan.Check(); err != nil {
		return cli.BadSetting(err)
	}
	var signer *publish.KeySigner
	switch signing {
	case "key":
		if keyFile == "" {
			return cli.BadSetting(errors.New("COSIGN_KEY is empty: name the cosign key to sign with, or set RELEASE_SIGNING=none to sign keyless after"))
		}
		key, err := os.ReadFile(keyFile) //nolint:gosec // the key file its operator names
		if err != nil {
			return cli.BadSetting(fmt.Errorf("COSIGN_KEY: %w", err))
		}
		if signer, err = publish.NewKeySigner(key, []byte(env.Getenv("COSIGN_PASSWORD"))); err != nil {
			return cli.BadSetting(fmt.Errorf("COSIGN_KEY: %w", err))
		}
		plan.Signer = signer
	case "none":
	default:
		return cli.BadSetting(fmt.Errorf("RELEASE_SIGNING %q is neither key nor none", signing))
	}
	if plan.CACerts, err = os.ReadFile(ca); err != nil { //nolint:gosec // the CA bundle its operator names
		return cli.BadSetting(fmt.Errorf("IMAGES_CA_CERTIFICATES: %w", err))
	}
	if plan.Root, err = ociimage.ModuleRoot(ctx, "", "."); err != nil {
		return cli.Failed("release failed", err)
	}
	plan.Progress = progress(env, publish.Steps(plan))
	out, err := publish.Publish(ctx, plan)
	if err != nil {
		return cli.Failed("release failed", err, slog.String("version", plan.Version))
	}
	if signer != nil {
		pub, err := signer.PublicKey()
		if err != nil {
			return cli.Failed("release failed", err)
		}
		if err := os.WriteFile(filepath.Join(plan.Dir, "cosign.pub"), pub, 0o644); err != nil { //nolint:gosec // a public key
			return cli.Failed("release failed", err)
		}
	}
	for _, img := range out.Images {
		var sizes []string
		for _, p := range img.Platforms {
			sizes = append(sizes, fmt.Sprintf("%s %.1f MiB", p.Platform.Architecture, float64(p.Size)/(1<<20)))
		}
		fmt.Fprintf(env.Stdout, "%-16s  %s  %s\n", img.Name, img.Ref, strings.Join(sizes, ", "))
	}
	fmt.Fprintf(env.Stdout, "%-16s  %s\n", "manifests", out.Manifests.Ref)
	fmt.Fprintf(env.Stdout, "%-16s  %s\n", "digests", out.Digests)
	return nil
}

// progress is a bar on a terminal and a log line a step elsewhere (a
// workflow's log).
func progress(env cli.Env, steps int) func(string) {
	if !cli.IsTerminal(env.Stderr) {
		return func(step string) { env.Log.Info("release", slog.String("step", step)) }
	}
	bar := progressbar.NewOptions(steps, progressbar.OptionSetWriter(env.Stderr), progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(), progressbar.OptionFullWidth())
	return func(step string) {
		bar.Describe(step)
		_ = bar.Add(1)
	}
}
