package publish_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto"
	"debug/elf"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/publish"
)

// helloCompiler stands in for go build: it builds one small program once
// per architecture and copies it, so a release of every image builds in
// seconds and each platform's image still carries that platform's binary.
type helloCompiler struct{ arch string }

var hello struct {
	sync.Mutex
	paths map[string]string
}

func (c helloCompiler) Build(ctx context.Context, _, out string) error {
	hello.Lock()
	defer hello.Unlock()
	if hello.paths == nil {
		hello.paths = map[string]string{}
	}
	path, ok := hello.paths[c.arch]
	if !ok {
		dir, err := os.MkdirTemp("", "publish-hello-")
		if err != nil {
			return err
		}
		path = filepath.Join(dir, "hello")
		root, err := ociimage.ModuleRoot(ctx, "", ".")
		if err != nil {
			return err
		}
		if err := (ociimage.GoBuild{Dir: root, Architecture: c.arch}).Build(ctx, "./internal/ociimage/testdata/hello", path); err != nil {
			return err
		}
		hello.paths[c.arch] = path
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(out, raw, 0o755)
}

// keys is a cosign key pair, as cosign generate-key-pair writes it.
type keys struct {
	private, public []byte
}

func newKeys(t *testing.T) keys {
	t.Helper()
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("release"), nil })
	if err != nil {
		t.Fatal(err)
	}
	return keys{private: kb.PrivateBytes, public: kb.PublicBytes}
}

func (k keys) verifier(t *testing.T) signature.Verifier {
	t.Helper()
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(k.public)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// shared is the one release the tests read: a release of every image
// takes some seconds, and none of them changes it.
var shared struct {
	once sync.Once
	keys keys
	out  publish.Published
	err  error
}

// release publishes every image once to a registry of its own, signed with
// a key of its own, and hands both.
func release(t *testing.T) (publish.Published, keys) {
	t.Helper()
	shared.once.Do(func() {
		shared.keys = newKeys(t)
		shared.out, shared.err = publishTo(shared.keys)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.out, shared.keys
}

func publishTo(k keys) (publish.Published, error) {
	// The registry lives as long as the test binary: every test reads it.
	reg := httptest.NewServer(registry.New())
	host := strings.TrimPrefix(reg.URL, "http://")
	signer, err := publish.NewKeySigner(k.private, []byte("release"))
	if err != nil {
		return publish.Published{}, err
	}
	root, err := ociimage.ModuleRoot(context.Background(), "", ".")
	if err != nil {
		return publish.Published{}, err
	}
	dir, err := os.MkdirTemp("", "publish-")
	if err != nil {
		return publish.Published{}, err
	}
	var steps []string
	plan := publish.Plan{
		Version: "v1.2.3", Commit: strings.Repeat("a", 40), Registry: host + "/delivery", Insecure: true,
		Root: root, Dir: dir, Targets: ociimage.Targets(), Platforms: ociimage.ReleasePlatforms,
		CACerts: []byte("a CA bundle\n"), Signer: signer,
		Now:      func() time.Time { return time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC) },
		Compiler: func(arch string) ociimage.Compiler { return helloCompiler{arch: arch} },
		Progress: func(step string) { steps = append(steps, step) },
	}
	out, err := publish.Publish(context.Background(), plan)
	if err == nil && len(steps) != publish.Steps(plan) {
		err = fmt.Errorf("the release told %d steps, Steps says %d: %q", len(steps), publish.Steps(plan), steps)
	}
	return out, err
}

func checkOpts(t *testing.T, k keys) *cosign.CheckOpts {
	return &cosign.CheckOpts{SigVerifier: k.verifier(t), IgnoreTlog: true, Offline: true,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remote.WithContext(context.Background()))}}
}

func TestAReleaseIsEveryImageForBothPlatformsSignedWithItsSBOM(t *testing.T) {
	out, k := release(t)
	if len(out.Images) != len(ociimage.Targets()) {
		t.Fatalf("%d images published, want %d", len(out.Images), len(ociimage.Targets()))
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, img := range out.Images {
		if img.Tagged.TagStr() != "v1.2.3" {
			t.Errorf("%s tagged %s", img.Name, img.Tagged)
		}
		idx, err := remote.Index(img.Ref)
		if err != nil {
			t.Fatalf("%s: %v", img.Name, err)
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(manifest.Manifests) != 2 {
			t.Fatalf("%s: %d platforms in its index", img.Name, len(manifest.Manifests))
		}
		for _, m := range manifest.Manifests {
			platformImage, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if got := binaryMachine(t, platformImage); got != machines[m.Platform.Architecture] {
				t.Errorf("%s for %s carries a binary for %v", img.Name, m.Platform.Architecture, got)
			}
			cf, err := platformImage.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != m.Platform.Architecture || cf.Config.Labels[ociimage.LabelVersion] != "v1.2.3" {
				t.Errorf("%s for %s: config says %s, version %q", img.Name, m.Platform.Architecture, cf.Architecture, cf.Config.Labels[ociimage.LabelVersion])
			}
		}
		if _, _, err := cosign.VerifyImageSignatures(context.Background(), img.Ref, checkOpts(t, k)); err != nil {
			t.Errorf("%s: its signature does not verify with the release's key: %v", img.Name, err)
		}
		if _, _, err := cosign.VerifyImageSignatures(context.Background(), img.Ref, checkOpts(t, newKeys(t))); err == nil {
			t.Errorf("%s: its signature verifies with another key", img.Name)
		}
		atts, _, err := cosign.VerifyImageAttestations(context.Background(), img.Ref, checkOpts(t, k))
		if err != nil || len(atts) != 1 {
			t.Fatalf("%s: its SBOM attestation: %d, %v", img.Name, len(atts), err)
		}
		envelope, err := atts[0].Payload()
		if err != nil {
			t.Fatal(err)
		}
		statement := attestedStatement(t, envelope)
		if statement.PredicateType != publish.PredicateSPDX || statement.Subject[0].Digest["sha256"] != img.Ref.DigestStr()[len("sha256:"):] {
			t.Errorf("%s: attested %s about %v", img.Name, statement.PredicateType, statement.Subject)
		}
		if _, err := spdxjson.Read(bytes.NewReader(statement.Predicate)); err != nil {
			t.Errorf("%s: the attested SBOM is not SPDX: %v", img.Name, err)
		}
		if _, err := os.Stat(img.SBOM); err != nil {
			t.Errorf("%s: its SBOM file: %v", img.Name, err)
		}
	}
}

func TestTheManifestsArtifactPinsEveryImageAndIsSigned(t *testing.T) {
	out, k := release(t)
	art, err := remote.Image(out.Manifests.Ref)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.Config.MediaType != "application/vnd.cncf.flux.config.v1+json" ||
		manifest.Annotations["org.opencontainers.image.revision"] != "v1.2.3@sha1:"+strings.Repeat("a", 40) {
		t.Errorf("not a Flux artifact of the release: %s, %v", manifest.Config.MediaType, manifest.Annotations)
	}
	dir := unpack(t, art)
	if err := publish.CheckPinned(dir, out.Images); err != nil {
		t.Error(err)
	}
	// deploy/ holds the Dockerfile and Go tests beside the manifests; Flux
	// is to get the manifests alone.
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".yaml") {
			t.Errorf("the artifact holds %s, which is no manifest", strings.TrimPrefix(path, dir))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kustomization.yaml", "release-gate/deployment.yaml", "monitoring/servicemonitors.yaml", "templates/backup/postgres.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("the artifact lacks %s", want)
		}
	}
	gate, err := os.ReadFile(filepath.Join(dir, "release-gate", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gate), out.Images[0].Ref.String()) || !strings.Contains(string(gate), "#") {
		t.Errorf("the gate's Deployment does not name its image by digest with its comments kept:\n%s", gate)
	}
	if _, _, err := cosign.VerifyImageSignatures(context.Background(), out.Manifests.Ref, checkOpts(t, k)); err != nil {
		t.Errorf("the artifact's signature does not verify: %v", err)
	}
	digests, err := os.ReadFile(out.Digests)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range out.Images {
		if !strings.Contains(string(digests), "image "+img.Name+" "+img.Ref.String()+"\n") {
			t.Errorf("the digests file lacks %s", img.Name)
		}
	}
	if !strings.Contains(string(digests), "manifests manifests "+out.Manifests.Ref.String()) {
		t.Errorf("the digests file lacks the artifact:\n%s", digests)
	}
}

func TestCheckPinnedRefusesAnImageByTag(t *testing.T) {
	out, _ := release(t)
	dir := unpack(t, mustImage(t, out.Manifests.Ref))
	// The images but the gate's: its Deployment now names an image no
	// release of this one pushed.
	if err := publish.CheckPinned(dir, out.Images[1:]); err == nil || !strings.Contains(err.Error(), "release-gate/deployment.yaml") {
		t.Errorf("CheckPinned: %v, want the gate's Deployment named", err)
	}
}

func TestAPlanIsCheckedBeforeAnythingIsBuilt(t *testing.T) {
	good := publish.Plan{Version: "v1.0.0", Registry: "ghcr.io/org/delivery", Targets: ociimage.Targets(), Platforms: ociimage.ReleasePlatforms}
	for _, c := range []struct {
		name  string
		plan  func(publish.Plan) publish.Plan
		cause string
	}{
		{"a good plan", func(p publish.Plan) publish.Plan { return p }, ""},
		{"a pre-release", func(p publish.Plan) publish.Plan { p.Version = "v1.0.0-rc.1"; return p }, ""},
		{"no v", func(p publish.Plan) publish.Plan { p.Version = "1.0.0"; return p }, "VERSION"},
		{"a pseudo-version's base", func(p publish.Plan) publish.Plan { p.Version = "v1.0"; return p }, "VERSION"},
		{"no registry", func(p publish.Plan) publish.Plan { p.Registry = ""; return p }, "REGISTRY is empty"},
		{"a registry with capitals", func(p publish.Plan) publish.Plan { p.Registry = "ghcr.io/Org"; return p }, "REGISTRY"},
		{"no image", func(p publish.Plan) publish.Plan { p.Targets = nil; return p }, "no image"},
		{"no platform", func(p publish.Plan) publish.Plan { p.Platforms = nil; return p }, "no platform"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.plan(good).Check()
			if c.cause == "" && err != nil || c.cause != "" && (err == nil || !strings.Contains(err.Error(), c.cause)) {
				t.Errorf("Check: %v, want %q", err, c.cause)
			}
		})
	}
}

func TestAKeyThatDoesNotOpenIsRefused(t *testing.T) {
	k := newKeys(t)
	if _, err := publish.NewKeySigner(k.private, []byte("another password")); err == nil {
		t.Error("a wrong password opened the key")
	}
	if _, err := publish.NewKeySigner(k.public, []byte("release")); err == nil {
		t.Error("a public key was taken as a private one")
	}
}

func mustImage(t *testing.T, ref name.Reference) v1.Image {
	t.Helper()
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// unpack writes the artifact's one layer, a gzip tarball, into a folder.
func unpack(t *testing.T, art v1.Image) string {
	t.Helper()
	layers, err := art.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("the artifact has %d layers: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dir := t.TempDir()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// binaryMachine is the machine the image's one binary was built for.
func binaryMachine(t *testing.T, img v1.Image) elf.Machine {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no binary in the image: %v", err)
		}
		if strings.HasPrefix(h.Name, "usr/local/bin/") && h.Typeflag == tar.TypeReg {
			raw, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.NewFile(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			return f.Machine
		}
	}
}

type statement struct {
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
}

// attestedStatement opens the DSSE envelope of an attestation.
func attestedStatement(t *testing.T, envelope []byte) statement {
	t.Helper()
	var env struct{ Payload string }
	if err := json.Unmarshal(envelope, &env); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var s statement
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}
