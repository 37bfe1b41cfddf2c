package vaultpolicy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const (
	policyKey = "auth-system-auth-migration.policy.json"
	roleKey   = "auth-system-auth-migration.role.json"
)

func migrationFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := renderFiles(t, "auth")
	return map[string][]byte{policyKey: files[policyKey], roleKey: files[roleKey]}
}

func TestReadMountAsKubeletLaysItOut(t *testing.T) {
	files := migrationFiles(t)
	got, err := ReadMount(testenv.MountConfigMap(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[policyKey]) != string(files[policyKey]) || string(got[roleKey]) != string(files[roleKey]) {
		t.Errorf("read %q", got)
	}
}

// Each case starts from a proper mount and spoils it one way; every one is
// refused, since anything but a settled ConfigMap mount is not a render.
func TestReadMountRefusesOtherLayouts(t *testing.T) {
	ts := testenv.ConfigMapTimestampDir
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"plain folder of files", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "..data")))
		}, "no ..data link"},
		{"..data a folder", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "..data")))
			must(t, os.Mkdir(filepath.Join(dir, "..data"), 0o755))
		}, "..data is not a link"},
		{"..data pointing outside", func(t *testing.T, dir string) {
			relink(t, filepath.Join(dir, "..data"), "/etc")
		}, `points at "/etc"`},
		{"..data pointing at a missing folder", func(t *testing.T, dir string) {
			relink(t, filepath.Join(dir, "..data"), "..2026_01_01_00_00_00.1")
		}, "not a folder"},
		{"a key that is a plain file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, roleKey)))
			must(t, os.WriteFile(filepath.Join(dir, roleKey), []byte("{}"), 0o600))
		}, "is not a key's link"},
		{"a key linking elsewhere", func(t *testing.T, dir string) {
			relink(t, filepath.Join(dir, roleKey), ts+"/"+roleKey)
		}, "not ..data/"},
		{"a key without its file", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ts, roleKey)))
		}, "differ"},
		{"a file without its key", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, roleKey)))
		}, "differ"},
		{"an update half done", func(t *testing.T, dir string) {
			must(t, os.Symlink(ts, filepath.Join(dir, "..data_tmp")))
		}, `"..data_tmp" is not part of a settled`},
		{"a second timestamped folder", func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "..2026_01_01_00_00_00.1"), 0o755))
		}, "not part of a settled"},
		{"a document that is a link", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ts, roleKey)))
			must(t, os.Symlink(policyKey, filepath.Join(dir, ts, roleKey)))
		}, "not a regular file"},
		{"a document that is a folder", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ts, roleKey)))
			must(t, os.Mkdir(filepath.Join(dir, ts, roleKey), 0o755))
		}, "not a regular file"},
		{"a document too large", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, ts, roleKey), 0o600))
			must(t, os.WriteFile(filepath.Join(dir, ts, roleKey), []byte(strings.Repeat(" ", maxDocumentBytes+1)), 0o600))
		}, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.MountConfigMap(t, migrationFiles(t))
			tc.spoil(t, dir)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestReadMountMissingFolder(t *testing.T) {
	if _, err := ReadMount(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "open the render") {
		t.Fatalf("error %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func relink(t *testing.T, link, target string) {
	t.Helper()
	must(t, os.Remove(link))
	must(t, os.Symlink(target, link))
}
