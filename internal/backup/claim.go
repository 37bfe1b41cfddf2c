package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// partialPrefix starts every temporary name: a leading dot hides it from
	// a casual listing, and ParseName never accepts it, so neither a reader
	// nor the pruner can take a half-written file for a generation.
	partialPrefix = ".partial-"
	// lockName is the claim's lock file; one run holds it at a time, so a
	// Rollback's one-shot run and the scheduled run never clean up after
	// each other while both are alive.
	lockName = ".backup.lock"
	// lockPoll is how often a run waiting for the claim tries the lock again.
	lockPoll = 500 * time.Millisecond
)

// Claim is the backup volume, locked for one run.
type Claim struct {
	Dir  string
	lock *os.File
	// beforeRename, when set, runs after the temporary file is durable and
	// before it is renamed; tests use it to kill or fail a run at the one
	// moment that matters.
	beforeRename func(tempPath string) error
}

// Written is a generation made durable on the claim.
type Written struct {
	Generation Generation
	Path       string
	Size       int64
}

// OpenClaim locks the claim at dir, waiting while another run holds it, until
// ctx ends.
func OpenClaim(ctx context.Context, dir string) (*Claim, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("backup claim: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("backup claim %s is not a directory", dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // the claim's path is the operator's BACKUP_DIR
	if err != nil {
		return nil, fmt.Errorf("backup claim lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Claim{Dir: dir, lock: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("backup claim lock: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("backup claim is held by another run: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// Close releases the claim.
func (c *Claim) Close() error {
	if c.lock == nil {
		return nil
	}
	err := c.lock.Close() // closing the descriptor drops the flock
	c.lock = nil
	return err
}

// Names lists the file names on the claim.
func (c *Claim) Names() ([]string, error) {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("list the backup claim: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// CleanLeftovers removes the temporary files a dead run of method left
// behind, and the off-cluster copy a dead run of any method was encrypting,
// and returns their names. Temporary files of other methods and every other
// file are left alone. The copy goes first and whatever the run: it is the
// size of a generation, and the space it holds could fail the very write
// that would lead to its removal.
func (c *Claim) CleanLeftovers(method string) ([]string, error) {
	var removed []string
	staging := filepath.Join(c.Dir, OffClusterStaging)
	if _, err := os.Lstat(staging); err == nil {
		// The claim is locked: no other run is encrypting into it.
		if err := os.RemoveAll(staging); err != nil {
			return nil, fmt.Errorf("remove leftover %s: %w", OffClusterStaging, err)
		}
		removed = append(removed, OffClusterStaging)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("look for leftover %s: %w", OffClusterStaging, err)
	}
	names, err := c.Names()
	if err != nil {
		return removed, err
	}
	for _, name := range names {
		if !leftoverOf(name, method) {
			continue
		}
		if err := os.Remove(filepath.Join(c.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove leftover %s: %w", name, err)
		}
		removed = append(removed, name)
	}
	if len(removed) > 0 {
		if err := syncDir(c.Dir); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// leftoverOf reports whether name is a temporary file of method: the
// generation name it was to become, then a dot and a random suffix.
func leftoverOf(name, method string) bool {
	rest, ok := strings.CutPrefix(name, partialPrefix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return false
	}
	g, err := ParseName(rest[:i])
	return err == nil && g.Method == method
}

// Write makes generation g durable on the claim from what produce writes:
// under a temporary name in the same directory, fsynced, renamed, and the
// directory fsynced. On any failure the temporary file is removed and no
// file named g exists.
func (c *Claim) Write(ctx context.Context, g Generation, produce func(context.Context, io.Writer) error) (Written, error) {
	name := g.Name()
	final := filepath.Join(c.Dir, name)
	if _, err := os.Lstat(final); err == nil {
		return Written{}, fmt.Errorf("generation %s already exists", name)
	}
	f, err := os.CreateTemp(c.Dir, partialPrefix+name+".*")
	if err != nil {
		return Written{}, fmt.Errorf("create the generation: %w", err)
	}
	temp := f.Name()
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(temp)
		}
	}()
	counter := &countingWriter{w: f}
	buffered := bufio.NewWriterSize(counter, 1<<20)
	if err := produce(ctx, buffered); err != nil {
		return Written{}, err
	}
	if err := buffered.Flush(); err != nil {
		return Written{}, fmt.Errorf("write the generation: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Written{}, fmt.Errorf("fsync the generation: %w", err)
	}
	if err := f.Close(); err != nil {
		return Written{}, fmt.Errorf("close the generation: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Written{}, fmt.Errorf("generation abandoned: %w", err)
	}
	if c.beforeRename != nil {
		if err := c.beforeRename(temp); err != nil {
			return Written{}, err
		}
	}
	if err := os.Rename(temp, final); err != nil {
		return Written{}, fmt.Errorf("publish the generation: %w", err)
	}
	done = true
	if err := syncDir(c.Dir); err != nil {
		// The rename may not survive a crash; the file is complete either way,
		// but the run must not claim durability it cannot prove.
		return Written{}, err
	}
	return Written{Generation: g, Path: final, Size: counter.n}, nil
}

// Remove deletes the named files from the claim and makes the deletion durable.
func (c *Claim) Remove(names []string) error {
	for _, name := range names {
		if err := os.Remove(filepath.Join(c.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("prune %s: %w", name, err)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return syncDir(c.Dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // a directory this run writes to, opened only to fsync it
	if err != nil {
		return fmt.Errorf("open %s to fsync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
