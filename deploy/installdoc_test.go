package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// yamlBlock is a fenced YAML block of a Markdown page.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// documented is the first object of kind (with apiVersion) that
// docs/install.md shows a platform engineer to apply, as its YAML and
// decoded.
func documented(t *testing.T, apiVersion, kind string) ([]byte, map[string]any) {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range yamlBlock.FindAllSubmatch(page, -1) {
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(block[1])))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatal(err)
			}
			if obj["kind"] == kind && obj["apiVersion"] == apiVersion {
				return doc, obj
			}
		}
	}
	t.Fatalf("docs/install.md shows no %s %s", apiVersion, kind)
	return nil, nil
}

// TestDocumentedKustomization holds the install docs/install.md shows to
// what Flux takes (a server-side dry run against Flux's own CRDs) and to
// what a safe install needs: the OCIRepository verifies the release's
// cosign signature, and the Kustomization applies that source's base and
// waits on Flagger and the CRDs.
func TestDocumentedKustomization(t *testing.T) {
	doc, obj := documented(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization")
	source, sourceObj := documented(t, "source.toolkit.fluxcd.io/v1", "OCIRepository")
	spec, _ := obj["spec"].(map[string]any)
	var depends []string
	deps, _ := spec["dependsOn"].([]any)
	for _, d := range deps {
		if m, ok := d.(map[string]any); ok {
			name, _ := m["name"].(string)
			depends = append(depends, name)
		}
	}
	for _, want := range []string{"flagger", "crds"} {
		if !slices.Contains(depends, want) {
			t.Errorf("the documented Kustomization depends on %v, not on %s", depends, want)
		}
	}
	ref, _ := spec["sourceRef"].(map[string]any)
	sourceMeta, _ := sourceObj["metadata"].(map[string]any)
	if ref["kind"] != "OCIRepository" || ref["name"] != sourceMeta["name"] || spec["path"] != "./" {
		t.Errorf("the documented Kustomization applies %v at %v, not the base of the documented OCIRepository %v", ref, spec["path"], sourceMeta["name"])
	}
	sourceSpec, _ := sourceObj["spec"].(map[string]any)
	verify, _ := sourceSpec["verify"].(map[string]any)
	if verify["provider"] != "cosign" {
		t.Errorf("the documented OCIRepository verifies %v, not cosign signatures", verify)
	}
	// source-controller does not bind a signature to the digest it names,
	// so only a digest pin keeps an artifact pushed under the tag out.
	if ref, _ := sourceSpec["ref"].(map[string]any); ref["digest"] == nil || ref["tag"] != nil || ref["semver"] != nil {
		t.Errorf("the documented OCIRepository follows %v; pin it to the release's digest alone", sourceSpec["ref"])
	}
	if url, _ := sourceSpec["url"].(string); !strings.HasSuffix(url, "/manifests") {
		t.Errorf("the documented OCIRepository pulls %q, not a release's manifests", url)
	}

	cp := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	_, err := cp.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.ApplyDryRun(ctx, doc); err != nil {
		t.Errorf("Flux's CRD refuses the documented Kustomization: %v", err)
	}
	if _, err := cp.ApplyDryRun(ctx, source); err != nil {
		t.Errorf("Flux's CRD refuses the documented OCIRepository: %v", err)
	}
}
