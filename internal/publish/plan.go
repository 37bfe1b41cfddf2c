package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
)

// ManifestsRepository is the repository, under the registry, of the
// manifests' artifact a Flux OCIRepository points at.
const ManifestsRepository = "manifests"

// Plan is one release: what is built, for which platforms, where it goes
// and who signs it.
type Plan struct {
	Version  string // the release's tag, vMAJOR.MINOR.PATCH[-pre]
	Commit   string // the commit it is built from; "" leaves Go's record
	Registry string // host[:port][/path] every repository goes under
	// Insecure speaks plain HTTP to the registry: a loopback registry in a
	// test or on a workstation, never a release's.
	Insecure  bool
	Root      string // the module's folder: cmd/ is built, deploy/ published
	Dir       string // where the digests file and the SBOMs are written
	Targets   []ociimage.Target
	Platforms []v1.Platform
	CACerts   []byte // the CA bundle every image carries
	// Signer signs every image and the artifact and attests the SBOMs;
	// nil publishes them unsigned, for a workflow that signs keyless after.
	Signer Signer
	// Now is the SBOMs' creation time; nil is time.Now.
	Now func() time.Time
	// Progress is told each step as it starts, in a few words; nil is quiet.
	Progress func(step string)
	// Compiler builds for one architecture; nil is go build
	// (ociimage.GoBuild) with the plan's version and commit stamped.
	Compiler func(arch string) ociimage.Compiler
	// Remote are go-containerregistry's options for every request (auth,
	// transport); the default keychain where empty.
	Remote []remote.Option
}

// Published is what a release wrote.
type Published struct {
	Version   string
	Images    []Image
	Manifests Artifact
	// Digests is the file naming every image and the artifact by digest.
	Digests string
}

// Image is one image's index as pushed.
type Image struct {
	Name   string
	Ref    name.Digest // <registry>/<name>@sha256:...: its index
	Tagged name.Tag    // <registry>/<name>:<version>
	// Platforms are the index's images, one per platform, in Plan's order.
	Platforms []PlatformImage
	SBOM      string // the SBOM's file under the plan's Dir
}

// PlatformImage is one platform's image of an index.
type PlatformImage struct {
	Platform v1.Platform
	Digest   v1.Hash
	Size     int64 // the compressed layer's bytes: what a node pulls
}

// Artifact is the manifests' artifact as pushed.
type Artifact struct {
	Ref    name.Digest
	Tagged name.Tag
}

// version is a release's tag as Flux's and Go's tooling read one.
var version = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// Check says what is wrong with the plan, before anything is built.
func (p Plan) Check() error {
	var errs []error
	if !version.MatchString(p.Version) {
		errs = append(errs, fmt.Errorf("VERSION %q is not a release tag (vMAJOR.MINOR.PATCH, as v1.2.0)", p.Version))
	}
	if p.Registry == "" {
		errs = append(errs, errors.New("REGISTRY is empty: name where the release goes, as ghcr.io/org/delivery"))
	} else if _, err := name.NewRepository(p.Registry+"/"+ManifestsRepository, p.nameOptions()...); err != nil {
		errs = append(errs, fmt.Errorf("REGISTRY %q: %w", p.Registry, err))
	}
	if len(p.Targets) == 0 {
		errs = append(errs, errors.New("no image to build"))
	}
	if len(p.Platforms) == 0 {
		errs = append(errs, errors.New("no platform to build for"))
	}
	return errors.Join(errs...)
}

func (p Plan) nameOptions() []name.Option {
	opts := []name.Option{name.StrictValidation}
	if p.Insecure {
		opts = append(opts, name.Insecure)
	}
	return opts
}

func (p Plan) say(step string) {
	if p.Progress != nil {
		p.Progress(step)
	}
}

func (p Plan) remote(ctx context.Context) []remote.Option {
	opts := append([]remote.Option{remote.WithContext(ctx)}, p.Remote...)
	if len(p.Remote) == 0 {
		opts = append(opts, remote.WithAuthFromKeychain(defaultKeychain))
	}
	return opts
}

// Publish builds, pushes and signs every image, then the manifests'
// artifact pinning them, then writes the digests file. The artifact goes
// last, so every image it names is pushed and signed before any Flux can
// read it; a Flux that reads it in the moment before its own signature
// lands refuses it and looks again at its next interval.
func Publish(ctx context.Context, p Plan) (Published, error) {
	if err := p.Check(); err != nil {
		return Published{}, err
	}
	//nolint:gosec // a build's output folder, as bin/ is
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return Published{}, fmt.Errorf("make %s: %w", p.Dir, err)
	}
	work, err := os.MkdirTemp("", "release-")
	if err != nil {
		return Published{}, fmt.Errorf("make a work folder: %w", err)
	}
	defer os.RemoveAll(work)
	out := Published{Version: p.Version}
	if err := p.buildAll(ctx, work); err != nil {
		return Published{}, err
	}
	for _, t := range p.Targets {
		img, err := p.publishImage(ctx, work, t)
		if err != nil {
			return Published{}, err
		}
		out.Images = append(out.Images, img)
	}
	if out.Manifests, err = p.publishManifests(ctx, work, out.Images); err != nil {
		return Published{}, err
	}
	p.say("writing the digests")
	if out.Digests, err = writeDigests(filepath.Join(p.Dir, "digests.txt"), out); err != nil {
		return Published{}, err
	}
	return out, nil
}

// Steps is how many steps Publish tells Progress of: a build per command
// and platform, a push and a signature per image, then the artifact's
// layout, push and signature and the digests.
func Steps(p Plan) int {
	commands := map[string]bool{}
	for _, t := range p.Targets {
		commands[t.Command] = true
	}
	signing := 0
	if p.Signer != nil {
		signing = 1
	}
	return len(commands)*len(p.Platforms) + len(p.Targets)*(1+signing) + 3 + signing
}

// repository is name's repository under the plan's registry.
func (p Plan) repository(name string) string {
	return strings.TrimSuffix(p.Registry, "/") + "/" + name
}
