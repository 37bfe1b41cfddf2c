package backup

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Restorer reads generations back from Source, the claim or the off-cluster
// destination, and restores or drills them the way their method does.
type Restorer struct {
	Source Source
	// Now is the drill's clock; time.Now when nil.
	Now func() time.Time
	// Progress hears each stage as it goes; nil hears nothing.
	Progress Progress
}

// Source is where a Restorer reads generations from. Each source lists,
// fetches and verifies its copies its own way (a file on the claim, an
// encrypted object checked against the provider's checksums); the restore
// after the bytes are in is the same for all.
type Source interface {
	// List names the generations there, newest first.
	List(ctx context.Context) ([]Generation, error)
	// Open begins reading generation g as stored, its gzip bytes, and begins
	// the progress stage that reads them; stage ("unpacking", "writing")
	// names what the restore does with them, for the stage's name.
	Open(ctx context.Context, g Generation, stage string, progress Progress) (Reading, error)
	// String says where the source is, for a person.
	String() string
}

// Reading is a generation as it streams in from its Source: its gzip bytes.
type Reading interface {
	io.Reader
	// Size is the generation's size as stored.
	Size() int64
	// Verify, once the bytes are read to their end, names the source's own
	// checks they passed, or says why one failed.
	Verify() ([]string, error)
	// Close ends the stage Open began and lets go of the copy.
	Close() error
}

// List names the generations at the source, newest first. Rollback copies on
// the claim are listed too; they never go off the cluster.
func (r Restorer) List(ctx context.Context) ([]Generation, error) { return r.Source.List(ctx) }

func sortNewestFirst(gens []Generation) {
	slices.SortStableFunc(gens, func(a, b Generation) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name(), b.Name())
	})
}

// Restored is a generation read back whole and verified.
type Restored struct {
	Generation Generation
	// Path is the folder the files were unpacked into, or the dump or
	// definitions file written.
	Path      string
	Files     int // regular files unpacked
	Databases int // SQLite databases among them that passed integrity_check (drill only)
	// Size is the generation's size as stored: the encrypted copy, or the
	// file on the claim.
	Size int64
	// Checks name what the generation passed on its way back, in order.
	Checks []string
	// Ahead are the copies stamped after the drill's time, passed over
	// (drill only).
	Ahead []Generation
}

// Restore reads generation g and writes it under target as its method
// restores: a files archive is unpacked into target (which must be empty or
// absent), a dump or the definitions become one file in target. Nothing
// appears in target unless the whole generation was read, verified and
// decrypted.
func (r Restorer) Restore(ctx context.Context, g Generation, target string) (Restored, error) {
	m, ok := MethodNamed(g.Method)
	if !ok {
		return Restored{}, fmt.Errorf("unknown method %q", g.Method)
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return Restored{}, fmt.Errorf("create %s: %w", target, err)
	}
	unlock, err := lockTarget(target)
	if err != nil {
		return Restored{}, err
	}
	defer unlock()
	if err := removeLeftovers(target); err != nil {
		return Restored{}, err
	}
	work, err := os.MkdirTemp(target, workPrefix)
	if err != nil {
		return Restored{}, fmt.Errorf("create the restore's work folder: %w", err)
	}
	defer func() { _ = removeRestored(work) }()

	result := Restored{Generation: g}
	read := func(stage string, consume func(io.Reader) error) error {
		return r.read(ctx, g, &result, stage, consume)
	}
	if err := m.Restore(ctx, read, work, target, &result); err != nil {
		return Restored{}, err
	}
	return result, nil
}

// workPrefix names a restore's work folder inside its target. The folder
// sits in the target so that publishing is a rename on one file system,
// even where the target is a volume's mount point.
const workPrefix = ".restore-partial-"

// lockTarget holds target for one restore at a time, so that the work
// folders left there are known to be no running restore's.
func lockTarget(target string) (unlock func(), err error) {
	dir, err := os.Open(target) //nolint:gosec // the operator's restore target
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", target, err)
	}
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a descriptor fits an int
		dir.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another restore into %s is running", target)
		}
		return nil, fmt.Errorf("lock %s: %w", target, err)
	}
	return func() { dir.Close() }, nil
}

// removeLeftovers removes the work folders of restores that were killed
// before they could remove their own: half a generation, never published.
func removeLeftovers(target string) error {
	entries, err := os.ReadDir(target)
	if err != nil {
		return fmt.Errorf("read %s: %w", target, err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), workPrefix) {
			if err := removeRestored(filepath.Join(target, e.Name())); err != nil {
				return fmt.Errorf("remove an earlier restore's work folder: %w", err)
			}
		}
	}
	return nil
}

// read opens generation g at the source and hands the decompressed bytes to
// consume. It fails unless every byte was read and passed the source's
// checks and gzip's CRC; it records the generation's size and those checks
// in result.
func (r Restorer) read(ctx context.Context, g Generation, result *Restored, stage string, consume func(io.Reader) error) error {
	in, err := r.Source.Open(ctx, g, stage, r.progress())
	if err != nil {
		return err
	}
	defer in.Close()
	result.Size = in.Size()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return fmt.Errorf("%s is not gzip: %w", g.Name(), err)
	}
	if err := consume(zr); err != nil {
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	// Read to the very end, so gzip's CRC and the source's own checks (age's
	// last chunk, the provider's checksums) are all made, whatever the
	// consumer left.
	if _, err := io.Copy(io.Discard, zr); err != nil { //nolint:gosec // discarded, so no size is too large
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	checks, err := in.Verify()
	if err != nil {
		return err
	}
	result.Checks = append(result.Checks, checks...)
	result.Checks = append(result.Checks, "gzip's CRC")
	return nil
}

// removeRestored removes a folder of restored files. A restore keeps the
// archive's modes, so a folder in it may be read-only, which os.RemoveAll
// alone cannot empty unless run as root: each folder is made writable first.
func removeRestored(path string) error {
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700) //nolint:gosec // a folder this process restored, on its way out
		}
		return nil
	})
	return os.RemoveAll(path)
}

// restoreOneFile is the restore of a method whose generation is one file (a
// dump, the definitions): written whole in work, then linked into target.
func restoreOneFile(read ReadFunc, work, target string, into *Restored) error {
	name := strings.TrimSuffix(into.Generation.Name(), ".gz")
	if err := read("writing", func(plain io.Reader) error {
		return writeFile(plain, filepath.Join(work, name))
	}); err != nil {
		return err
	}
	into.Path = filepath.Join(target, name)
	// A link, not a rename: it fails where the name is taken, so a file
	// already in target (a hand-edited dump, say) is never replaced.
	if err := os.Link(filepath.Join(work, name), into.Path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists in %s; a restore overwrites nothing", name, target)
		}
		return fmt.Errorf("publish %s: %w", name, err)
	}
	return nil
}

func writeFile(r io.Reader, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // inside the restore's work folder
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Drill restores the newest generation at the source into scratch and checks
// it as its method does: the archive reads whole, every SQLite database in it
// passes integrity_check, a dump or the definitions parse. scratch is emptied
// after.
// A copy stamped after now was written by a clock that ran ahead; retention
// never prunes it, so taken as the newest it would be drilled forever while
// the copies being written went unchecked. It is passed over and named.
func (r Restorer) Drill(ctx context.Context, scratch string) (Restored, error) {
	gens, err := r.List(ctx)
	if err != nil {
		return Restored{}, err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	at := now()
	newest := slices.IndexFunc(gens, func(g Generation) bool { return !g.Time.After(at) })
	if newest < 0 {
		return Restored{Ahead: gens}, fmt.Errorf("no generation to drill stamped before %s (%d after it)", at.UTC().Format(time.RFC3339), len(gens))
	}
	g, ahead := gens[newest], gens[:newest]
	work, err := os.MkdirTemp(scratch, ".drill-")
	if err != nil {
		return Restored{}, fmt.Errorf("create the drill's folder: %w", err)
	}
	defer func() { _ = removeRestored(work) }()
	restored, err := r.Restore(ctx, g, work)
	restored.Ahead = ahead
	if err != nil {
		return restored, err
	}
	progress := r.progress()
	progress.Begin("checking "+g.Name(), 0)
	defer progress.End()
	// Restore refused any generation whose method is unknown.
	m, _ := MethodNamed(g.Method)
	if err := m.Check(ctx, &restored); err != nil {
		return restored, fmt.Errorf("%s: %w", g.Name(), err)
	}
	return restored, nil
}

func checkFile(path string, check func(io.Reader) error) error {
	f, err := os.Open(path) //nolint:gosec // the file the drill just restored
	if err != nil {
		return err
	}
	defer f.Close()
	return check(bufio.NewReaderSize(f, 1<<20))
}
