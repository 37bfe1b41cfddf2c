package ociimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// copyCompiler stands in for go build: it copies a binary built once, and
// counts the packages it was asked for.
type copyCompiler struct {
	binary string
	built  []string
	fail   error
}

func (c *copyCompiler) Build(_ context.Context, pkg, out string) error {
	c.built = append(c.built, pkg)
	if c.fail != nil {
		return c.fail
	}
	data, err := os.ReadFile(c.binary)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o755)
}

func caBundle(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func buildInto(t *testing.T, dir, ca string, names string) ([]Result, *copyCompiler) {
	t.Helper()
	targets, err := Select(names)
	if err != nil {
		t.Fatal(err)
	}
	c := &copyCompiler{binary: helloBinary(t)}
	var steps []string
	results, err := Build(context.Background(), Plan{Targets: targets, Dir: dir, CACerts: ca, Compiler: c,
		Progress: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Error("no progress was told")
	}
	return results, c
}

// TestBuildWritesArchivesAndTheLayout: one binary per command (backup's three
// images share it, and its layer), an archive per image that reads back as
// that image, and a layout naming each image by its digest.
func TestBuildWritesArchivesAndTheLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	ca := caBundle(t, "bundle one")
	results, c := buildInto(t, dir, ca, "backup-files,backup-postgres,vault-policy,backup-rabbitmq")
	if !slices.Equal(c.built, []string{"./cmd/vault-policy", "./cmd/backup"}) {
		t.Errorf("built %v", c.built)
	}
	if len(results) != 4 {
		t.Fatalf("results %+v", results)
	}
	index, err := layout.ImageIndexFromPath(LayoutDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(results) {
		t.Fatalf("the layout holds %d images", len(im.Manifests))
	}
	layers := map[string]v1.Hash{}
	for i, r := range results {
		desc := im.Manifests[i]
		if desc.Digest != r.Digest || desc.Annotations[RefName] != r.Target.Name ||
			desc.Platform == nil || desc.Platform.Architecture != "amd64" {
			t.Errorf("layout entry %d: %+v, want %s at %s", i, desc, r.Target.Name, r.Digest)
		}
		if r.Archive != filepath.Join(dir, r.Target.Name+".tar") || r.Size <= r.Layer || r.Layer == 0 {
			t.Errorf("%s: archive %s of %d bytes, layer %d", r.Target.Name, r.Archive, r.Size, r.Layer)
		}
		tag, err := name.NewTag(Repository + r.Target.Name + ":latest")
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.ImageFromPath(r.Archive, &tag)
		if err != nil {
			t.Fatal(err)
		}
		fromLayout, err := index.Image(r.Digest)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := loaded.ConfigName()
		b, _ := fromLayout.ConfigName()
		if a != b {
			t.Errorf("%s: the archive's config %s, the layout's %s", r.Target.Name, a, b)
		}
		ls, err := fromLayout.Layers()
		if err != nil || len(ls) != 1 {
			t.Fatalf("%s: layers %v %v", r.Target.Name, ls, err)
		}
		layers[r.Target.Name], _ = ls[0].Digest()
	}
	if layers["backup-files"] != layers["backup-postgres"] || layers["backup-files"] != layers["backup-rabbitmq"] ||
		layers["backup-files"] == layers["vault-policy"] {
		t.Errorf("layers %v: backup's three images should share one", layers)
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		if info, err := os.Stat(filepath.Join(LayoutDir(dir), f)); err != nil || info.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v", f, info.Mode(), err)
		}
	}
}

// TestBuildIsReproducible builds twice from the same binary and bundle: the
// same digests and byte for byte the same archives. A changed bundle changes
// every digest.
func TestBuildIsReproducible(t *testing.T) {
	ca := caBundle(t, "bundle one")
	first, _ := buildInto(t, t.TempDir(), ca, "collector,backup-files")
	second, _ := buildInto(t, t.TempDir(), ca, "collector,backup-files")
	other, _ := buildInto(t, t.TempDir(), caBundle(t, "bundle two"), "collector,backup-files")
	for i := range first {
		if first[i].Digest != second[i].Digest {
			t.Errorf("%s: %s then %s", first[i].Target.Name, first[i].Digest, second[i].Digest)
		}
		a, err := os.ReadFile(first[i].Archive)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(second[i].Archive)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the archives differ", first[i].Target.Name)
		}
		if other[i].Digest == first[i].Digest {
			t.Errorf("%s: another CA bundle gave the same digest", first[i].Target.Name)
		}
	}
}

// TestBuildReplacesTheLayout: the layout holds this build's images only.
func TestBuildReplacesTheLayout(t *testing.T) {
	dir := t.TempDir()
	ca := caBundle(t, "bundle")
	buildInto(t, dir, ca, "collector,reporter")
	buildInto(t, dir, ca, "reporter")
	index, err := layout.ImageIndexFromPath(LayoutDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[RefName] != "reporter" {
		t.Errorf("the layout holds %+v", im.Manifests)
	}
	if _, err := os.Stat(LayoutDir(dir) + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the partial layout was left: %v", err)
	}
}

func TestBuildFailures(t *testing.T) {
	ca := caBundle(t, "bundle")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	noGo := filepath.Join(t.TempDir(), "not-go")
	if err := os.WriteFile(noGo, []byte("not a Go binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what     string
		dir, ca  string
		compiler *copyCompiler
		want     string
	}{
		{"no CA bundle", t.TempDir(), filepath.Join(t.TempDir(), "none"), &copyCompiler{binary: helloBinary(t)}, "read the CA bundle"},
		{"an output folder that is a file", filepath.Join(file, "images"), ca, &copyCompiler{binary: helloBinary(t)}, "make the output folder"},
		{"a failed build", t.TempDir(), ca, &copyCompiler{fail: errors.New("go build ./cmd/collector: it broke")}, "it broke"},
		{"a binary that is not Go's", t.TempDir(), ca, &copyCompiler{binary: noGo}, "read the build of collector"},
	} {
		targets, _ := Select("collector")
		_, err := Build(context.Background(), Plan{Targets: targets, Dir: c.dir, CACerts: c.ca, Compiler: c.compiler})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.what, err, c.want)
		}
	}
}

func TestWriteArchiveLeavesNothingWhenItFails(t *testing.T) {
	dir := t.TempDir()
	tag, err := name.NewTag(Repository + "collector:latest")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(filepath.Join(dir, "missing", "collector.tar"), tag, sampleImage(t, collector, sample, stamp)); err == nil {
		t.Error("an archive was written into a folder that is not there")
	}
	// A folder in the archive's place: the rename fails, and the partial
	// file goes.
	if err := os.Mkdir(filepath.Join(dir, "collector.tar"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "collector.tar", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(filepath.Join(dir, "collector.tar"), tag, sampleImage(t, collector, sample, stamp)); err == nil {
		t.Error("an archive was written over a folder")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("left %v %v", entries, err)
	}
}
