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

// documentedKustomization is the Flux Kustomization docs/install.md tells
// a platform engineer to apply, as its YAML and decoded.
func documentedKustomization(t *testing.T) ([]byte, map[string]any) {
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
			if obj["kind"] == "Kustomization" && obj["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" {
				return doc, obj
			}
		}
	}
	t.Fatal("docs/install.md shows no Flux Kustomization")
	return nil, nil
}

// TestDocumentedKustomization holds the Kustomization docs/install.md
// shows to what Flux takes (a server-side dry run against Flux's own CRD)
// and to the order an install needs: it waits on Flagger and the CRDs, and
// points at a folder of this repository.
func TestDocumentedKustomization(t *testing.T) {
	doc, obj := documentedKustomization(t)
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
	path, _ := spec["path"].(string)
	if info, err := os.Stat(filepath.Join("..", filepath.FromSlash(strings.TrimPrefix(path, "./")))); err != nil || !info.IsDir() {
		t.Errorf("the documented Kustomization's path %q is no folder of the repository", path)
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
}
