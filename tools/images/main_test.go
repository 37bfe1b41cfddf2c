package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func TestHelpAndVersion(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "images", Variables: []string{"IMAGES", "IMAGES_DIR", "IMAGES_CA_CERTIFICATES", "IMAGES_VERSION", "IMAGES_COMMIT"},
		Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
			return run(context.Background(), args, getenv, stdout, stderr, false)
		}})
	var help bytes.Buffer
	service.Help(&help)
	for _, want := range []string{"backup-postgres holds no pg_dumpall", "deploy/Dockerfile, --target backup-postgres", "no shell", "backup-rabbitmq"} {
		if !strings.Contains(strings.Join(strings.Fields(help.String()), " "), want) {
			t.Errorf("the help does not say %q:\n%s", want, help.String())
		}
	}
}

func TestFailuresAreOneLine(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		code int
		want string
	}{
		{map[string]string{"IMAGES": "collector,nope"}, 2, `IMAGES: no image is named "nope"`},
		{map[string]string{"IMAGES": "vault-policy", "IMAGES_CA_CERTIFICATES": filepath.Join(t.TempDir(), "none")}, 1,
			"read the CA bundle: open "},
	} {
		c.env["IMAGES_DIR"] = t.TempDir()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), nil, testenv.Getenv(c.env), &stdout, &stderr, false)
		var line struct{ Level, Error string }
		if code != c.code || json.Unmarshal(stderr.Bytes(), &line) != nil || line.Level != "ERROR" || !strings.HasPrefix(line.Error, c.want) ||
			strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q stdout %q; want %d and one line %q", c.env, code, stderr.String(), stdout.String(), c.code, c.want)
		}
	}
}

// built is every image, built once for the package's tests.
var built struct {
	once    sync.Once
	dir     string
	results map[string]result
	err     error
}

// result is what the tool printed for one image.
type result struct{ digest, archive string }

// build runs the tool whole with env, and reads back what it printed.
func build(t *testing.T, env map[string]string, terminal bool) (map[string]result, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, testenv.Getenv(env), &stdout, &stderr, terminal); code != 0 {
		return nil, stderr.String(), fmt.Errorf("images exited %d: %s", code, stderr.String())
	}
	results := map[string]result{}
	for line := range strings.Lines(stdout.String()) {
		f := strings.Fields(line)
		if len(f) != 5 || !strings.HasPrefix(f[1], "sha256:") || f[3] != "MiB" {
			return nil, "", fmt.Errorf("a line the tool printed is not name, digest, size, archive: %q", line)
		}
		results[f[0]] = result{digest: f[1], archive: f[4]}
	}
	return results, stderr.String(), nil
}

func everyImage(t *testing.T) (string, map[string]result) {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "images-test-")
		var progress string
		if built.err == nil {
			built.results, progress, built.err = build(t, map[string]string{"IMAGES_DIR": built.dir}, false)
		}
		if built.err == nil && progress != "" {
			built.err = fmt.Errorf("the tool told its progress to no terminal: %q", progress)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.results
}

func TestEveryImageIsWritten(t *testing.T) {
	dir, results := everyImage(t)
	if len(results) != len(ociimage.Names()) {
		t.Errorf("the tool printed %d images, want %d", len(results), len(ociimage.Names()))
	}
	for _, n := range ociimage.Names() {
		r, ok := results[n]
		if !ok || r.archive != filepath.Join(dir, n+".tar") {
			t.Errorf("%s: %+v", n, r)
		}
		if _, err := os.Stat(r.archive); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "oci", "index.json")); err != nil {
		t.Error(err)
	}
}

// versionOf is the version and revision labels of the image in archive.
func versionOf(t *testing.T, archive string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.Config.Labels[ociimage.LabelVersion] + " " + cf.Config.Labels[ociimage.LabelRevision]
}

// TestBuildIsReproducible builds one image twice from the checkout, the
// first time at a terminal: the same digest and byte for byte the same
// archive; another CA bundle gives another digest. A commit landing between
// two builds changes the stamp, and so the digest: then both are built again.
func TestBuildIsReproducible(t *testing.T) {
	buildOne := func(env map[string]string, terminal bool) (result, string) {
		env["IMAGES"], env["IMAGES_DIR"] = "vault-policy", t.TempDir()
		results, progress, err := build(t, env, terminal)
		if err != nil {
			t.Fatal(err)
		}
		return results["vault-policy"], progress
	}
	for attempt := 1; ; attempt++ {
		first, progress := buildOne(map[string]string{}, true)
		for _, step := range []string{"images: building ./cmd/vault-policy\n", "images: writing the OCI layout "} {
			if !strings.Contains(progress, step) {
				t.Errorf("at a terminal the tool did not say %q:\n%s", step, progress)
			}
		}
		second, _ := buildOne(map[string]string{}, false)
		if first.digest != second.digest && versionOf(t, first.archive) != versionOf(t, second.archive) && attempt < 3 {
			t.Logf("the checkout's commit moved between two builds (%s, then %s): again", versionOf(t, first.archive), versionOf(t, second.archive))
			continue
		}
		if first.digest != second.digest {
			t.Fatalf("the same checkout gave %s and %s", first.digest, second.digest)
		}
		a, errA := os.ReadFile(first.archive)
		b, errB := os.ReadFile(second.archive)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("the two archives differ (%v, %v)", errA, errB)
		}
		ca, err := os.ReadFile(ociimage.CACertificates)
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(t.TempDir(), "ca.crt")
		if err := os.WriteFile(other, append(ca, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if changed, _ := buildOne(map[string]string{"IMAGES_CA_CERTIFICATES": other}, false); changed.digest == first.digest {
			t.Errorf("another CA bundle gave the same digest %s", first.digest)
		}
		// A release stamps its tag and commit: the labels say them, as the
		// binary's --version does (the podman test runs it).
		release := map[string]string{"IMAGES_VERSION": "v9.8.7", "IMAGES_COMMIT": strings.Repeat("0a", 20)}
		if tagged, _ := buildOne(release, false); versionOf(t, tagged.archive) != "v9.8.7 "+release["IMAGES_COMMIT"] {
			t.Errorf("a release's build is labelled %q, want its tag and commit", versionOf(t, tagged.archive))
		}
		return
	}
}
