package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// sqliteHeader opens every SQLite 3 database file; it, not the file's name,
// tells a database apart.
var sqliteHeader = []byte("SQLite format 3\x00")

// companionSuffixes are the files SQLite keeps beside a database. The archive
// holds the folded one-file copy instead, so they are never archived.
var companionSuffixes = []string{"-wal", "-shm", "-journal"}

// archiver writes the tar stream of one Files run, entry by entry, and
// counts what it archived and left out for the run's log.
type archiver struct {
	files                                 Files
	source, staging                       *os.Root
	logger                                *slog.Logger
	tw                                    *tar.Writer
	buf                                   []byte
	regular, databases, links, skipped, n int
}

func (a *archiver) add(ctx context.Context, rel string, d fs.DirEntry) error {
	if rel == "." {
		return nil
	}
	path := filepath.Join(a.files.Source, rel)
	info, err := d.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return a.vanished(rel)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	switch mode := info.Mode(); {
	case mode.IsDir():
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = rel + "/"
		return a.header(hdr)
	case mode&fs.ModeSymlink != 0:
		target, err := a.source.Readlink(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return a.vanished(rel)
		}
		if err != nil {
			return fmt.Errorf("read link %s: %w", path, err)
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		hdr.Name = rel
		a.links++
		return a.header(hdr)
	case mode.IsRegular():
		return a.regularFile(ctx, rel)
	default:
		a.skipped++
		a.logger.Warn("skipped a special file", "path", rel, "type", mode.Type().String())
		return nil
	}
}

// vanished leaves out a file removed between the walk listing it and its
// being read (a rollback journal at the end of a write, a log rotated away):
// it is no longer part of the volume, and one such file does not cost the
// volume its backup.
func (a *archiver) vanished(rel string) error {
	a.skipped++
	a.logger.Warn("left out a file removed while the volume was read", "path", rel)
	return nil
}

func (a *archiver) header(hdr *tar.Header) error {
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %s: %w", hdr.Name, err)
	}
	return nil
}

func (a *archiver) regularFile(ctx context.Context, rel string) error {
	if companion(a.source, rel) {
		return nil
	}
	path := filepath.Join(a.files.Source, rel)
	// O_NOFOLLOW: a file swapped for a symlink since the walk saw it is
	// refused rather than followed.
	src, err := a.source.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0) //nolint:gosec // reading every file of the volume is the method's job
	if errors.Is(err, fs.ErrNotExist) {
		return a.vanished(rel)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		a.skipped++
		a.logger.Warn("skipped a file that changed type while read", "path", rel)
		return nil
	}
	hdr, err := tar.FileInfoHeader(info, "")
	if err != nil {
		return err
	}
	hdr.Name = rel

	if isSQLite(src) {
		a.n++
		staged, err := a.consistentCopy(ctx, rel, fmt.Sprintf("%d.db", a.n))
		if errors.Is(err, fs.ErrNotExist) {
			return a.vanished(rel)
		}
		if err != nil {
			return err
		}
		defer removeStaged(a.staging, staged)
		copied, err := a.staging.Open(staged)
		if err != nil {
			return err
		}
		defer copied.Close()
		st, err := copied.Stat()
		if err != nil {
			return err
		}
		hdr.Size = st.Size()
		a.databases++
		return a.body(hdr, copied, rel)
	}
	a.regular++
	return a.body(hdr, src, rel)
}

// body writes hdr and exactly hdr.Size bytes of r. A file that shrank while
// read is padded with zeros and logged, as GNU tar does, so one busy file
// does not cost the whole volume its backup; one that grew is cut at the
// size the header promised, and logged too.
func (a *archiver) body(hdr *tar.Header, r io.Reader, rel string) error {
	if err := a.header(hdr); err != nil {
		return err
	}
	n, err := io.CopyBuffer(a.tw, io.LimitReader(r, hdr.Size), a.buf)
	if err != nil {
		return fmt.Errorf("archive %s: %w", rel, err)
	}
	if n == hdr.Size {
		if more, _ := r.Read(make([]byte, 1)); more > 0 {
			a.logger.Warn("a file grew while it was read; cut at the size it had when listed", "path", rel, "size", hdr.Size)
		}
	}
	if n < hdr.Size {
		a.logger.Warn("a file shrank while it was read; padded with zeros", "path", rel, "expected", hdr.Size, "read", n)
		if _, err := io.CopyBuffer(a.tw, io.LimitReader(zeros{}, hdr.Size-n), a.buf); err != nil {
			return fmt.Errorf("archive %s: %w", rel, err)
		}
	}
	return nil
}

// companion reports whether path is a -wal, -shm or -journal file beside a
// SQLite database.
func companion(root *os.Root, rel string) bool {
	for _, suffix := range companionSuffixes {
		base, ok := strings.CutSuffix(rel, suffix)
		if !ok {
			continue
		}
		f, err := root.OpenFile(base, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		return isSQLite(f)
	}
	return false
}

func isSQLite(f *os.File) bool {
	head := make([]byte, len(sqliteHeader))
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return n == len(head) && bytes.Equal(head, sqliteHeader)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
