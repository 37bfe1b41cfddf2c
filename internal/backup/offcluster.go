package backup

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
)

// OffClusterStaging is the folder on the claim where a generation is
// encrypted before it leaves the pod; only ciphertext is ever uploaded.
const OffClusterStaging = ".off-cluster-staging"

// CopySuffix ends every off-cluster copy's name: the generation's name, then
// the age envelope.
const CopySuffix = ".age"

// S3 limits a multipart upload to 10,000 parts of at least 5 MiB (the last
// may be smaller) and at most 5 GiB, and a single PUT to 5 GiB.
const (
	MinPartSize  = 5 << 20
	MaxPartSize  = 5 << 30
	maxPartCount = 10000
	// DefaultPartSize is the part size when BACKUP_OFF_CLUSTER_PART_MIB is unset.
	DefaultPartSize = 64 << 20
)

// Destination is where a volume's copies go: a bucket and the folder in it.
type Destination struct {
	Bucket string
	Folder string // prefix/path, no leading or trailing slash; "" is the bucket's root
}

// bucketPattern is an S3 bucket name as every provider accepts it.
var bucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// segmentPattern is one folder name of a prefix or path: no spaces, no
// characters a provider escapes differently.
var segmentPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// ParseDestination reads BACKUP_OFF_CLUSTER (s3://bucket[/prefix]) and
// BACKUP_OFF_CLUSTER_PATH into a Destination.
func ParseDestination(raw, path string) (Destination, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Destination{}, fmt.Errorf("%q is not s3://bucket[/prefix]", redacted(raw))
	}
	if !bucketPattern.MatchString(u.Host) || strings.Contains(u.Host, "..") {
		return Destination{}, fmt.Errorf("%q: %q is not a bucket name", raw, u.Host)
	}
	prefix, err := folder(u.Path)
	if err != nil {
		return Destination{}, fmt.Errorf("%q: prefix %w", raw, err)
	}
	sub, err := folder(path)
	if err != nil {
		return Destination{}, fmt.Errorf("path %q: %w", path, err)
	}
	if sub == "" {
		return Destination{}, errors.New("no path: each volume's copies need their own folder, or one volume's pruning would delete another's")
	}
	return Destination{Bucket: u.Host, Folder: strings.Trim(prefix+"/"+sub, "/")}, nil
}

// folder checks a slash-separated folder and returns it without outer slashes.
func folder(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if !segmentPattern.MatchString(seg) || seg == "." || seg == ".." {
			return "", fmt.Errorf("segment %q: use letters, digits, '.', '_' or '-'", seg)
		}
	}
	return p, nil
}

// Key is the object key of generation name's copy.
func (d Destination) Key(name string) string { return d.listPrefix() + name + CopySuffix }

// listPrefix is the prefix every copy of this volume starts with.
func (d Destination) listPrefix() string {
	if d.Folder == "" {
		return ""
	}
	return d.Folder + "/"
}

// String is the destination as BACKUP_OFF_CLUSTER spells it.
func (d Destination) String() string { return "s3://" + d.Bucket + "/" + d.Folder }

// ParseRecipient accepts only an age X25519 public key (age1…): a copy
// encrypted to anything else could not be read with the identity file the
// restore documents.
//
// The error never carries the value: age's own quotes it, and what was put
// there by mistake may be the identity that decrypts every copy.
func ParseRecipient(s string) (*age.X25519Recipient, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(strings.ToUpper(s), "AGE-SECRET-KEY-") {
		return nil, errors.New("an age identity (AGE-SECRET-KEY-…), not a recipient: name its public key (age1…), and keep the identity out of the cluster")
	}
	r, err := age.ParseX25519Recipient(s)
	if err != nil {
		return nil, errors.New("not an age X25519 public key (age1…)")
	}
	return r, nil
}

// PartPlan is how a copy of a given size travels: one PUT, or parts of
// PartSize.
type PartPlan struct {
	PartSize  int64
	Multipart bool
}

// PlanParts decides the part size for a copy of at most size bytes: the
// configured size, grown in whole MiB where 10,000 parts would not hold it.
func PlanParts(size, configured int64) (int64, error) {
	if configured < MinPartSize || configured > MaxPartSize {
		return 0, fmt.Errorf("part size %d is outside S3's %d-%d", configured, int64(MinPartSize), int64(MaxPartSize))
	}
	part := configured
	if need := (size + maxPartCount - 1) / maxPartCount; need > part {
		part = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	if part > MaxPartSize {
		return 0, fmt.Errorf("%d bytes exceed what S3 stores in one object", size)
	}
	return part, nil
}

// ciphertextBound is the largest age ciphertext a plaintext of size bytes
// becomes: a header of well under 1 KiB and 16 bytes per 64 KiB chunk.
func ciphertextBound(size int64) int64 { return size + (size/(64<<10)+1)*16 + 4096 }

// Sums are a body's digests as S3 wants them. SHA-256 alone: signed in
// x-amz-content-sha256 it is a stronger check than Content-MD5, which would
// cost a second pass over every byte.
type Sums struct {
	SHA256 []byte
}

// SHA256Hex is the x-amz-content-sha256 value.
func (s Sums) SHA256Hex() string { return hex.EncodeToString(s.SHA256) }

// SHA256Base64 is the x-amz-checksum-sha256 value.
func (s Sums) SHA256Base64() string { return base64.StdEncoding.EncodeToString(s.SHA256) }

// Part is one staged part of a copy, with its place in the staged file.
type Part struct {
	Number int
	Offset int64
	Size   int64
	Sums   Sums
}

// CompositeChecksum is the checksum S3 reports for a multipart object
// uploaded with SHA-256 part checksums: the SHA-256 of the parts' digests,
// then "-" and the part count.
func CompositeChecksum(parts []Part) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p.Sums.SHA256)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts))
}

// Stored is what the provider says it holds for a key.
type Stored struct {
	Size           int64
	ChecksumSHA256 string       // as the provider reports it: base64, "-N" for a composite
	Parts          []StoredPart // of a multipart object, in order
}

// StoredPart is one part's size and checksum as the provider reports it.
type StoredPart struct {
	Number         int
	Size           int64
	ChecksumSHA256 string
}

// VerifyStored compares what the provider holds with what was sent: the
// size, the SHA-256 checksum (the whole body's for one PUT, the composite of
// the parts' for a multipart upload) and, for multipart, every part's size
// and checksum. Any difference, or a provider that confirms no checksum,
// fails.
func VerifyStored(got Stored, size int64, whole Sums, parts []Part) error {
	if got.Size != size {
		return fmt.Errorf("the provider holds %d bytes, %d were sent", got.Size, size)
	}
	want := whole.SHA256Base64()
	if len(parts) > 0 {
		want = CompositeChecksum(parts)
	}
	switch got.ChecksumSHA256 {
	case "":
		return errors.New("the provider confirmed no SHA-256 checksum")
	case want:
	default:
		return fmt.Errorf("the provider's SHA-256 checksum is %s, %s was sent", got.ChecksumSHA256, want)
	}
	if len(parts) == 0 {
		return nil
	}
	if len(got.Parts) != len(parts) {
		return fmt.Errorf("the provider holds %d parts, %d were sent", len(got.Parts), len(parts))
	}
	for i, p := range parts {
		g := got.Parts[i]
		if g.Number != p.Number || g.Size != p.Size || g.ChecksumSHA256 != p.Sums.SHA256Base64() {
			return fmt.Errorf("part %d: the provider holds %d bytes with SHA-256 %s, %d bytes with %s were sent",
				p.Number, g.Size, g.ChecksumSHA256, p.Size, p.Sums.SHA256Base64())
		}
	}
	return nil
}

// CopyNames reads the generations out of a listing of copy names, newest
// first; names that are not copies of a generation are left out.
func CopyNames(names []string) []Generation {
	var gens []Generation
	for _, name := range names {
		stem, ok := strings.CutSuffix(name, CopySuffix)
		if !ok {
			continue
		}
		g, err := ParseName(stem)
		if err != nil || g.Name() != stem {
			continue
		}
		gens = append(gens, g)
	}
	sortNewestFirst(gens)
	return gens
}

// PruneCopies decides which copies at the destination to delete after a run
// of method: the method's scheduled copies beyond the newest retain, the
// copy of written, this run's generation, kept first as Prune keeps it.
// Names that are not copies are never chosen.
func PruneCopies(names []string, method string, retain int, now time.Time, written string) []string {
	var stems []string
	for _, g := range CopyNames(names) {
		// A Rollback's copy never goes off the cluster from here: one at
		// the destination was put there by hand, and is not the job's to
		// delete.
		if g.Request == "" {
			stems = append(stems, g.Name())
		}
	}
	doomed := Prune(stems, method, retain, now, written)
	for i := range doomed {
		doomed[i] += CopySuffix
	}
	return doomed
}

// ObjectStore is the S3 bucket the copies go to, as the off-cluster copy and
// the restore need it.
type ObjectStore interface {
	// Put stores body (size bytes, seekable for retries) under key in one
	// request, its SHA-256 signed and checked by the provider.
	Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sums Sums) error
	// StartMultipart opens a multipart upload with SHA-256 part checksums.
	StartMultipart(ctx context.Context, key string) (string, error)
	// PutPart uploads one part, its SHA-256 signed and checked.
	PutPart(ctx context.Context, key, upload string, part Part, body io.ReadSeeker) (etag string, err error)
	// CompleteMultipart joins the parts, in order, into the object.
	CompleteMultipart(ctx context.Context, key, upload string, parts []Part, etags []string) error
	// AbortMultipart drops an unfinished upload and its parts.
	AbortMultipart(ctx context.Context, key, upload string) error
	// AbortUnfinished drops every unfinished upload of a key directly under
	// prefix, and names the keys they were for.
	AbortUnfinished(ctx context.Context, prefix string) ([]string, error)
	// Stat reads back what the provider holds for key, with its checksums.
	Stat(ctx context.Context, key string) (Stored, error)
	// List names the objects directly under prefix, without the prefix.
	List(ctx context.Context, prefix string) ([]string, error)
	// Get streams the object.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Remove deletes the object.
	Remove(ctx context.Context, key string) error
}

// OffClusterCopy encrypts a generation to Recipient, uploads it to Store at
// Destination, verifies it and prunes the destination. It is the Job's
// OffCluster.
type OffClusterCopy struct {
	Store       ObjectStore
	Destination Destination
	Recipient   age.Recipient
	PartSize    int64 // configured part size; copies above it go multipart
	Retain      int
	Now         func() time.Time
	Logger      *slog.Logger
}

// Copy implements OffCluster. The claim is locked by the running Job, so the
// staging folder is this run's alone.
func (o OffClusterCopy) Copy(ctx context.Context, g Generation, path string) error {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	staging := filepath.Join(filepath.Dir(path), OffClusterStaging)
	if err := os.RemoveAll(staging); err != nil { //nolint:gosec // a fixed folder name beside the generation on the locked claim
		return fmt.Errorf("clear %s: %w", staging, err)
	}
	if err := os.MkdirAll(staging, 0o700); err != nil { //nolint:gosec // as above
		return fmt.Errorf("create %s: %w", staging, err)
	}
	defer os.RemoveAll(staging)

	// A run killed mid-upload could not abort it, and its parts stay at the
	// provider, billed; the claim's lock makes the volume's folder this
	// run's alone. A provider that cannot list them costs the copy nothing.
	if aborted, err := o.Store.AbortUnfinished(ctx, o.Destination.listPrefix()); err != nil {
		logger.Warn("could not look for unfinished uploads of earlier runs", "destination", o.Destination.String(), "error", err.Error())
	} else if len(aborted) > 0 {
		logger.Info("aborted the unfinished uploads of earlier runs", "keys", aborted)
	}

	key := o.Destination.Key(g.Name())
	// What this run stored and could not verify must not stand among the
	// verified copies: it would take a place in retention and be offered to
	// restore and to the drill as the newest. That includes an upload whose
	// answer was lost after the provider had completed the object. The key
	// names this run's generation, so no other run's copy is under it.
	removeUnverified := func(err error) error {
		removeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeUnverifiedTimeout)
		defer cancel()
		if rmErr := o.Store.Remove(removeCtx, key); rmErr != nil {
			return fmt.Errorf("%w; removing the unverified copy failed too: %w", err, rmErr)
		}
		return err
	}
	sent, err := o.upload(ctx, path, filepath.Join(staging, g.Name()+CopySuffix), key)
	if errors.As(err, new(mayBeStored)) {
		return removeUnverified(err)
	}
	if err != nil {
		return err
	}
	if err := o.readBack(ctx, key, sent); err != nil {
		return removeUnverified(err)
	}
	logger.Info("copied the generation off the cluster", "generation", g.Name(), "destination", o.Destination.String(),
		"key", key, "bytes", sent.size, "parts", len(sent.parts), "seconds", now().Sub(started).Seconds())

	names, err := o.Store.List(ctx, o.Destination.listPrefix())
	if err != nil {
		return fmt.Errorf("list %s: %w", o.Destination, err)
	}
	doomed := PruneCopies(names, g.Method, o.Retain, now(), g.Name())
	for _, name := range doomed {
		if err := o.Store.Remove(ctx, o.Destination.listPrefix()+name); err != nil {
			return fmt.Errorf("prune %s: %w", name, err)
		}
	}
	logger.Info("pruned the off-cluster copies", "method", g.Method, "retain", o.Retain, "deleted", doomed)
	return nil
}

// removeUnverifiedTimeout bounds the removal of a copy that failed its
// read-back, which runs even when the run's own context has ended.
const removeUnverifiedTimeout = 30 * time.Second

// readBack holds what the provider stored under key to what was sent.
func (o OffClusterCopy) readBack(ctx context.Context, key string, sent sentCopy) error {
	got, err := o.Store.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("read back %s: %w", key, err)
	}
	if err := VerifyStored(got, sent.size, sent.whole, sent.parts); err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	return nil
}
