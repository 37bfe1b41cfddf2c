package backup

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// unpack extracts a tar stream into dir, refusing any entry that would leave
// it, and returns the number of regular files.
func unpack(ctx context.Context, r io.Reader, dir string) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	buf := make([]byte, 1<<20)
	files := 0
	// A folder takes its archived mode and times once everything in it is
	// written: a read-only folder would refuse its own entries otherwise.
	var folders []*tar.Header
	for {
		if err := ctx.Err(); err != nil {
			return files, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			for i := len(folders) - 1; i >= 0; i-- {
				if err := keepAttributes(root, folders[i]); err != nil {
					return files, err
				}
			}
			return files, nil
		}
		if err != nil {
			return files, fmt.Errorf("read the archive: %w", err)
		}
		name := filepath.Clean(strings.TrimSuffix(hdr.Name, "/"))
		if !filepath.IsLocal(name) {
			return files, fmt.Errorf("archive entry %q leaves the target", hdr.Name)
		}
		if parent := filepath.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return files, fmt.Errorf("create %s: %w", parent, err)
			}
		}
		mode := hdr.FileInfo().Mode().Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return files, fmt.Errorf("create %s: %w", name, err)
			}
			folders = append(folders, hdr)
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return files, fmt.Errorf("link %s: %w", name, err)
			}
			if err := keepOwner(root, name, hdr); err != nil {
				return files, err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return files, fmt.Errorf("create %s: %w", name, err)
			}
			// A restore writes back what the backup archived, whatever its size.
			_, err = io.CopyBuffer(f, tr, buf) //nolint:gosec // our own authenticated archive
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return files, fmt.Errorf("write %s: %w", name, err)
			}
			files++
			if err := keepAttributes(root, hdr); err != nil {
				return files, err
			}
		default:
			return files, fmt.Errorf("archive entry %q has type %q, which the backup never writes", hdr.Name, string(hdr.Typeflag))
		}
	}
}

// publish renames src to dst, never over a name already at dst. Moving a
// folder to another parent rewrites its "..", which takes write permission
// on the folder itself unless run as root; a read-only folder is made
// writable for the move and given its mode back after.
// moved says whether src is at dst, whatever the error.
func publish(src, dst string) (moved bool, err error) {
	info, err := os.Lstat(src)
	if err != nil {
		return false, err
	}
	mode := info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if !info.IsDir() || mode&0o200 != 0 {
		err := renameNoReplace(src, dst)
		return err == nil, err
	}
	if err := os.Chmod(src, mode|0o200); err != nil { //nolint:gosec // the owner's write bit, for the move alone
		return false, err
	}
	if err := renameNoReplace(src, dst); err != nil {
		return false, errors.Join(err, os.Chmod(src, mode))
	}
	return true, os.Chmod(dst, mode)
}

// renameNoReplace renames src to dst unless a name is at dst, in one step
// where the file system can (renameat2 with RENAME_NOREPLACE), so a file
// another process creates at dst after the restore looked is never
// replaced. A file system without that flag is looked at first.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, lerr := os.Lstat(dst); lerr == nil {
			err = unix.EEXIST
		} else {
			return os.Rename(src, dst)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// keepAttributes gives an unpacked file or folder the owner, mode and
// modification time the archive holds: the mode whole (setgid, sticky and
// all, whatever the umask), the owner when the restore runs as root, as only
// root may give a file away.
func keepAttributes(root *os.Root, hdr *tar.Header) error {
	name := filepath.Clean(strings.TrimSuffix(hdr.Name, "/"))
	if err := keepOwner(root, name, hdr); err != nil {
		return err
	}
	// After the owner: changing it clears the setuid and setgid bits.
	m := hdr.FileInfo().Mode()
	if err := root.Chmod(name, m&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return fmt.Errorf("set the mode of %s: %w", name, err)
	}
	if err := root.Chtimes(name, hdr.ModTime, hdr.ModTime); err != nil {
		return fmt.Errorf("set the times of %s: %w", name, err)
	}
	return nil
}

func keepOwner(root *os.Root, name string, hdr *tar.Header) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("set the owner of %s: %w", name, err)
	}
	return nil
}

// moveInto moves what work holds into target, refusing to overwrite. When
// an entry cannot be published, those already published go back into work,
// so target never holds part of a generation.
func moveInto(work, target string) error {
	entries, err := os.ReadDir(work)
	if err != nil {
		return err
	}
	for _, e := range entries {
		dst := filepath.Join(target, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("%s already exists; restore into an empty folder", dst)
		}
	}
	for i, e := range entries {
		if beforePublish != nil {
			beforePublish(e.Name())
		}
		moved, err := publish(filepath.Join(work, e.Name()), filepath.Join(target, e.Name()))
		if err == nil {
			continue
		}
		err = fmt.Errorf("publish %s: %w", e.Name(), err)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w; restore into a folder nothing else writes to", err)
		}
		published := entries[:i]
		if moved {
			published = entries[:i+1]
		}
		for _, done := range published {
			if _, uerr := publish(filepath.Join(target, done.Name()), filepath.Join(work, done.Name())); uerr != nil {
				err = errors.Join(err, fmt.Errorf("take %s back out of %s: %w", done.Name(), target, uerr))
			}
		}
		return err
	}
	return nil
}

// beforePublish, when set by a test, runs before each entry is published.
var beforePublish func(name string)
