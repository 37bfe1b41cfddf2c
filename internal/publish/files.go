package publish

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

func (p Plan) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// copyFolder copies the YAML files of src (one level: deploy/'s folders
// are flat) into dst.
func copyFolder(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		if err := copyYAML(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyYAML(src, dst string) error {
	raw, err := os.ReadFile(src) //nolint:gosec // the module's own deploy/
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	_, err = writeFile(dst, raw)
	return err
}

// writeFile writes raw at path under a temporary name first, so nothing
// half written is ever seen there, and returns path.
func writeFile(path string, raw []byte) (string, error) {
	//nolint:gosec // a release's output, readable as bin/ is
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(raw)
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// containerImages are the images of every container and init container
// in a Kubernetes object, at any depth (a CronJob's are three levels down).
// kustomize's own image filter walks the same fields to set them; nothing
// exported lists them, so this reads them back.
func containerImages(n *yaml.Node) []string {
	var out []string
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, containerImages(c)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if (key.Value == "containers" || key.Value == "initContainers") && value.Kind == yaml.SequenceNode {
				for _, c := range value.Content {
					if image := field(c, "image"); image != "" {
						out = append(out, image)
					}
				}
				continue
			}
			out = append(out, containerImages(value)...)
		}
	case yaml.ScalarNode, yaml.AliasNode:
	}
	return out
}

func field(n *yaml.Node, key string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// writeDigests writes the file naming every image and the artifact by
// digest, one "<kind> <name> <ref>" line each: what the workflow signs
// keyless and what an install pins.
func writeDigests(path string, p Published) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# delivery %s: every image's index and the manifests' artifact, by digest\n", p.Version)
	for _, img := range p.Images {
		fmt.Fprintf(&b, "image %s %s\n", img.Name, img.Ref)
		for _, pi := range img.Platforms {
			fmt.Fprintf(&b, "platform %s %s/%s %s@%s\n", img.Name, pi.Platform.OS, pi.Platform.Architecture, img.Ref.Context().Name(), pi.Digest)
		}
	}
	fmt.Fprintf(&b, "manifests %s %s\n", ManifestsRepository, p.Manifests.Ref)
	return writeFile(path, []byte(b.String()))
}
