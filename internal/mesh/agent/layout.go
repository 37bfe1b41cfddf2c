package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// The names inside a module's folder: its versions, the link to the one
// that runs, and each version's record of what it is.
const (
	releasesDir = "releases"
	currentLink = "current"
	releaseFile = ".release.json"
)

// Layout is MESH_ROOT: a folder per module, each holding its laid-down
// versions under releases/<digest hex> and the link current to the one
// that runs. A version is complete before its folder gets its name, and
// current moves in one rename, so a crash at any point leaves the old
// version or the new one.
type Layout struct {
	Root string
}

// folder is module's folder: its key-safe name, which holds no dot or
// separator, so no module can name a folder outside the root.
func (l Layout) folder(module string) (string, error) {
	name, err := bus.EncodeName(module)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.Root, name), nil
}

// DataDir is where module keeps the data its composition's dataDir names:
// beside its versions, not in one, so every version finds it.
func (l Layout) DataDir(module, dataDir string) (string, error) {
	folder, err := l.folder(module)
	if err != nil {
		return "", err
	}
	if err := composition.CheckPath(dataDir); err != nil {
		return "", err
	}
	return filepath.Join(folder, "data", filepath.FromSlash(dataDir)), nil
}

// Current is what runs of module and the folder it runs from; a module
// never switched runs nothing (zero Running, no error).
func (l Layout) Current(module string) (Running, string, error) {
	folder, err := l.folder(module)
	if err != nil {
		return Running{}, "", err
	}
	link := filepath.Join(folder, currentLink)
	target, err := os.Readlink(link)
	if errors.Is(err, os.ErrNotExist) {
		return Running{}, "", nil
	}
	if err != nil {
		return Running{}, "", fmt.Errorf("read %s: %w", link, err)
	}
	dir := filepath.Join(folder, target)
	raw, err := os.ReadFile(filepath.Join(dir, releaseFile)) //nolint:gosec // a version's folder under MESH_ROOT
	if err != nil {
		return Running{}, "", fmt.Errorf("module %s: the version current names: %w", module, err)
	}
	var r Running
	if err := json.Unmarshal(raw, &r); err != nil {
		return Running{}, "", fmt.Errorf("module %s: %s: %w", module, releaseFile, err)
	}
	return r, dir, nil
}

// Modules is every module with a folder under the root, for reading what
// runs from disk at start.
func (l Layout) Modules() ([]string, error) {
	entries, err := os.ReadDir(l.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name, err := bus.DecodeName(e.Name()); err == nil && e.IsDir() {
			out = append(out, name)
		}
	}
	return out, nil
}

// Install lays doc down as module's version digest, unless it is there: in
// a folder of a name no one reads, then renamed whole. It answers the
// version's folder; leftovers of an install a crash cut short are removed.
func (l Layout) Install(doc composition.Document, digest string) (string, error) {
	folder, err := l.folder(doc.Module)
	if err != nil {
		return "", err
	}
	releases := filepath.Join(folder, releasesDir)
	dir := filepath.Join(releases, strings.TrimPrefix(digest, "sha256:"))
	if _, err := os.Stat(filepath.Join(dir, releaseFile)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(releases, 0o750); err != nil {
		return "", err
	}
	if err := l.removeLeftovers(releases); err != nil {
		return "", err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := filepath.Join(releases, ".install-"+hex.EncodeToString(suffix))
	if err := writeVersion(tmp, doc, digest); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("lay down %s at %s: %w", doc.Module, doc.Fingerprint, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("lay down %s at %s: %w", doc.Module, doc.Fingerprint, err)
	}
	return dir, syncDir(releases)
}

func writeVersion(dir string, doc composition.Document, digest string) error {
	if err := os.Mkdir(dir, 0o750); err != nil {
		return err
	}
	for p, f := range doc.Files {
		if err := composition.CheckPath(p); err != nil {
			return err
		}
		file := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
			return err
		}
		if err := writeSynced(file, []byte(f.Content), f.Perm()); err != nil {
			return err
		}
	}
	// The composition it was laid down from, for an agent that starts it
	// again from disk.
	encoded, err := doc.Encode()
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, documentFile), encoded, 0o600); err != nil {
		return err
	}
	record, err := json.Marshal(Running{Fingerprint: doc.Fingerprint, Digest: digest})
	if err != nil {
		return err
	}
	// The record last: a folder with it is complete.
	if err := writeSynced(filepath.Join(dir, releaseFile), record, 0o644); err != nil {
		return err
	}
	return syncDir(dir)
}

// Switch points current at module's version digest in one rename.
func (l Layout) Switch(module, digest string) error {
	folder, err := l.folder(module)
	if err != nil {
		return err
	}
	target := filepath.Join(releasesDir, strings.TrimPrefix(digest, "sha256:"))
	if _, err := os.Stat(filepath.Join(folder, target, releaseFile)); err != nil {
		return fmt.Errorf("switch %s: no complete version %s: %w", module, digest, err)
	}
	tmp := filepath.Join(folder, ".current-next")
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("switch %s: %w", module, err)
	}
	if err := os.Rename(tmp, filepath.Join(folder, currentLink)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("switch %s: %w", module, err)
	}
	return syncDir(folder)
}

// removeLeftovers removes the folders of installs a crash cut short.
func (l Layout) removeLeftovers(releases string) error {
	entries, err := os.ReadDir(releases)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".install-") {
			if err := os.RemoveAll(filepath.Join(releases, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeSynced(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm) //nolint:gosec // a path under MESH_ROOT
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The mode as the composition says, whatever the umask took away.
	return os.Chmod(path, perm)
}

// syncDir makes a folder's new entries durable, so a rename survives a
// power cut as well as a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // a folder under MESH_ROOT
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
