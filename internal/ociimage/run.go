package ociimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
)

// Plan is one build: which images, from what, into where.
type Plan struct {
	Targets  []Target
	Dir      string   // the archives go to <Dir>/<name>.tar, the layout to <Dir>/oci
	CACerts  string   // the CA bundle on this machine the images carry
	Compiler Compiler // GoBuild, where it is not a test
	// Progress is told each step as it starts, in a few words; nil is quiet.
	Progress func(step string)
}

// Result is one image written.
type Result struct {
	Target  Target
	Digest  v1.Hash // the image's manifest digest, the same in the layout
	Stamp   Stamp
	Layer   int64  // the compressed layer's bytes
	Size    int64  // the archive's bytes
	Archive string // its path
}

// LayoutDir is the OCI layout's folder under a plan's Dir.
func LayoutDir(dir string) string { return filepath.Join(dir, "oci") }

// Build builds every binary the plan's targets need once, then each image,
// its archive and the layout of them all.
func Build(ctx context.Context, p Plan) ([]Result, error) {
	say := p.Progress
	if say == nil {
		say = func(string) {}
	}
	ca, err := os.ReadFile(p.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read the CA bundle: %w", err)
	}
	//nolint:gosec // like bin/, a folder anyone on the machine may load images from
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the output folder: %w", err)
	}
	work, err := os.MkdirTemp("", "images-")
	if err != nil {
		return nil, fmt.Errorf("make a work folder: %w", err)
	}
	defer os.RemoveAll(work)

	binaries := map[string]built{}
	var results []Result
	var named []Named
	for _, t := range p.Targets {
		b, ok := binaries[t.Command]
		if !ok {
			say("building " + t.Package())
			out := filepath.Join(work, t.Command)
			if err := p.Compiler.Build(ctx, t.Package(), out); err != nil {
				return nil, err
			}
			var stamped cli.Stamp
			if s, ok := p.Compiler.(Stamper); ok {
				stamped = s.Stamped()
			}
			layer, stamp, err := LayerOf(t.Command, out, ca, stamped)
			if err != nil {
				return nil, err
			}
			b = built{layer: layer, stamp: stamp}
			binaries[t.Command] = b
		}
		r, img, err := write(p.Dir, t, b, say)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		named = append(named, Named{Name: t.Name, Image: img})
	}
	say("writing the OCI layout " + LayoutDir(p.Dir))
	if err := WriteLayout(LayoutDir(p.Dir), named); err != nil {
		return nil, err
	}
	return results, nil
}

// built is a binary made into its layer, shared by the targets of its command.
type built struct {
	layer v1.Layer
	stamp Stamp
}

// LayerOf reads the binary of command just built at path and makes its
// layer, with the version and commit it says.
func LayerOf(command, path string, ca []byte, stamped cli.Stamp) (v1.Layer, Stamp, error) {
	stamp, err := StampOf(path, stamped)
	if err != nil {
		return nil, Stamp{}, err
	}
	program, err := os.ReadFile(path) //nolint:gosec // the binary a build just wrote into its own work folder
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("read the binary of %s: %w", command, err)
	}
	layer, err := Root{Binary: command, Program: program, CACerts: ca}.Layer()
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("%s: %w", command, err)
	}
	return layer, stamp, nil
}

// write makes target's image and writes its archive into dir.
func write(dir string, t Target, b built, say func(string)) (Result, v1.Image, error) {
	img, err := Image(t, b.layer, b.stamp)
	if err != nil {
		return Result{}, nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Result{}, nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	layerSize, err := b.layer.Size()
	if err != nil {
		return Result{}, nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	ref, err := Reference(t)
	if err != nil {
		return Result{}, nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	path := filepath.Join(dir, t.Name+".tar")
	say("writing " + path)
	if err := WriteArchive(path, ref, img); err != nil {
		return Result{}, nil, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return Result{}, nil, fmt.Errorf("image %s: %w", t.Name, err)
	}
	return Result{Target: t, Digest: digest, Stamp: b.stamp, Layer: layerSize, Size: info.Size(), Archive: path}, img, nil
}
