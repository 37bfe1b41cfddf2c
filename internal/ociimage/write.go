package ociimage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Repository is the name an archive's image loads under (podman load names
// it <Repository><target>:latest): localhost is where podman keeps images it
// built or loaded rather than pulled.
const Repository = "localhost/delivery/"

// RefName is the annotation that names an image in the layout, the name
// after the layout's path in oci:<path>:<name>.
const RefName = "org.opencontainers.image.ref.name"

// Reference is the tag target's archive carries.
func Reference(t Target) (name.Tag, error) {
	return name.NewTag(Repository+t.Name+":latest", name.StrictValidation)
}

// WriteArchive writes img as a docker-archive tarball (what podman load -i
// and docker load read) at path, under a temporary name first, so a build
// that fails leaves the archive before it whole.
func WriteArchive(path string, ref name.Tag, img v1.Image) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tarball.Write(ref, img, tmp); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Named is an image and the name the layout gives it.
type Named struct {
	Name  string
	Image v1.Image
}

// WriteLayout writes images as one OCI image layout at dir, each named by its
// RefName annotation, replacing what dir held: the layout is this build's
// images and no other. Images sharing a layer share its blob.
func WriteLayout(dir string, images []Named) error {
	tmp := dir + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	for _, n := range images {
		err := p.AppendImage(n.Image, layout.WithAnnotations(map[string]string{RefName: n.Name}), layout.WithPlatform(Platform))
		if err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("write %s into the layout: %w", n.Name, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	// layout.Write makes its two files executable; they are documents.
	for _, f := range []string{"index.json", "oci-layout"} {
		//nolint:gosec // readable by anyone, as the archives beside them are
		if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
			return fmt.Errorf("write the layout: %w", err)
		}
	}
	return nil
}
