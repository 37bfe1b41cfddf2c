package backup

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // pure Go, so the image stays static
)

// consistentCopy copies the database at path, with its write-ahead log or
// rollback journal, into the staging folder as name, folds the log in and
// checks the result with PRAGMA integrity_check, up to Tries times. It
// returns the staged one-file copy.
//
// The volume is mounted read-only, so the copy cannot take a read lock that
// a writer in another pod would respect; instead it notices a writer that
// reset the log (or, without a log, rewrote the database) while it copied,
// and counts that as a failed try like a failed integrity check. Frames a
// checkpoint copies into the database mid-copy stay in the log until a
// reset, so replaying the copied log repairs any page torn that way.
//
// Each try opens the database by name: one replaced by a rename since an
// earlier try is copied as it now is, and one removed is left out as any
// file removed while the volume is read (an error that is fs.ErrNotExist).
func (a *archiver) consistentCopy(ctx context.Context, rel, staged string) (string, error) {
	tries := a.files.Tries
	if tries <= 0 {
		tries = 3
	}
	path := filepath.Join(a.files.Source, rel)
	var last error
	for try := 1; try <= tries; try++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		removeStaged(a.staging, staged)
		last = a.snapshotSQLite(rel, staged)
		if errors.Is(last, fs.ErrNotExist) {
			removeStaged(a.staging, staged)
			return "", last
		}
		if last == nil {
			last = foldAndCheck(ctx, a.staging, filepath.Join(a.files.Staging, staged), staged)
		}
		if last == nil {
			return staged, nil
		}
		a.logger.Warn("SQLite copy failed its check", "path", path, "try", try, "of", tries, "error", last.Error())
	}
	removeStaged(a.staging, staged)
	return "", fmt.Errorf("SQLite database %s: no consistent copy after %d tries: %w", path, tries, last)
}

// snapshotSQLite copies the database, then its log, and compares the
// fingerprint taken before with the one the copy carries.
func (a *archiver) snapshotSQLite(rel, staged string) error {
	src, err := a.source.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer src.Close()
	before, err := fingerprint(a.source, rel)
	if err != nil {
		return err
	}
	stampBefore, err := stamp(a.source, rel)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(before, []byte("db:")) {
		// With no log the stamps decide (sameAcrossCopy). Many file systems
		// move a file's times once per clock tick, not per write, and some
		// keep whole seconds: a commit in the step the stamp was read in
		// would leave it as it was. Copying a step later, any write that
		// lands during the copy moves them.
		time.Sleep(stampBefore.step())
	}
	if err := copyFile(src, a.staging, staged, a.buf); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-journal"} {
		companion, err := a.source.OpenFile(rel+suffix, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", rel+suffix, err)
		}
		err = copyFile(companion, a.staging, staged+suffix, a.buf)
		companion.Close()
		if err != nil {
			return err
		}
		if suffix == "-journal" {
			if err := dropColdJournal(a.staging, staged+suffix); err != nil {
				return err
			}
		}
	}
	copied, err := fingerprint(a.staging, staged)
	if err != nil {
		return err
	}
	// The source is read again: the copy's own header was copied first, so
	// it cannot show a log reset or a commit that came later in the copy.
	after, err := fingerprint(a.source, rel)
	if err != nil {
		return err
	}
	stampAfter, err := stamp(a.source, rel)
	if err != nil {
		return err
	}
	// A database replaced by a rename during the copy: the copy is the old
	// file's, the fingerprints the new one's.
	opened, err := src.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(opened, stampAfter.info) {
		return fmt.Errorf("%s was replaced while it was copied", rel)
	}
	return sameAcrossCopy(before, copied, after, stampBefore.text, stampAfter.text)
}

// sameAcrossCopy says a copy is one moment's when the source's fingerprint
// before the copy, the copy's own and the source's after it are one: a log
// reset or truncated by a checkpoint, or a transaction committed without a
// log, during the copy changes one of them. With no log the database file
// must not have been written at all (its stamps before and after): the
// change counter misses a commit under exclusive locking, or one made in
// WAL mode by a connection that checkpointed and removed its log on close.
// With a log, the file may be written by a checkpoint: the log copied with
// it holds every page that write carried.
func sameAcrossCopy(before, copied, after []byte, stampBefore, stampAfter string) error {
	if !bytes.Equal(before, copied) || !bytes.Equal(before, after) {
		return errors.New("a writer reset the log or rewrote the database during the copy")
	}
	if bytes.HasPrefix(before, []byte("db:")) && stampBefore != stampAfter {
		return errors.New("a writer changed the database file during the copy")
	}
	return nil
}

// stampTick is longer than a kernel clock tick (4 ms at 250 Hz, 10 ms at
// 100 Hz), the step a file's times move in where they keep nanoseconds.
const stampTick = 25 * time.Millisecond

// fileStamp is a file's size and its modification and change times, to the
// nanosecond the file system keeps: a write more than a step after the
// stamp changes it.
type fileStamp struct {
	info fs.FileInfo
	text string
	// wholeSeconds: the times show no fraction of a second, as on a file
	// system keeping whole seconds (ext4 with small inodes).
	wholeSeconds bool
}

// step is how long to wait after the stamp for a write to move it: a clock
// tick, or past the next whole second.
func (s fileStamp) step() time.Duration {
	if s.wholeSeconds {
		return time.Second + stampTick
	}
	return stampTick
}

func stamp(root *os.Root, name string) (fileStamp, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return fileStamp{}, fmt.Errorf("stat %s: %w", name, err)
	}
	changed, whole := "", info.ModTime().Nanosecond() == 0
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		changed = fmt.Sprintf("%d.%09d", st.Ctim.Sec, st.Ctim.Nsec)
		whole = whole && st.Ctim.Nsec == 0
	}
	return fileStamp{info: info, text: fmt.Sprintf("%d/%d/%s", info.Size(), info.ModTime().UnixNano(), changed), wholeSeconds: whole}, nil
}

// fingerprint is what changes when a writer invalidates a copy taken across
// it: the log's checkpoint sequence and salts (bytes 12-23 of its header),
// which a log reset changes, or, with no log, the database's change counter
// (bytes 24-27), which every rollback-journal transaction bumps.
func fingerprint(root *os.Root, name string) ([]byte, error) {
	if head, err := readAt(root, name+"-wal", 12, 12); err == nil {
		return append([]byte("wal:"), head...), nil
	} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	head, err := readAt(root, name, 24, 4)
	if err != nil {
		return nil, fmt.Errorf("read the header of %s: %w", name, err)
	}
	return append([]byte("db:"), head...), nil
}

// dropColdJournal removes a copied rollback journal that SQLite would not
// roll back: empty, or with its header zeroed, as TRUNCATE and PERSIST
// modes (and DELETE under exclusive locking) leave one between
// transactions. It holds nothing of the database, and SQLite leaves such a
// file where it is, which the copy must not carry.
func dropColdJournal(staging *os.Root, journal string) error {
	first, err := readAt(staging, journal, 0, 1)
	if err == nil && first[0] != 0 {
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the copied journal %s: %w", journal, err)
	}
	if err := staging.Remove(journal); err != nil {
		return fmt.Errorf("remove the copied journal %s, which holds no transaction: %w", journal, err)
	}
	return nil
}

func readAt(root *os.Root, name string, off int64, n int) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, err
	}
	return b, nil
}

func copyFile(src *os.File, staging *os.Root, dst string, buf []byte) error {
	out, err := staging.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("stage %s: %w", dst, err)
	}
	if _, err := io.CopyBuffer(out, io.NewSectionReader(src, 0, 1<<62), buf); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src.Name(), err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("stage %s: %w", dst, err)
	}
	return nil
}

// foldAndCheck opens the staged copy, which replays a copied log or rolls
// back a copied hot journal, folds the log into the database, and runs
// integrity_check. Closing the last connection removes the -wal and -shm.
func foldAndCheck(ctx context.Context, staging *os.Root, path, staged string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	check := func() error {
		var busy, logFrames, checkpointed int
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &checkpointed); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if busy != 0 {
			return errors.New("checkpoint: the copy is busy")
		}
		return integrityOf(ctx, db)
	}
	err = check()
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the copy: %w", cerr)
	}
	if err != nil {
		return err
	}
	for _, suffix := range companionSuffixes {
		if _, err := staging.Stat(staged + suffix); err == nil {
			return fmt.Errorf("the copy kept its %s file after the checkpoint", suffix)
		}
	}
	return nil
}

func removeStaged(staging *os.Root, staged string) {
	_ = staging.Remove(staged)
	for _, suffix := range companionSuffixes {
		_ = staging.Remove(staged + suffix)
	}
}

// integrityOf runs SQLite's integrity_check on db and names up to three of
// the problems it reports.
func integrityOf(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("integrity_check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity_check: %w", err)
		}
		if line != "ok" && len(problems) < 3 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity_check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity_check: %s", strings.Join(problems, "; "))
	}
	return nil
}

// checkDatabases runs integrity_check on every SQLite database under dir.
func checkDatabases(ctx context.Context, dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path) //nolint:gosec // a file the drill restored
		if err != nil {
			return err
		}
		isDB := isSQLite(f)
		f.Close()
		if !isDB {
			return nil
		}
		n++
		if err := integrityCheck(ctx, path); err != nil {
			rel, _ := filepath.Rel(dir, path)
			return fmt.Errorf("SQLite database %s: %w", rel, err)
		}
		return nil
	})
	return n, err
}

func integrityCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&immutable=1")
	if err != nil {
		return err
	}
	defer db.Close()
	return integrityOf(ctx, db)
}
