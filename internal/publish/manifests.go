package publish

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/api/filters/imagetag"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
)

// UnpinnedRepository is how deploy/ names every image: the name a
// release replaces with its own registry's, pinned by digest.
const UnpinnedRepository = "ghcr.io/jorisjonkers-dev/delivery/"

// The artifact's folders: the base a Flux Kustomization's path names
// (./), the ServiceMonitors (./monitoring) and the jobs' templates
// (./templates), each with every image pinned.
var (
	templateFolders = []string{"vault-policy", "postgres-catalog", "garage-catalog", "backup"}
	otherFolders    = []string{"monitoring"}
)

// publishManifests lays out deploy/ as the release's artifact, with every
// image pinned to the digest just pushed, checks that the base builds and
// names no image unpinned, then pushes it under the version's tag and signs
// it.
func (p Plan) publishManifests(ctx context.Context, work string, images []Image) (Artifact, error) {
	dir := filepath.Join(work, "manifests")
	p.say("laying out the manifests")
	if err := LayOutManifests(filepath.Join(p.Root, "deploy"), dir, images); err != nil {
		return Artifact{}, err
	}
	if err := CheckPinned(dir, images); err != nil {
		return Artifact{}, err
	}
	tag, err := name.NewTag(p.repository(ManifestsRepository)+":"+p.Version, p.nameOptions()...)
	if err != nil {
		return Artifact{}, err
	}
	p.say("pushing " + tag.String())
	craneOpts := []crane.Option{crane.WithContext(ctx)}
	if p.Insecure {
		craneOpts = append(craneOpts, crane.Insecure)
	}
	if len(p.Remote) > 0 {
		craneOpts = append(craneOpts, func(o *crane.Options) { o.Remote = append(o.Remote, p.Remote...) })
	} else {
		craneOpts = append(craneOpts, crane.WithAuthFromKeychain(defaultKeychain))
	}
	revision := p.Version
	if p.Commit != "" {
		revision += "@sha1:" + p.Commit
	}
	pushed, err := oci.NewClient(craneOpts).Push(ctx, tag.String(), dir, oci.WithPushMetadata(oci.Metadata{
		Source: ociimage.Source, Revision: revision, Created: p.now().UTC().Format("2006-01-02T15:04:05Z"),
	}))
	if err != nil {
		return Artifact{}, fmt.Errorf("push %s: %w", tag, err)
	}
	ref, err := name.NewDigest(pushed, p.nameOptions()...)
	if err != nil {
		return Artifact{}, fmt.Errorf("push %s: %w", tag, err)
	}
	if p.Signer != nil {
		p.say("signing " + ref.String())
		if err := p.Signer.Sign(ctx, ref); err != nil {
			return Artifact{}, fmt.Errorf("sign %s: %w", ref, err)
		}
	}
	return Artifact{Ref: ref, Tagged: tag}, nil
}

// LayOutManifests copies the base deploy/kustomization.yaml lists into
// dir, with the ServiceMonitors and the jobs' templates beside it, every
// YAML file as it is but for its images, which are pinned to images'
// digests. Only YAML goes: no Dockerfile, no test.
func LayOutManifests(deploy, dir string, images []Image) error {
	base, err := baseFolders(deploy)
	if err != nil {
		return err
	}
	if err := copyYAML(filepath.Join(deploy, "kustomization.yaml"), filepath.Join(dir, "kustomization.yaml")); err != nil {
		return err
	}
	for _, folder := range base {
		if err := copyFolder(filepath.Join(deploy, folder), filepath.Join(dir, folder)); err != nil {
			return err
		}
	}
	for _, folder := range otherFolders {
		if err := copyFolder(filepath.Join(deploy, folder), filepath.Join(dir, folder)); err != nil {
			return err
		}
	}
	for _, folder := range templateFolders {
		if err := copyFolder(filepath.Join(deploy, folder), filepath.Join(dir, "templates", folder)); err != nil {
			return err
		}
	}
	return pin(dir, images)
}

// baseFolders are the folders deploy/kustomization.yaml's resources name.
func baseFolders(deploy string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(deploy, "kustomization.yaml")) //nolint:gosec // the module's own deploy/
	if err != nil {
		return nil, fmt.Errorf("read the base: %w", err)
	}
	var k types.Kustomization
	if err := k.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("read the base: %w", err)
	}
	for _, r := range k.Resources {
		if strings.Contains(r, "..") || filepath.IsAbs(r) {
			return nil, fmt.Errorf("the base names %q, outside deploy/", r)
		}
	}
	return k.Resources, nil
}

// pin rewrites every container image under dir that names one of images
// to that image's digest in the release's registry, with kustomize's own
// image filter over kyaml, which keeps every file's comments.
func pin(dir string, images []Image) error {
	var filters []kio.Filter
	for _, img := range images {
		filters = append(filters, imagetag.LegacyFilter{ImageTag: types.Image{
			Name: UnpinnedRepository + img.Name, NewName: img.Ref.Context().Name(), Digest: img.Ref.DigestStr(),
		}})
	}
	rw := &kio.LocalPackageReadWriter{PackagePath: dir, MatchFilesGlob: []string{"*.yaml"}, PreserveSeqIndent: true}
	if err := (kio.Pipeline{Inputs: []kio.Reader{rw}, Filters: filters, Outputs: []kio.Writer{rw}}).Execute(); err != nil {
		return fmt.Errorf("pin the images: %w", err)
	}
	return nil
}

// CheckPinned builds the artifact's base as Flux will and reads every
// file, and fails on any container image that is not one of images by
// digest: a release must not let a node pull by tag.
func CheckPinned(dir string, images []Image) error {
	pinned := make([]string, len(images))
	for i, img := range images {
		pinned[i] = img.Ref.String()
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	if _, err := k.Run(filesys.MakeFsOnDisk(), dir); err != nil {
		return fmt.Errorf("the manifests do not build: %w", err)
	}
	var bad []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		nodes, err := (&kio.LocalPackageReader{PackagePath: path}).Read()
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		for _, n := range nodes {
			for _, image := range containerImages(n.YNode()) {
				if !slices.Contains(pinned, image) {
					rel, _ := filepath.Rel(dir, path)
					bad = append(bad, rel+": "+image)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("images not pinned to this release's digests: %s", strings.Join(bad, ", "))
	}
	return nil
}
