package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"filippo.io/age"
	"golang.org/x/sys/unix"
)

// Restorer reads generations back: from the off-cluster destination when
// Store is set (each copy verified against the provider's checksums and
// decrypted with Identities), else from the claim at ClaimDir.
type Restorer struct {
	Store       ObjectStore
	Destination Destination
	Identities  []age.Identity
	ClaimDir    string
	// Now is the drill's clock; time.Now when nil.
	Now func() time.Time
	// Progress hears each stage as it goes; nil hears nothing.
	Progress Progress
}

// List names the generations there, newest first. Rollback copies on the
// claim are listed too; they never go off the cluster.
func (r Restorer) List(ctx context.Context) ([]Generation, error) {
	if r.Store != nil {
		names, err := r.Store.List(ctx, r.Destination.listPrefix())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", r.Destination, err)
		}
		return CopyNames(names), nil
	}
	entries, err := os.ReadDir(r.ClaimDir)
	if err != nil {
		return nil, fmt.Errorf("list the backup claim: %w", err)
	}
	var gens []Generation
	for _, e := range entries {
		if g, err := ParseName(e.Name()); err == nil && g.Name() == e.Name() && e.Type().IsRegular() {
			gens = append(gens, g)
		}
	}
	sortNewestFirst(gens)
	return gens, nil
}

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

// Restore reads generation g and writes it under target: a files archive is
// unpacked into target (which must be empty or absent), a dump or the
// definitions become one file in target. Nothing appears in target unless
// the whole generation was read, verified and decrypted.
func (r Restorer) Restore(ctx context.Context, g Generation, target string) (Restored, error) {
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
	err = r.read(ctx, g, &result, func(plain io.Reader) error {
		if g.Method == "files" {
			n, err := unpack(ctx, plain, work)
			result.Files = n
			return err
		}
		return writeFile(plain, filepath.Join(work, strings.TrimSuffix(g.Name(), ".gz")))
	})
	if err != nil {
		return Restored{}, err
	}
	if g.Method == "files" {
		if err := moveInto(work, target); err != nil {
			return Restored{}, err
		}
		result.Path = target
		result.Checks = append(result.Checks, "the archive reads whole")
		return result, nil
	}
	name := strings.TrimSuffix(g.Name(), ".gz")
	result.Path = filepath.Join(target, name)
	// A link, not a rename: it fails where the name is taken, so a file
	// already in target (a hand-edited dump, say) is never replaced.
	if err := os.Link(filepath.Join(work, name), result.Path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Restored{}, fmt.Errorf("%s already exists in %s; a restore overwrites nothing", name, target)
		}
		return Restored{}, fmt.Errorf("publish %s: %w", name, err)
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

// read opens generation g, verifies and decrypts it, and hands the
// decompressed bytes to consume. It fails unless every byte was read and
// matched the provider's checksums, the age authentication and gzip's CRC;
// it records the generation's size and those checks in result.
func (r Restorer) read(ctx context.Context, g Generation, result *Restored, consume func(io.Reader) error) error {
	progress := r.progress()
	unpacking := "unpacking"
	if g.Method != "files" {
		unpacking = "writing"
	}
	var raw io.Reader
	var verifier *checksumReader
	if r.Store != nil {
		key := r.Destination.Key(g.Name())
		stored, err := r.Store.Stat(ctx, key)
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		body, err := r.Store.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("fetch %s: %w", key, err)
		}
		defer body.Close()
		result.Size = stored.Size
		progress.Begin("fetching, decrypting and "+unpacking+" "+key, stored.Size)
		defer progress.End()
		verifier = newChecksumReader(progressReader{r: body, p: progress}, stored)
		plain, err := age.Decrypt(verifier, r.Identities...)
		if err != nil {
			return fmt.Errorf("decrypt %s: %w", key, err)
		}
		raw = plain
	} else {
		f, err := os.Open(filepath.Join(r.ClaimDir, g.Name())) //nolint:gosec // a generation name ParseName accepted, on the operator's claim
		if err != nil {
			return fmt.Errorf("open %s: %w", g.Name(), err)
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return fmt.Errorf("open %s: %w", g.Name(), err)
		}
		result.Size = info.Size()
		progress.Begin("reading and "+unpacking+" "+g.Name(), info.Size())
		defer progress.End()
		raw = progressReader{r: f, p: progress}
	}
	zr, err := gzip.NewReader(raw)
	if err != nil {
		return fmt.Errorf("%s is not gzip: %w", g.Name(), err)
	}
	if err := consume(zr); err != nil {
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	// Read to the very end, so gzip's CRC, age's last chunk and the
	// provider's checksums are all checked, whatever the consumer left.
	if _, err := io.Copy(io.Discard, zr); err != nil { //nolint:gosec // discarded, so no size is too large
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return fmt.Errorf("%s: %w", g.Name(), err)
	}
	if verifier != nil {
		if err := verifier.verify(); err != nil {
			return err
		}
		result.Checks = append(result.Checks, verifier.passed(), "age's authentication")
	}
	result.Checks = append(result.Checks, "gzip's CRC")
	return nil
}

// checksumReader hashes an object as it is read, part by part where the
// provider stored parts, and compares with what the provider recorded.
type checksumReader struct {
	r       io.Reader
	stored  Stored
	whole   hash.Hash
	part    hash.Hash
	index   int   // part being read
	inPart  int64 // bytes of it read
	read    int64
	partSum [][]byte
	eof     bool
}

func newChecksumReader(r io.Reader, stored Stored) *checksumReader {
	return &checksumReader{r: r, stored: stored, whole: sha256.New(), part: sha256.New()}
}

func (c *checksumReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.consume(p[:n])
	if errors.Is(err, io.EOF) {
		c.eof = true
		if verr := c.verify(); verr != nil {
			return n, verr
		}
	}
	return n, err
}

func (c *checksumReader) consume(b []byte) {
	c.read += int64(len(b))
	c.whole.Write(b)
	for len(b) > 0 && c.index < len(c.stored.Parts) {
		room := c.stored.Parts[c.index].Size - c.inPart
		chunk := b[:min(int64(len(b)), room)]
		c.part.Write(chunk)
		c.inPart += int64(len(chunk))
		b = b[len(chunk):]
		if c.inPart == c.stored.Parts[c.index].Size {
			c.partSum = append(c.partSum, c.part.Sum(nil))
			c.part.Reset()
			c.inPart = 0
			c.index++
		}
	}
}

// passed names the checksums verify compared.
func (c *checksumReader) passed() string {
	if len(c.stored.Parts) == 0 {
		return "the provider's SHA-256 checksum"
	}
	return "the provider's SHA-256 checksums of " + count(len(c.stored.Parts), "part")
}

func (c *checksumReader) verify() error {
	if !c.eof {
		return errors.New("the copy was not read to its end")
	}
	if c.read != c.stored.Size {
		return fmt.Errorf("read %d bytes, the provider records %d", c.read, c.stored.Size)
	}
	if len(c.stored.Parts) == 0 {
		if got := base64.StdEncoding.EncodeToString(c.whole.Sum(nil)); got != c.stored.ChecksumSHA256 {
			return fmt.Errorf("the copy's SHA-256 is %s, the provider records %q", got, c.stored.ChecksumSHA256)
		}
		return nil
	}
	parts := make([]Part, len(c.partSum))
	for i, sum := range c.partSum {
		parts[i] = Part{Number: c.stored.Parts[i].Number, Size: c.stored.Parts[i].Size, Sums: Sums{SHA256: sum}}
	}
	return VerifyStored(c.stored, c.read, Sums{}, parts)
}

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

// Drill restores the newest off-cluster copy into scratch and checks it:
// the archive reads whole, every SQLite database in it passes
// integrity_check, a dump or the definitions parse. scratch is emptied after.
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
	switch g.Method {
	case "files":
		n, err := checkDatabases(ctx, work)
		restored.Databases = n
		if err != nil {
			return restored, fmt.Errorf("%s: %w", g.Name(), err)
		}
		if n > 0 {
			restored.Checks = append(restored.Checks, "integrity_check of "+count(n, "SQLite database"))
		}
	case "postgres":
		if err := checkFile(restored.Path, CheckDump); err != nil {
			return restored, fmt.Errorf("%s: %w", g.Name(), err)
		}
		restored.Checks = append(restored.Checks, "pg_dumpall's banners and every COPY block ending")
	case "rabbitmq":
		if err := checkFile(restored.Path, func(r io.Reader) error {
			body, err := io.ReadAll(io.LimitReader(r, maxDefinitions+1))
			if err != nil {
				return err
			}
			_, err = ParseDefinitions(body)
			return err
		}); err != nil {
			return restored, fmt.Errorf("%s: %w", g.Name(), err)
		}
		restored.Checks = append(restored.Checks, "the definitions parse")
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

// Lines pg_dumpall writes first and last; a dump without both was cut short.
var (
	dumpHead = []byte("-- PostgreSQL database cluster dump")
	dumpTail = []byte("-- PostgreSQL database cluster dump complete")
)

// CheckDump checks that r holds a whole plain pg_dumpall: its opening and
// closing banners, and every COPY … FROM stdin block ended by "\.". Lines of
// any length are read in bounded memory.
func CheckDump(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var sawHead, inCopy bool
	var last []byte
	lineNo := 0
	for {
		line, more, err := readLineStart(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		lineNo++
		trimmed := bytes.TrimRight(line, "\r")
		switch {
		case inCopy:
			if !more && bytes.Equal(trimmed, []byte(`\.`)) {
				inCopy = false
			}
		case !sawHead:
			if bytes.Equal(trimmed, dumpHead) {
				sawHead = true
			} else if len(bytes.TrimSpace(trimmed)) > 0 && !bytes.HasPrefix(trimmed, []byte("--")) {
				return fmt.Errorf("line %d: a statement before the pg_dumpall banner", lineNo)
			}
		case bytes.HasPrefix(trimmed, []byte("COPY ")) && !more && bytes.HasSuffix(trimmed, []byte(" FROM stdin;")):
			inCopy = true
		}
		// pg_dumpall frames its banners with bare "--" lines.
		if t := bytes.TrimSpace(trimmed); len(t) > 0 && !bytes.Equal(t, []byte("--")) {
			last = append(last[:0], trimmed...)
		}
	}
	switch {
	case !sawHead:
		return errors.New("not a pg_dumpall dump: no banner")
	case inCopy:
		return errors.New(`the dump ends inside a COPY block`)
	case !bytes.Equal(last, dumpTail):
		return errors.New("the dump was cut short: no closing banner")
	}
	return nil
}

// readLineStart returns the first 4 KiB of the next line and whether the
// line went on beyond them; the rest of a long line is skipped.
func readLineStart(br *bufio.Reader) ([]byte, bool, error) {
	const keep = 4 << 10
	var start []byte
	more := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (len(start) > 0 || more) {
				return start, more, nil
			}
			return nil, false, err
		}
		if room := keep - len(start); room > 0 {
			start = append(start, chunk[:min(len(chunk), room)]...)
			if len(chunk) > room {
				more = true
			}
		} else if len(chunk) > 0 {
			more = true
		}
		if !isPrefix {
			return start, more, nil
		}
	}
}
