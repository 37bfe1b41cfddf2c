package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// sentBody is one upload request as it left the client.
type sentBody struct {
	header string // x-amz-content-sha256
	actual string // SHA-256 of the bytes sent
	size   int64
}

// recorder watches every request that carries a body and hashes the body as
// the client sends it, so a test sees the header next to the truth.
type recorder struct {
	mu   sync.Mutex
	sent []sentBody
	open sync.WaitGroup // bodies the transport has not closed yet
}

// hashingBody hashes a request's body as the transport reads it and hands
// the sum over when the transport closes it. RoundTrip may return while the
// transport is still reading (a server answers a wrong key before it has read
// the body) and the transport closes the body when it is done, from its own
// goroutine: so the sum is taken at Close, and mu keeps it apart from a Read.
type hashingBody struct {
	io.ReadCloser
	mu     sync.Mutex
	h      hash.Hash
	n      int64
	closed bool
	done   func(actual string, size int64)
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.h.Write(p[:n])
	b.n += int64(n)
	b.mu.Unlock()
	return n, err
}

func (b *hashingBody) Close() error {
	err := b.ReadCloser.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.done(hex.EncodeToString(b.h.Sum(nil)), b.n)
	}
	return err
}

// RoundTrip sends req with its body wrapped; a RoundTripper must not change
// the request it is handed, so the wrapper goes on a copy. The transport
// always closes the body, on errors too, and that records it.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || req.Body == nil || req.ContentLength <= 0 {
		return http.DefaultTransport.RoundTrip(req)
	}
	header := req.Header.Get("X-Amz-Content-Sha256")
	r.open.Add(1)
	sent := req.Clone(req.Context())
	sent.Body = &hashingBody{ReadCloser: req.Body, h: sha256.New(), done: func(actual string, size int64) {
		r.mu.Lock()
		r.sent = append(r.sent, sentBody{header: header, actual: actual, size: size})
		r.mu.Unlock()
		r.open.Done()
	}}
	return http.DefaultTransport.RoundTrip(sent)
}

// bodies are the bodies sent, once the transport has closed every one.
func (r *recorder) bodies() []sentBody {
	r.open.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

// fixture is one MinIO server with a bucket, and the age key pair.
type fixture struct {
	minio    *testenv.MinIO
	admin    *minio.Client
	bucket   string
	identity *age.X25519Identity
	rec      *recorder
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	m := testenv.NewMinIO(t)
	admin := m.MakeBucket(t, "backups")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{minio: m, admin: admin, bucket: "backups", identity: id, rec: &recorder{}}
}

func (f *fixture) store(t *testing.T, secret string) *S3Store {
	t.Helper()
	if secret == "" {
		secret = f.minio.SecretKey
	}
	s, err := NewS3Store(S3Settings{Endpoint: f.minio.URL(), AccessKey: f.minio.AccessKey, SecretKey: secret,
		Region: "us-east-1", Bucket: f.bucket, Transport: f.rec})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testDestination = Destination{Bucket: "backups", Folder: "platform/apps/data"}

func (f *fixture) copier(t *testing.T, store ObjectStore, retain int, partSize int64) *OffClusterCopy {
	t.Helper()
	return &OffClusterCopy{Store: store, Destination: testDestination, Recipient: f.identity.Recipient(),
		PartSize: partSize, Retain: retain}
}

func (f *fixture) keys(t *testing.T) []string {
	t.Helper()
	var keys []string
	for obj := range f.admin.ListObjects(context.Background(), f.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	return keys
}

func (f *fixture) restorer(t *testing.T) Restorer {
	t.Helper()
	return Restorer{Source: StoreSource{Store: f.store(t, ""), Destination: testDestination, Identities: []age.Identity{f.identity}}}
}

// filesJob backs up source onto claim at the given minute.
func copyJob(claim, source string, retain int, minute int, off OffCluster) Job {
	at := time.Date(2026, 10, 26, 2, 45+minute, 0, 0, time.UTC)
	return Job{Dir: claim, Method: Files{Source: source, Staging: filepath.Join(claim, StagingDir)}, Retain: retain,
		OffCluster: off, Now: func() time.Time { return at }}
}

// checkSigned asserts every body went with its real SHA-256 in
// x-amz-content-sha256: signed, and so checked by the provider.
func checkSigned(t *testing.T, rec *recorder, wantBodies int) {
	t.Helper()
	sent := rec.bodies()
	if len(sent) < wantBodies {
		t.Fatalf("%d bodies sent, want at least %d", len(sent), wantBodies)
	}
	for i, s := range sent {
		if s.header != s.actual {
			t.Fatalf("body %d (%d bytes) went with x-amz-content-sha256 %q, its SHA-256 is %s", i, s.size, s.header, s.actual)
		}
	}
}

func writeSource(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}
