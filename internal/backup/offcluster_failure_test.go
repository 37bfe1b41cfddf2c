package backup

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// refusing is a store that refuses every upload, as one does to a wrong key.
type refusing struct{ ObjectStore }

var errAccessDenied = errors.New("AccessDenied: the key is not allowed to write")

func (refusing) StartMultipart(context.Context, string) (string, error) { return "", errAccessDenied }

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
