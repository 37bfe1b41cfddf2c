package ociimage

import (
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func sampleImage(t *testing.T, target Target, root Root, stamp Stamp) v1.Image {
	t.Helper()
	layer, err := root.Layer()
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image(target, layer, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var (
	collector = Target{Name: "collector", Command: "collector", Description: "the Collector"}
	stamp     = Stamp{Version: "v1.4.0", Revision: "5c66207e5c66207e5c66207e5c66207e5c66207e"}
)

func TestImageConfig(t *testing.T) {
	img := sampleImage(t, collector, sample, stamp)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(Epoch) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/collector"}) || len(c.Cmd) != 0 || c.User != "65532:65532" {
		t.Errorf("entrypoint %q cmd %q user %q", c.Entrypoint, c.Cmd, c.User)
	}
	if !slices.Contains(c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
		t.Errorf("env %q", c.Env)
	}
	for label, want := range map[string]string{
		"org.opencontainers.image.source":      "https://github.com/JorisJonkers-dev/delivery",
		"org.opencontainers.image.version":     "v1.4.0",
		"org.opencontainers.image.revision":    "5c66207e5c66207e5c66207e5c66207e5c66207e",
		"org.opencontainers.image.title":       "collector",
		"org.opencontainers.image.description": "the Collector",
	} {
		if got := c.Labels[label]; got != want {
			t.Errorf("label %s = %q, want %q", label, got, want)
		}
	}
	if len(cf.History) != 1 || !cf.History[0].Created.Equal(Epoch) || len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("history %+v rootfs %+v", cf.History, cf.RootFS)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("media types: manifest %s config %s layers %+v", m.MediaType, m.Config.MediaType, m.Layers)
	}
}

// TestDigestDependsOnTheInputsAlone: the same target, root and stamp give the
// same digest, whenever and wherever they are built; each input changed
// gives another.
func TestDigestDependsOnTheInputsAlone(t *testing.T) {
	digest := func(target Target, root Root, s Stamp) v1.Hash {
		d, err := sampleImage(t, target, root, s).Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(collector, sample, stamp)
	if again := digest(collector, sample, stamp); again != base {
		t.Fatalf("the same inputs gave %s and %s", base, again)
	}
	changed := func(f func(*Target, *Root, *Stamp)) v1.Hash {
		target, root, s := collector, sample, stamp
		root.Program = slices.Clone(root.Program)
		f(&target, &root, &s)
		return digest(target, root, s)
	}
	seen := map[v1.Hash]string{base: "the base"}
	for what, change := range map[string]func(*Target, *Root, *Stamp){
		"the program":     func(_ *Target, r *Root, _ *Stamp) { r.Program[0] ^= 1 },
		"the binary name": func(_ *Target, r *Root, _ *Stamp) { r.Binary = "reporter" },
		"the CA bundle":   func(_ *Target, r *Root, _ *Stamp) { r.CACerts = []byte("another bundle") },
		"the version":     func(_ *Target, _ *Root, s *Stamp) { s.Version = "v1.4.1" },
		"the revision":    func(_ *Target, _ *Root, s *Stamp) { s.Revision = "unknown" },
		"the arguments":   func(tg *Target, _ *Root, _ *Stamp) { tg.Args = []string{"files"} },
		"the name":        func(tg *Target, _ *Root, _ *Stamp) { tg.Name = "collector-2" },
		"the description": func(tg *Target, _ *Root, _ *Stamp) { tg.Description = "another" },
	} {
		d := changed(change)
		if other, ok := seen[d]; ok {
			t.Errorf("changing %s gave the digest of %s", what, other)
		}
		seen[d] = what
	}
}
