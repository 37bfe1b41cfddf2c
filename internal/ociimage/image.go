package ociimage

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Source is the repository every image's org.opencontainers.image.source
// label names.
const Source = "https://github.com/JorisJonkers-dev/delivery"

// Platform is the platform make images builds for, the machine's own.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// ReleasePlatforms are the platforms a release publishes each image for,
// one index each: the two a platform team's nodes run.
var ReleasePlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Stamp is the version and commit a binary was built from, as Go recorded
// them in it and as its --version prints them.
type Stamp struct {
	Version  string
	Revision string
}

// The labels every image carries.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
)

// Env is every image's environment: a PATH for the binary's own lookups (a
// method's program) and the CA bundle Go's TLS reads.
var Env = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"SSL_CERT_FILE=" + CACertificates,
}

// Image is target's image: layer as its only layer, OCI media types, the
// binary as entrypoint under the nonroot user, and every time at the epoch,
// so the digest depends on the target, the layer and the stamp alone.
func Image(t Target, layer v1.Layer, s Stamp) (v1.Image, error) {
	return ImageFor(Platform, t, layer, s)
}

// ImageFor is Image for platform p, whose binary layer holds.
func ImageFor(p v1.Platform, t Target, layer v1.Layer, s Stamp) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: Epoch},
			CreatedBy: "tools/images: " + t.Package(),
			Comment:   "the static binary, the CA bundle, the nonroot user and /tmp",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = v1.Time{Time: Epoch}
	cf.Config = v1.Config{
		Entrypoint: t.Entrypoint(),
		User:       User,
		Env:        append([]string(nil), Env...),
		WorkingDir: "/",
		Labels: map[string]string{
			LabelSource:      Source,
			LabelVersion:     s.Version,
			LabelRevision:    s.Revision,
			LabelTitle:       t.Name,
			LabelDescription: t.Description,
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	return img, nil
}
