package backup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"filippo.io/age"
)

// sentCopy is what an upload sent, to hold the provider's record to.
type sentCopy struct {
	size  int64
	whole Sums
	parts []Part // nil for a single PUT
}

// upload encrypts the generation at path into staged and uploads it as it
// grows: each part leaves as soon as it is staged and hashed, so encryption
// and upload overlap and neither holds more than a part's bookkeeping in
// memory.
func (o OffClusterCopy) upload(ctx context.Context, path, staged, key string) (sentCopy, error) {
	src, err := os.Open(path) //nolint:gosec // the generation this run just wrote
	if err != nil {
		return sentCopy{}, fmt.Errorf("open the generation: %w", err)
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return sentCopy{}, err
	}
	partSize, err := PlanParts(ciphertextBound(info.Size()), o.PartSize)
	if err != nil {
		return sentCopy{}, err
	}
	out, err := os.OpenFile(staged, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // inside the run's staging folder
	if err != nil {
		return sentCopy{}, fmt.Errorf("stage the copy: %w", err)
	}
	defer out.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan stagedPart, 4)
	staging := make(chan error, 1)
	splitter := newPartSplitter(out, partSize, ready)
	go func() {
		defer close(ready)
		staging <- encryptInto(ctx, splitter, src, o.Recipient)
	}()

	sent, uploadErr := o.sendParts(ctx, out, key, ready, splitter)
	if uploadErr != nil {
		cancel()
		for range ready { //nolint:revive // drain so the encrypting goroutine ends
		}
	}
	encryptErr := <-staging
	switch {
	case uploadErr != nil && (encryptErr == nil || errors.Is(encryptErr, context.Canceled)):
		// The upload's failure stopped the encryption, not the other way round.
		return sentCopy{}, uploadErr
	case encryptErr != nil:
		return sentCopy{}, fmt.Errorf("encrypt the generation: %w", encryptErr)
	}
	return sent, nil
}

// encryptInto streams src through age into w, which stages and hashes it.
func encryptInto(ctx context.Context, w *partSplitter, src io.Reader, recipient age.Recipient) error {
	enc, err := age.Encrypt(w, recipient)
	if err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := enc.Write(buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return w.finish()
}

// sendParts uploads the parts the splitter hands over. A copy that ends
// within its first part goes as one PUT; anything longer is a multipart
// upload, aborted on any failure so no half-upload is left to bill.
func (o OffClusterCopy) sendParts(ctx context.Context, staged *os.File, key string, ready <-chan stagedPart, splitter *partSplitter) (sentCopy, error) {
	var (
		parts   []Part
		etags   []string
		upload  string
		mu      sync.Mutex
		failed  error
		wg      sync.WaitGroup
		flights = make(chan struct{}, uploadsInFlight)
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		mu.Unlock()
	}
	firstFailure := func() error {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
	abort := func(err error) (sentCopy, error) {
		wg.Wait()
		if upload != "" {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			if aerr := o.Store.AbortMultipart(actx, key, upload); aerr != nil {
				// Its parts stay at the provider, billed, until aborted
				// there: the error says which upload.
				err = errors.Join(err, fmt.Errorf("abort the multipart upload %s of %s: %w", upload, key, aerr))
			}
			cancel()
		}
		return sentCopy{}, err
	}
	for p := range ready {
		if p.Number == 1 && p.last {
			// The whole copy is this one part: one PUT.
			if err := o.Store.Put(ctx, key, io.NewSectionReader(staged, 0, p.Size), p.Size, p.Sums); err != nil {
				return sentCopy{}, mayBeStored{fmt.Errorf("upload %s: %w", key, err)}
			}
			return sentCopy{size: p.Size, whole: p.Sums}, nil
		}
		if err := firstFailure(); err != nil {
			return abort(err)
		}
		if p.Size == 0 { // the copy ended exactly on a part boundary
			continue
		}
		if upload == "" {
			id, err := o.Store.StartMultipart(ctx, key)
			if err != nil {
				return sentCopy{}, fmt.Errorf("start the upload of %s: %w", key, err)
			}
			upload = id
		}
		mu.Lock()
		parts = append(parts, p.Part)
		etags = append(etags, "")
		mu.Unlock()
		flights <- struct{}{}
		wg.Add(1)
		go func(p Part) {
			defer func() { <-flights; wg.Done() }()
			etag, err := o.Store.PutPart(ctx, key, upload, p, io.NewSectionReader(staged, p.Offset, p.Size))
			if err != nil {
				fail(fmt.Errorf("upload part %d of %s: %w", p.Number, key, err))
				return
			}
			mu.Lock()
			etags[p.Number-1] = etag
			mu.Unlock()
		}(p.Part)
	}
	wg.Wait()
	if err := firstFailure(); err != nil {
		return abort(err)
	}
	if err := ctx.Err(); err != nil {
		return abort(err)
	}
	if !splitter.finished {
		return abort(errors.New("the copy was not staged whole"))
	}
	if err := o.Store.CompleteMultipart(ctx, key, upload, parts, etags); err != nil {
		return abort(mayBeStored{fmt.Errorf("complete the upload of %s: %w", key, err)})
	}
	return sentCopy{size: splitter.offset + splitter.filled, parts: parts}, nil
}

// mayBeStored marks an upload that failed at the request that stores the
// object (the PUT, or the multipart's completion): the provider may have
// carried it out though its answer never came back.
type mayBeStored struct{ error }

func (m mayBeStored) Unwrap() error { return m.error }

// uploadsInFlight is how many parts upload at once: enough to keep the link
// busy while a part's request is answered, each read from the staged file
// rather than held in memory.
const uploadsInFlight = 3

// partSplitter writes the ciphertext to the staged file and hands over each
// part, with its digests, as soon as it is complete.
type partSplitter struct {
	out      *os.File
	partSize int64
	ready    chan<- stagedPart

	partSHA        hash.Hash
	number         int
	offset, filled int64
	// finished is set before the last part is sent, so a receiver that has
	// the last part reads it safely.
	finished bool
}

// stagedPart is a part handed from the splitter to the uploader; last marks
// the final one, which may be empty when the copy ends on a part boundary.
type stagedPart struct {
	Part
	last bool
}

func newPartSplitter(out *os.File, partSize int64, ready chan<- stagedPart) *partSplitter {
	return &partSplitter{
		out: out, partSize: partSize, ready: ready,
		partSHA: sha256.New(),
		number:  1,
	}
}

func (s *partSplitter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		room := s.partSize - s.filled
		chunk := p[:min(int64(len(p)), room)]
		if _, err := s.out.Write(chunk); err != nil {
			return written, fmt.Errorf("stage the copy: %w", err)
		}
		s.partSHA.Write(chunk)
		s.filled += int64(len(chunk))
		written += len(chunk)
		p = p[len(chunk):]
		if s.filled == s.partSize {
			s.emit(false)
		}
	}
	return written, nil
}

// emit hands the current part over and starts the next.
func (s *partSplitter) emit(last bool) {
	s.ready <- stagedPart{last: last, Part: Part{Number: s.number, Offset: s.offset, Size: s.filled,
		Sums: Sums{SHA256: s.partSHA.Sum(nil)}}}
	s.number++
	s.offset += s.filled
	s.filled = 0
	s.partSHA.Reset()
}

// finish hands over the last part (possibly empty) and marks the copy whole.
func (s *partSplitter) finish() error {
	if err := s.out.Sync(); err != nil {
		return fmt.Errorf("stage the copy: %w", err)
	}
	s.finished = true
	s.emit(true)
	return nil
}
