package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
)

// misreported is a store that reads back one byte more than it holds.
type misreported struct{ ObjectStore }

func (m misreported) Stat(ctx context.Context, key string) (Stored, error) {
	got, err := m.ObjectStore.Stat(ctx, key)
	got.Size++
	return got, err
}

// A copy that does not read back as it was sent fails the run and is
// removed, so it never takes a place among the verified copies.
func TestAnUnverifiedCopyIsRemoved(t *testing.T) {
	f := newFixture(t)
	source := t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha")})
	claim := t.TempDir()
	first, err := copyJob(claim, source, 2, 0, f.copier(t, f.store(t, ""), 2, MinPartSize)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	verified := f.keys(t)
	_, err = copyJob(claim, source, 2, 1, f.copier(t, misreported{f.store(t, "")}, 2, MinPartSize)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("want the run to fail its read-back, got %v", err)
	}
	if got := f.keys(t); !slices.Equal(got, verified) {
		t.Fatalf("the destination holds %q, want the verified copy %q alone", got, verified)
	}
	if !slices.Equal(verified, []string{testDestination.Key(first.Generation.Name())}) {
		t.Fatalf("verified copies %q", verified)
	}
}

// lostAnswer is a store that completes every upload and loses the answer,
// as a connection cut after the provider joined the parts does.
type lostAnswer struct{ ObjectStore }

var errAnswerLost = errors.New("connection reset by peer")

func (l lostAnswer) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sums Sums) error {
	if err := l.ObjectStore.Put(ctx, key, body, size, sums); err != nil {
		return err
	}
	return errAnswerLost
}

func (l lostAnswer) CompleteMultipart(ctx context.Context, key, upload string, parts []Part, etags []string) error {
	if err := l.ObjectStore.CompleteMultipart(ctx, key, upload, parts, etags); err != nil {
		return err
	}
	return errAnswerLost
}

// An upload whose answer was lost fails the run, and what the provider may
// have stored under its key is removed: it was never read back.
func TestACopyWhoseUploadAnswerWasLostIsRemoved(t *testing.T) {
	f := newFixture(t)
	source := t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha")})
	claim := t.TempDir()
	if _, err := copyJob(claim, source, 2, 0, f.copier(t, f.store(t, ""), 2, MinPartSize)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	verified := f.keys(t)
	for i, multipart := range []bool{false, true} {
		if multipart {
			big := make([]byte, 2*MinPartSize) // random: it does not compress
			if _, err := rand.Read(big); err != nil {
				t.Fatal(err)
			}
			writeSource(t, source, map[string][]byte{"big.bin": big})
		}
		_, err := copyJob(claim, source, 2, i+1, f.copier(t, lostAnswer{f.store(t, "")}, 2, MinPartSize)).Run(context.Background())
		if !errors.Is(err, errAnswerLost) {
			t.Fatalf("multipart %v: want the lost answer, got %v", multipart, err)
		}
		if got := f.keys(t); !slices.Equal(got, verified) {
			t.Fatalf("multipart %v: the destination holds %q, want the verified copy %q alone", multipart, got, verified)
		}
	}
}

// refusing is a store that refuses every upload, as one does to a wrong key.
type refusing struct{ ObjectStore }

var errAccessDenied = errors.New("AccessDenied: the key is not allowed to write")

func (refusing) StartMultipart(context.Context, string) (string, error) { return "", errAccessDenied }

func (refusing) AbortUnfinished(context.Context, string) ([]string, error) {
	return nil, errAccessDenied
}

// An upload refused while the encryption is still running names the
// refusal, not the encryption it stopped.
func TestARefusedMultipartUploadNamesTheRefusal(t *testing.T) {
	dir := t.TempDir()
	g := Generation{Method: "files", Time: time.Date(2026, 10, 26, 2, 45, 0, 0, time.UTC)}
	path := filepath.Join(dir, g.Name())
	body := make([]byte, 12*MinPartSize) // more parts than the staging queue holds
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	copier := OffClusterCopy{Store: refusing{}, Destination: testDestination, Recipient: id.Recipient(), PartSize: MinPartSize, Retain: 1}
	err = copier.Copy(context.Background(), g, path)
	if !errors.Is(err, errAccessDenied) {
		t.Fatalf("Copy = %v, want the store's refusal", err)
	}
}

// partsFail is a store whose every part after the first fails, as a
// provider that went away mid-upload; abortErr, when set, is what aborting
// the upload meets.
type partsFail struct {
	ObjectStore
	parts    atomic.Int32
	abortErr error
}

func (p *partsFail) PutPart(ctx context.Context, key, upload string, part Part, body io.ReadSeeker) (string, error) {
	if p.parts.Add(1) > 1 {
		return "", errors.New("the endpoint went away")
	}
	return p.ObjectStore.PutPart(ctx, key, upload, part, body)
}

func (p *partsFail) AbortMultipart(ctx context.Context, key, upload string) error {
	if p.abortErr != nil {
		return p.abortErr
	}
	return p.ObjectStore.AbortMultipart(ctx, key, upload)
}

// A multipart upload that fails is aborted, so no part of it stays at the
// provider; when the abort fails too, the run's error names the upload left.
func TestAFailedMultipartUploadIsAborted(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	g := Generation{Method: "files", Time: time.Date(2026, 10, 26, 2, 45, 0, 0, time.UTC)}
	path := filepath.Join(dir, g.Name())
	body := make([]byte, 3*MinPartSize)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	incomplete := func() int {
		n := 0
		for u := range f.admin.ListIncompleteUploads(context.Background(), f.bucket, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			n++
		}
		return n
	}
	copier := OffClusterCopy{Store: &partsFail{ObjectStore: f.store(t, "")}, Destination: testDestination,
		Recipient: f.identity.Recipient(), PartSize: MinPartSize, Retain: 1}
	if err := copier.Copy(context.Background(), g, path); err == nil || !strings.Contains(err.Error(), "went away") {
		t.Fatalf("Copy = %v", err)
	}
	if n := incomplete(); n != 0 {
		t.Fatalf("%d unfinished uploads left at the provider", n)
	}
	copier.Store = &partsFail{ObjectStore: f.store(t, ""), abortErr: errors.New("the endpoint is still away")}
	if err := copier.Copy(context.Background(), g, path); err == nil || !strings.Contains(err.Error(), "abort the multipart upload") {
		t.Fatalf("Copy = %v, want the failed abort named", err)
	}
}

// The parts of an upload a killed run left are aborted by the next copy of
// the volume, so they stay at the provider no longer.
func TestACopyAbortsTheUploadsOfKilledRuns(t *testing.T) {
	f := newFixture(t)
	store := f.store(t, "")
	ctx := context.Background()
	left := testDestination.Key("files-20261026T024500Z.tar.gz")
	upload, err := store.StartMultipart(ctx, left)
	if err != nil {
		t.Fatal(err)
	}
	part := make([]byte, MinPartSize)
	if _, err := store.PutPart(ctx, left, upload, Part{Number: 1, Size: MinPartSize, Sums: sumsOf(part)}, bytes.NewReader(part)); err != nil {
		t.Fatal(err)
	}
	// Another volume's unfinished uploads are not this run's to abort, even
	// one whose folder sits beneath this volume's.
	others := []string{"elsewhere/files-20261026T024500Z.tar.gz.age", testDestination.Key("sub/files-20261026T024500Z.tar.gz")}
	for _, other := range others {
		if _, err := store.StartMultipart(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	source, claim := t.TempDir(), t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha")})
	if _, err := copyJob(claim, source, 2, 0, f.copier(t, store, 2, MinPartSize)).Run(ctx); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for u := range f.admin.ListIncompleteUploads(ctx, f.bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		keys = append(keys, u.Key)
	}
	slices.Sort(keys)
	slices.Sort(others)
	if !slices.Equal(keys, others) {
		t.Fatalf("unfinished uploads left: %q, want only the other volumes' %q", keys, others)
	}
}
