package agent

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The marks beside a module's versions: the version that last ran healthy,
// which a version failing its health goes back to, and the version it went
// back from, which outlives an agent's restart.
const (
	healthyFile    = ".healthy.json"
	rolledBackFile = ".rolled-back.json"
)

// Healthy is the version of module that last ran healthy; zero when none.
func (l Layout) Healthy(module string) (Running, error) {
	var r Running
	return r, l.readMark(module, healthyFile, &r)
}

// MarkHealthy records r as the version of module that last ran healthy.
func (l Layout) MarkHealthy(module string, r Running) error {
	return l.writeMark(module, healthyFile, r)
}

// RolledBack is the version module went back from; zero when none.
func (l Layout) RolledBack(module string) (RolledBack, error) {
	var b RolledBack
	return b, l.readMark(module, rolledBackFile, &b)
}

// SetRolledBack records that module went back from b.
func (l Layout) SetRolledBack(module string, b RolledBack) error {
	return l.writeMark(module, rolledBackFile, b)
}

// ClearRolledBack forgets the version module went back from: a version
// applied since ran healthy.
func (l Layout) ClearRolledBack(module string) error {
	folder, err := l.folder(module)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(folder, rolledBackFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Has is whether module's version digest is laid down whole.
func (l Layout) Has(module, digest string) bool {
	folder, err := l.folder(module)
	if err != nil || digest == "" {
		return false
	}
	_, err = os.Stat(filepath.Join(folder, releasesDir, strings.TrimPrefix(digest, "sha256:"), releaseFile))
	return err == nil
}

func (l Layout) readMark(module, name string, into any) error {
	folder, err := l.folder(module)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(folder, name)) //nolint:gosec // a module's folder under MESH_ROOT
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("module %s: %s: %w", module, name, err)
	}
	return nil
}

// writeMark replaces a mark in one rename, so a crash leaves the old mark
// or the new one.
func (l Layout) writeMark(module, name string, value any) error {
	folder, err := l.folder(module)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(folder, 0o750); err != nil {
		return err
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := filepath.Join(folder, ".mark-"+hex.EncodeToString(suffix))
	if err := writeSynced(tmp, raw, 0o600); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(folder, name)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(folder)
}

// Version is one laid-down version of a module: its folder's name (its
// digest's hex) and when it was laid down.
type Version struct {
	Name string
	At   time.Time
}

// Prune is the versions to remove: all but the newest keep, and never one
// spare names (what runs, what last ran healthy), which are kept besides.
func Prune(versions []Version, keep int, spare ...string) []string {
	sorted := slices.Clone(versions)
	slices.SortFunc(sorted, func(a, b Version) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(b.Name, a.Name))
	})
	var out []string
	for i, v := range sorted {
		if i >= keep && !slices.Contains(spare, v.Name) {
			out = append(out, v.Name)
		}
	}
	return out
}

// Collect removes module's versions Prune gives up: all but the newest
// keep, what current names and what last ran healthy.
func (l Layout) Collect(module string, keep int) ([]string, error) {
	folder, err := l.folder(module)
	if err != nil {
		return nil, err
	}
	releases := filepath.Join(folder, releasesDir)
	entries, err := os.ReadDir(releases)
	if err != nil {
		return nil, err
	}
	var versions []Version
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue // an install under way is no version yet
		}
		// Laid down when its record was written, the last of its files; the
		// folder's own time moves with each start.
		info, err := os.Stat(filepath.Join(releases, e.Name(), releaseFile))
		if err != nil {
			return nil, err
		}
		versions = append(versions, Version{Name: e.Name(), At: info.ModTime()})
	}
	var spare []string
	if target, err := os.Readlink(filepath.Join(folder, currentLink)); err == nil {
		spare = append(spare, filepath.Base(target))
	}
	healthy, err := l.Healthy(module)
	if err != nil {
		return nil, err // fail closed: without the mark, the version it names might go
	}
	spare = append(spare, strings.TrimPrefix(healthy.Digest, "sha256:"))
	gone := Prune(versions, keep, spare...)
	for _, name := range gone {
		if err := os.RemoveAll(filepath.Join(releases, name)); err != nil {
			return nil, err
		}
	}
	return gone, nil
}
