package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// ClaimSource reads the generations on the claim at Dir, as a run wrote them:
// gzip's CRC is their one check. It is the Source for a restore that cannot
// or need not reach the destination, and the only one that holds Rollback
// copies.
type ClaimSource struct {
	Dir string
}

// List implements Source.
func (c ClaimSource) List(_ context.Context) ([]Generation, error) {
	entries, err := os.ReadDir(c.Dir)
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

// Open implements Source.
func (c ClaimSource) Open(_ context.Context, g Generation, stage string, progress Progress) (Reading, error) {
	f, err := os.Open(filepath.Join(c.Dir, g.Name())) //nolint:gosec // a generation name ParseName accepted, on the operator's claim
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", g.Name(), err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", g.Name(), err)
	}
	progress.Begin("reading and "+stage+" "+g.Name(), info.Size())
	return claimReading{progressReader: progressReader{r: f, p: progress}, file: f, size: info.Size()}, nil
}

// String implements Source.
func (c ClaimSource) String() string { return "the claim at " + c.Dir }

// claimReading is a generation file on the claim as a restore reads it.
type claimReading struct {
	progressReader
	file *os.File
	size int64
}

func (c claimReading) Size() int64 { return c.size }

// Verify has nothing to add: the claim keeps no checksum of its own, and
// gzip's CRC is checked by every restore.
func (claimReading) Verify() ([]string, error) { return nil, nil }

func (c claimReading) Close() error {
	c.p.End()
	return c.file.Close()
}
