package secretscan

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// allowed are the tracked paths (a file, or a folder ending in /) whose
// credential-shaped text is a fixture, each with why. Every other tracked
// file must hold none.
var allowed = map[string]string{
	// AWS's documented example access key id, as a key id Garage never issued.
	"internal/garagecatalog/plan_test.go": "a published example key id",
	// The documents the tests read.
	"internal/backup/testdata/":          "test fixtures",
	"internal/garagecatalog/testdata/":   "test fixtures",
	"internal/postgrescatalog/testdata/": "test fixtures",
	"internal/vaultpolicy/testdata/":     "test fixtures",
	// GitHub's REST API description, vendored as published: its examples
	// hold GitHub's own documented sample tokens.
	"third_party/github/api.github.com.json": "GitHub's published examples",
}

func isAllowed(path string) bool {
	for p := range allowed {
		if path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// tracked lists the files git tracks, from the repository's root.
func tracked(t *testing.T) (string, []string) {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the scan walks the files git tracks and needs git and the repository: %v", err)
	}
	dir := string(bytes.TrimSpace(root))
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var paths []string
	for p := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		t.Fatal("git tracks no file")
	}
	return dir, paths
}

func TestTrackedFilesHoldNoCredential(t *testing.T) {
	root, paths := tracked(t)
	found, scanned, err := scanTree(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f + " (a fixture belongs under a path the scan's allowed list names)")
	}
	t.Logf("scanned %d tracked files", scanned)
}

// scanTree scans the files named under root, less the allowed ones, and
// names each finding by path, line and shape.
func scanTree(root string, paths []string) (found []string, scanned int, err error) {
	for _, p := range paths {
		if isAllowed(p) {
			continue
		}
		content, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, 0, err
		}
		scanned++
		for _, f := range Scan(content) {
			found = append(found, fmt.Sprintf("%s:%d: text shaped like a %s", p, f.Line, f.Kind))
		}
	}
	return found, scanned, nil
}

func TestScanTreeFindsAPlantedKeyOutsideTheAllowedPaths(t *testing.T) {
	root := t.TempDir()
	key := "-----BEGIN " + "EC PRIVATE KEY-----\n"
	for _, p := range []string{"deploy/secret.yaml", "internal/vaultpolicy/testdata/key.pem", "README.md"} {
		content := key
		if p == "README.md" {
			content = "nothing here\n"
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	found, scanned, err := scanTree(root, []string{"deploy/secret.yaml", "internal/vaultpolicy/testdata/key.pem", "README.md", "gone.txt"})
	if err != nil || scanned != 2 || len(found) != 1 || found[0] != "deploy/secret.yaml:1: text shaped like a private key" {
		t.Fatalf("found %q, scanned %d, err %v", found, scanned, err)
	}
}

// An allowed path that is gone would let a new file of that name through
// unread: the list names only what is there.
func TestAllowedPathsAreTracked(t *testing.T) {
	_, paths := tracked(t)
	for p := range allowed {
		found := false
		for _, q := range paths {
			if q == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(q, p)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the allowed path %s is not tracked: drop it from the list", p)
		}
	}
}
