package backup

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"

	"filippo.io/age"
)

// StoreSource reads the off-cluster copies at Destination in Store: each is
// checked against the provider's checksums as it streams in and decrypted
// with Identities, so a copy damaged or swapped at the provider is refused.
// Listing needs no identity.
type StoreSource struct {
	Store       ObjectStore
	Destination Destination
	Identities  []age.Identity
}

// List implements Source.
func (s StoreSource) List(ctx context.Context) ([]Generation, error) {
	names, err := s.Store.List(ctx, s.Destination.listPrefix())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.Destination, err)
	}
	return CopyNames(names), nil
}

// Open implements Source: the Reading yields the decrypted copy, and its
// Verify holds what was read to the provider's record.
func (s StoreSource) Open(ctx context.Context, g Generation, stage string, progress Progress) (Reading, error) {
	key := s.Destination.Key(g.Name())
	stored, err := s.Store.Stat(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	body, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", key, err)
	}
	progress.Begin("fetching, decrypting and "+stage+" "+key, stored.Size)
	verifier := newChecksumReader(progressReader{r: body, p: progress}, stored)
	plain, err := age.Decrypt(verifier, s.Identities...)
	if err != nil {
		progress.End()
		body.Close()
		return nil, fmt.Errorf("decrypt %s: %w", key, err)
	}
	return storeReading{Reader: plain, body: body, verifier: verifier, progress: progress, size: stored.Size}, nil
}

// String implements Source.
func (s StoreSource) String() string { return s.Destination.String() }

// storeReading is an off-cluster copy as a restore reads it: decrypted, and
// hashed beneath the decryption.
type storeReading struct {
	io.Reader
	body     io.Closer
	verifier *checksumReader
	progress Progress
	size     int64
}

func (s storeReading) Size() int64 { return s.size }

func (s storeReading) Verify() ([]string, error) {
	if err := s.verifier.verify(); err != nil {
		return nil, err
	}
	return []string{s.verifier.passed(), "age's authentication"}, nil
}

func (s storeReading) Close() error {
	s.progress.End()
	return s.body.Close()
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
