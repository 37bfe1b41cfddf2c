package backup

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/klauspost/pgzip"
)

// OffCluster copies a scheduled generation off the cluster once it is durable
// on the claim. A Rollback's copy stays on the claim and is never handed to it.
type OffCluster interface {
	Copy(ctx context.Context, g Generation, path string) error
}

// Job is one run: one generation of Method onto the claim at Dir, then pruning.
type Job struct {
	Dir     string
	Method  Method
	Retain  int    // scheduled generations of Method to keep, at least 1
	Request string // a Rollback's request id; "" for a scheduled run
	// OffCluster, when set, receives each scheduled generation after it is
	// durable and before anything is pruned.
	OffCluster OffCluster
	Now        func() time.Time
	Logger     *slog.Logger
	// compressionBlock and compressionBlocks bound pgzip's memory; zero takes
	// the defaults below.
	compressionBlock, compressionBlocks int
	beforeRename                        func(string) error
}

// Result is what a successful run did.
type Result struct {
	Written
	Took   time.Duration
	Pruned []string
}

// Run writes one generation and prunes. It returns an error when the
// generation is not complete and durable, or when pruning or the off-cluster
// copy failed after it was; a failed run deletes no generation.
func (j Job) Run(ctx context.Context) (Result, error) {
	if j.Method == nil || Extension(j.Method.Name()) == "" {
		return Result{}, errors.New("no known backup method")
	}
	if j.Retain < 1 {
		return Result{}, fmt.Errorf("retain %d: keep at least one generation", j.Retain)
	}
	if j.Request != "" {
		if err := ValidRequest(j.Request); err != nil {
			return Result{}, err
		}
	}
	logger := j.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := j.Now
	if now == nil {
		now = time.Now
	}
	method := j.Method.Name()

	claim, err := OpenClaim(ctx, j.Dir)
	if err != nil {
		return Result{}, err
	}
	defer claim.Close()
	claim.beforeRename = j.beforeRename
	leftovers, err := claim.CleanLeftovers(method)
	if err != nil {
		return Result{}, err
	}
	if len(leftovers) > 0 {
		logger.Info("removed the leftovers of an earlier run", "method", method, "files", leftovers)
	}

	started := now()
	g := Generation{Method: method, Time: started.UTC().Truncate(time.Second), Request: j.Request}
	written, err := claim.Write(ctx, g, j.compress)
	if err != nil {
		return Result{}, fmt.Errorf("%s generation %s: %w", method, g.Name(), err)
	}
	result := Result{Written: written, Took: now().Sub(started)}
	logger.Info("wrote a generation", "method", method, "generation", g.Name(),
		"bytes", written.Size, "seconds", result.Took.Seconds())

	if j.OffCluster != nil && g.Request == "" {
		if err := j.OffCluster.Copy(ctx, g, written.Path); err != nil {
			return result, fmt.Errorf("off-cluster copy of %s (kept on the claim): %w", g.Name(), err)
		}
	}

	names, err := claim.Names()
	if err != nil {
		return result, err
	}
	doomed := Prune(names, method, j.Retain, now(), g.Name())
	if err := claim.Remove(doomed); err != nil {
		return result, err
	}
	result.Pruned = doomed
	logger.Info("pruned", "method", method, "retain", j.Retain, "deleted", doomed)
	return result, nil
}

// compress runs the method into a parallel gzip stream: each block is
// compressed on its own core, with memory bounded by block size × blocks.
func (j Job) compress(ctx context.Context, w io.Writer) error {
	block, blocks := j.compressionBlock, j.compressionBlocks
	if block == 0 {
		block = 1 << 20
	}
	if blocks == 0 {
		blocks = 2 * runtime.GOMAXPROCS(0)
	}
	zw, err := pgzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	if err := zw.SetConcurrency(block, blocks); err != nil {
		return err
	}
	if err := j.Method.Write(ctx, zw); err != nil {
		_ = zw.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress: %w", err)
	}
	return nil
}
