package backup

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// StagingDir is the folder on the claim where SQLite databases are copied
// and checked before they enter the archive.
const StagingDir = ".sqlite-staging"

// filesVariables are what Files.Configure reads.
var filesVariables = []settings.Variable{
	{Name: "BACKUP_SOURCE_DIR", Default: "/data", Meaning: "the volume (read-only); must not contain BACKUP_DIR"},
}

// Files archives a directory tree as tar. Regular files are streamed, SQLite
// databases are copied consistently first (see consistentCopy), symlinks are
// archived as links and never followed, and special files are skipped.
type Files struct {
	Source  string // the volume, read-only
	Staging string // a folder on the claim this method owns for the run
	Tries   int    // integrity checks per database before the run fails; 0 means 3
	Logger  *slog.Logger
}

// Name implements Method.
func (Files) Name() string { return "files" }

// Summary implements Method.
func (Files) Summary() string { return "Archive a volume, its SQLite databases copied consistently" }

// Extension implements Method: a gzipped tar archive.
func (Files) Extension() string { return ".tar.gz" }

// Variables implements Method.
func (Files) Variables() []settings.Variable { return filesVariables }

// Configure implements Method. The claim may not lie in the volume: the
// archive would hold itself, growing each run.
func (Files) Configure(env *settings.Reader, claim string, logger *slog.Logger) (Method, error) {
	source := env.String("BACKUP_SOURCE_DIR", "/data")
	if inside(claim, source) {
		return nil, fmt.Errorf("BACKUP_DIR %s lies inside BACKUP_SOURCE_DIR %s: the archive would hold itself", claim, source)
	}
	return Files{Source: source, Staging: filepath.Join(claim, StagingDir), Logger: logger}, nil
}

// inside reports whether dir is source or lies below it.
func inside(dir, source string) bool {
	rel, err := filepath.Rel(filepath.Clean(source), filepath.Clean(dir))
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")))
}

// Write streams the tar archive of Source into w.
func (f Files) Write(ctx context.Context, w io.Writer) error {
	logger := f.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.RemoveAll(f.Staging); err != nil {
		return fmt.Errorf("clear %s: %w", f.Staging, err)
	}
	if err := os.MkdirAll(f.Staging, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", f.Staging, err)
	}
	defer os.RemoveAll(f.Staging)
	// Every file of the volume is opened through an os.Root, which refuses
	// any path that would leave it, whatever a symlink says.
	source, err := os.OpenRoot(f.Source)
	if err != nil {
		return fmt.Errorf("open the volume: %w", err)
	}
	defer source.Close()
	staging, err := os.OpenRoot(f.Staging)
	if err != nil {
		return fmt.Errorf("open %s: %w", f.Staging, err)
	}
	defer staging.Close()

	a := &archiver{
		files:   f,
		source:  source,
		staging: staging,
		logger:  logger,
		tw:      tar.NewWriter(w),
		buf:     make([]byte, 1<<20),
	}
	if err := fs.WalkDir(source.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil && rel != "." && errors.Is(err, fs.ErrNotExist) {
			return a.vanished(rel)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(f.Source, rel), err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return a.add(ctx, rel, d)
	}); err != nil {
		return err
	}
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("finish the archive: %w", err)
	}
	logger.Info("archived the volume", "files", a.regular, "sqlite_databases", a.databases,
		"symlinks", a.links, "skipped", a.skipped)
	return nil
}

// Restore implements Method: the archive is unpacked into work and moved
// into target only once it read back whole, so target never holds part of
// a generation.
func (Files) Restore(ctx context.Context, read ReadFunc, work, target string, into *Restored) error {
	if err := read("unpacking", func(plain io.Reader) error {
		n, err := unpack(ctx, plain, work)
		into.Files = n
		return err
	}); err != nil {
		return err
	}
	if err := moveInto(work, target); err != nil {
		return err
	}
	into.Path = target
	into.Checks = append(into.Checks, "the archive reads whole")
	return nil
}

// Check implements Method: every SQLite database restored passes
// integrity_check, as each did when it was archived.
func (Files) Check(ctx context.Context, restored *Restored) error {
	n, err := checkDatabases(ctx, restored.Path)
	restored.Databases = n
	if err != nil {
		return err
	}
	if n > 0 {
		restored.Checks = append(restored.Checks, "integrity_check of "+count(n, "SQLite database"))
	}
	return nil
}

// Describe implements Method: the files, unpacked into a folder.
func (Files) Describe(restored Restored) (what, where string) {
	what = count(restored.Files, "file")
	return what, what + " into " + restored.Path
}

// LoadHint implements Method: the files are already where they belong.
func (Files) LoadHint(path string) string { return "unpacked into " + path + "\n" }
