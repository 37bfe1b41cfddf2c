package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// ConfigMapTimestampDir is the timestamped folder MountConfigMap lays the
// files in, named as the kubelet names it.
const ConfigMapTimestampDir = "..2026_11_30_09_00_00.123456789"

// MountConfigMap lays files (key to content) out in a new temporary folder as
// the kubelet mounts a ConfigMap volume, and returns the folder: the files in
// a timestamped folder, a "..data" link to it, and a link "<key>" ->
// "..data/<key>" for each key. Files are read-only, as the mount is.
func MountConfigMap(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	ts := filepath.Join(dir, ConfigMapTimestampDir)
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatalf("lay out the ConfigMap: %v", err)
	}
	for key, content := range files {
		if err := os.WriteFile(filepath.Join(ts, key), content, 0o444); err != nil {
			t.Fatalf("lay out the ConfigMap: %v", err)
		}
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatalf("lay out the ConfigMap: %v", err)
		}
	}
	if err := os.Symlink(ConfigMapTimestampDir, filepath.Join(dir, "..data")); err != nil {
		t.Fatalf("lay out the ConfigMap: %v", err)
	}
	return dir
}

// ReadFolder reads every regular file directly in dir, by name, for a test
// that keeps a ConfigMap's keys as files under testdata.
func ReadFolder(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		content, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("read %s: %v", e.Name(), err)
		}
		files[e.Name()] = content
	}
	return files
}
