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
