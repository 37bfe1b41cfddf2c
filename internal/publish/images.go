package publish

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
)

// publishImage builds t for every platform, pushes the index under the
// version's tag, writes its SBOM, and signs and attests the index.
func (p Plan) publishImage(ctx context.Context, work string, t ociimage.Target) (Image, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	out := Image{Name: t.Name}
	var binary string
	for _, platform := range p.Platforms {
		img, path, err := p.buildFor(work, t, platform)
		if err != nil {
			return Image{}, err
		}
		if binary == "" {
			binary = path
		}
		digest, err := img.Digest()
		if err != nil {
			return Image{}, fmt.Errorf("image %s: %w", t.Name, err)
		}
		size, err := compressedSize(img)
		if err != nil {
			return Image{}, fmt.Errorf("image %s: %w", t.Name, err)
		}
		out.Platforms = append(out.Platforms, PlatformImage{Platform: platform, Digest: digest, Size: size})
		platform := platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	tag, err := name.NewTag(p.repository(t.Name)+":"+p.Version, p.nameOptions()...)
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", t.Name, err)
	}
	p.say("pushing " + tag.String())
	if err := remote.WriteIndex(tag, idx, p.remote(ctx)...); err != nil {
		return Image{}, fmt.Errorf("push %s: %w", tag, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", t.Name, err)
	}
	out.Tagged, out.Ref = tag, tag.Context().Digest(digest.String())
	sbom, err := SBOM(binary, SBOMSubject{Name: t.Name, Version: p.Version, Ref: out.Ref, Platforms: p.Platforms}, p.now())
	if err != nil {
		return Image{}, err
	}
	if out.SBOM, err = writeFile(filepath.Join(p.Dir, "sbom", t.Name+".spdx.json"), sbom); err != nil {
		return Image{}, err
	}
	if p.Signer != nil {
		p.say("signing " + out.Ref.String())
		if err := p.Signer.Sign(ctx, out.Ref); err != nil {
			return Image{}, fmt.Errorf("sign %s: %w", out.Ref, err)
		}
		if err := p.Signer.Attest(ctx, out.Ref, PredicateSPDX, sbom); err != nil {
			return Image{}, fmt.Errorf("attest the SBOM of %s: %w", out.Ref, err)
		}
	}
	return out, nil
}

// buildAll builds every command the targets need for every platform into
// work/<arch>/<command>, as many at once as the machine has cores: go
// build's compile is parallel within itself, its link is not, and a
// release links a binary per command and platform.
func (p Plan) buildAll(ctx context.Context, work string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	seen := map[string]bool{}
	for _, t := range p.Targets {
		for _, platform := range p.Platforms {
			path := binaryPath(work, t, platform)
			if seen[path] {
				continue // backup's three images share one binary
			}
			seen[path] = true
			var compiler ociimage.Compiler = ociimage.GoBuild{Dir: p.Root, Version: p.Version, Commit: p.Commit, Architecture: platform.Architecture}
			if p.Compiler != nil {
				compiler = p.Compiler(platform.Architecture)
			}
			pkg := t.Package()
			p.say(fmt.Sprintf("building %s for %s/%s", t.Command, platform.OS, platform.Architecture))
			g.Go(func() error {
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					return err
				}
				return compiler.Build(ctx, pkg, path)
			})
		}
	}
	return g.Wait()
}

func binaryPath(work string, t ociimage.Target, platform v1.Platform) string {
	return filepath.Join(work, platform.OS+"-"+platform.Architecture, t.Command)
}

// buildFor makes t's image for platform from the binary buildAll built,
// as make images does for the machine's own: the same layer, labels and
// epoch.
func (p Plan) buildFor(work string, t ociimage.Target, platform v1.Platform) (v1.Image, string, error) {
	path := binaryPath(work, t, platform)
	layer, stamp, err := ociimage.LayerOf(t.Command, path, p.CACerts, cli.Stamp{Version: p.Version, Commit: p.Commit})
	if err != nil {
		return nil, "", err
	}
	img, err := ociimage.ImageFor(platform, t, layer, stamp)
	return img, path, err
}

// compressedSize is the bytes a node pulls for img: its layers as stored.
func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
