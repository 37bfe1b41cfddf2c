package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestCopyUploadsVerifiesAndPrunesAcrossRuns(t *testing.T) {
	f := newFixture(t)
	source, claim := t.TempDir(), t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha"), "sub/b.txt": []byte("beta")})
	copier := f.copier(t, f.store(t, ""), 2, MinPartSize)
	var names []string
	for minute := range 3 {
		res, err := copyJob(claim, source, 2, minute, copier).Run(context.Background())
		if err != nil {
			t.Fatalf("run %d: %v", minute, err)
		}
		names = append(names, res.Generation.Name())
	}
	want := []string{"platform/apps/data/" + names[1] + ".age", "platform/apps/data/" + names[2] + ".age"}
	if got := f.keys(t); !slices.Equal(got, want) {
		t.Fatalf("the destination holds %q, want %q", got, want)
	}
	assertFiles(t, claim, names[1], names[2])
	checkSigned(t, f.rec, 3)

	// The provider stored the checksum the run verified.
	stored, err := f.store(t, "").Stat(context.Background(), want[1])
	if err != nil {
		t.Fatal(err)
	}
	if stored.ChecksumSHA256 == "" || len(stored.Parts) != 0 {
		t.Fatalf("stored %+v, want a whole-object SHA-256", stored)
	}
	// A rollback's run never copies.
	job := copyJob(claim, source, 2, 9, copier)
	job.Request = "rb-1"
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.keys(t); !slices.Equal(got, want) {
		t.Fatalf("a rollback's run changed the destination: %q", got)
	}
}

func TestMultipartCopyOf64MiBRoundTrips(t *testing.T) {
	f := newFixture(t)
	source, claim, target := t.TempDir(), t.TempDir(), t.TempDir()
	big := make([]byte, 64<<20)
	_, _ = rand.Read(big) // incompressible: the copy stays about 64 MiB
	writeSource(t, source, map[string][]byte{"big.bin": big, "small.txt": []byte("small")})
	res, err := copyJob(claim, source, 3, 0, f.copier(t, f.store(t, ""), 3, MinPartSize)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key := testDestination.Key(res.Generation.Name())
	stored, err := f.store(t, "").Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Parts) < 13 || !strings.HasSuffix(stored.ChecksumSHA256, "-"+itoa(len(stored.Parts))) {
		t.Fatalf("want a multipart copy of 5 MiB parts, got %d parts, checksum %q", len(stored.Parts), stored.ChecksumSHA256)
	}
	for _, p := range stored.Parts {
		if p.ChecksumSHA256 == "" {
			t.Fatalf("part %d has no checksum", p.Number)
		}
	}
	checkSigned(t, f.rec, len(stored.Parts))
	if _, err := os.Stat(filepath.Join(claim, OffClusterStaging)); !os.IsNotExist(err) {
		t.Fatalf("the staging folder is left: %v", err)
	}

	restored, err := f.restorer(t).Restore(context.Background(), res.Generation, target)
	if err != nil {
		t.Fatal(err)
	}
	if restored.Files != 2 {
		t.Fatalf("restored %d files", restored.Files)
	}
	got, err := os.ReadFile(filepath.Join(target, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("the restored file differs from the volume's")
	}
	if small, _ := os.ReadFile(filepath.Join(target, "small.txt")); string(small) != "small" {
		t.Fatalf("small.txt restored as %q", small)
	}
}

func TestAFailedCopyFailsTheRunAndKeepsTheLocalGeneration(t *testing.T) {
	f := newFixture(t)
	source := t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha")})
	unreachable, err := NewS3Store(S3Settings{Endpoint: "http://127.0.0.1:1", AccessKey: "k", SecretKey: "s", Region: "us-east-1", Bucket: "backups"})
	if err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]ObjectStore{"wrong key": f.store(t, "not-the-secret"), "unreachable endpoint": unreachable} {
		t.Run(name, func(t *testing.T) {
			claim := t.TempDir()
			first, err := copyJob(claim, source, 1, 0, nil).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			res, err := copyJob(claim, source, 1, 1, f.copier(t, store, 1, MinPartSize)).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "kept on the claim") {
				t.Fatalf("want the run to fail keeping its generation, got %v", err)
			}
			// Nothing was pruned: the older generation stays beside the new one.
			assertFiles(t, claim, first.Generation.Name(), res.Generation.Name())
			if keys := f.keys(t); len(keys) != 0 {
				t.Fatalf("the destination holds %q", keys)
			}
		})
	}
}

func TestATamperedCopyFailsTheRestore(t *testing.T) {
	f := newFixture(t)
	source, claim := t.TempDir(), t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": bytes.Repeat([]byte("alpha "), 10000)})
	res, err := copyJob(claim, source, 1, 0, f.copier(t, f.store(t, ""), 1, MinPartSize)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key := testDestination.Key(res.Generation.Name())
	ctx := context.Background()
	obj, err := f.admin.GetObject(ctx, f.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(good)
	flipped[len(flipped)-40] ^= 0x01
	for name, body := range map[string][]byte{"a flipped byte": flipped, "cut short": good[:len(good)-100]} {
		t.Run(name, func(t *testing.T) {
			if _, err := f.admin.PutObject(ctx, f.bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			target := t.TempDir()
			if _, err := f.restorer(t).Restore(ctx, res.Generation, target); err == nil {
				t.Fatal("a tampered copy restored")
			}
			if entries, _ := os.ReadDir(target); len(entries) != 0 {
				t.Fatalf("a failed restore left %v", entries)
			}
		})
	}
}

// corruptSQLite writes a database whose table pages are damaged while its
// header stays valid, so only integrity_check tells.
func corruptSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", "CREATE INDEX t_v ON t (v)",
		"INSERT INTO t (v) SELECT hex(randomblob(100)) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 2000) SELECT x FROM c)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3 * 4096; i < len(raw)-4096; i += 4096 * 3 {
		copy(raw[i+100:i+300], bytes.Repeat([]byte{0x5a}, 200))
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDrillPassesAGoodCopyAndCatchesACorruptedOne(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	source, claim := t.TempDir(), t.TempDir()
	writeSource(t, source, map[string][]byte{"notes.txt": []byte("notes")})
	db, err := sql.Open("sqlite", "file:"+filepath.Join(source, "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('x')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	copier := f.copier(t, f.store(t, ""), 3, MinPartSize)
	if _, err := copyJob(claim, source, 3, 0, copier).Run(ctx); err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	heard := &stages{t: t}
	r := f.restorer(t)
	r.Progress = heard
	drilled, err := r.Drill(ctx, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if drilled.Databases != 1 || drilled.Files != 2 {
		t.Fatalf("drilled %+v", drilled)
	}
	if want := []string{"the provider's SHA-256 checksum", "age's authentication", "gzip's CRC", "the archive reads whole",
		"integrity_check of 1 SQLite database"}; !slices.Equal(drilled.Checks, want) {
		t.Errorf("checks %q, want %q", drilled.Checks, want)
	}
	if want := []string{fmt.Sprintf("fetching, decrypting and unpacking %s (%d bytes)", testDestination.Key(drilled.Generation.Name()), drilled.Size),
		fmt.Sprintf("end after %d bytes", drilled.Size), "checking " + drilled.Generation.Name() + " (0 bytes)", "end after 0 bytes"}; !slices.Equal(heard.said, want) {
		t.Errorf("the progress heard %q, want %q", heard.said, want)
	}

	// A newer copy whose archive is whole but whose database is damaged: a
	// generation written by hand, as a broken copy of the volume would be.
	broken := t.TempDir()
	corruptSQLite(t, filepath.Join(broken, "app.db"))
	g := Generation{Method: "files", Time: time.Date(2026, 10, 27, 2, 45, 0, 0, time.UTC)}
	written, err := writeGeneration(t, claim, g, rawArchive{dir: broken})
	if err != nil {
		t.Fatal(err)
	}
	if err := copier.Copy(ctx, g, written); err != nil {
		t.Fatal(err)
	}
	if _, err := f.restorer(t).Drill(ctx, scratch); err == nil || !strings.Contains(err.Error(), "integrity_check") {
		t.Fatalf("the drill passed a damaged database: %v", err)
	}
	// Drilled at a time before the damaged copy's stamp, that copy was
	// written by a clock that ran ahead: the drill takes the newest copy
	// stamped before its time and names the one it passed over.
	early := f.restorer(t)
	early.Now = func() time.Time { return g.Time.Add(-time.Hour) }
	drilled, err = early.Drill(ctx, scratch)
	if err != nil || drilled.Generation.Time.After(early.Now()) || len(drilled.Ahead) != 1 || drilled.Ahead[0] != g {
		t.Fatalf("drilled %+v: %v", drilled, err)
	}
	early.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	if drilled, err := early.Drill(ctx, scratch); err == nil || len(drilled.Ahead) != 2 {
		t.Fatalf("a drill with every copy ahead of it: %+v, %v", drilled, err)
	}
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Fatalf("the drill left %v in its scratch folder", entries)
	}

	// A newest copy with a flipped byte fails the drill too.
	key := testDestination.Key(g.Name())
	obj, err := f.admin.GetObject(ctx, f.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(obj)
	body[len(body)/2] ^= 0x80
	if _, err := f.admin.PutObject(ctx, f.bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.restorer(t).Drill(ctx, scratch); err == nil {
		t.Fatal("the drill passed a tampered copy")
	}
}

// rawArchive archives a folder's files as they are, without the checks the
// files method makes: the way a damaged copy would look.
type rawArchive struct {
	Files
	dir string
}

func (r rawArchive) Write(_ context.Context, w io.Writer) error {
	tw := tar.NewWriter(w)
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		body, err := os.ReadFile(filepath.Join(r.dir, e.Name()))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeGeneration writes one generation of m onto the claim outside a Job.
func writeGeneration(t *testing.T, claimDir string, g Generation, m Method) (string, error) {
	t.Helper()
	claim, err := OpenClaim(context.Background(), claimDir)
	if err != nil {
		return "", err
	}
	defer claim.Close()
	w, err := claim.Write(context.Background(), g, Job{Method: m}.compress)
	return w.Path, err
}

func TestTheAgeCommandDecryptsACopy(t *testing.T) {
	agePath, err := exec.LookPath("age")
	if err != nil {
		t.Fatalf("no age command: install it with %s", testenv.DepsCommand)
	}
	f := newFixture(t)
	source, claim, work := t.TempDir(), t.TempDir(), t.TempDir()
	writeSource(t, source, map[string][]byte{"a.txt": []byte("alpha"), "sub/b.txt": []byte("beta")})
	res, err := copyJob(claim, source, 1, 0, f.copier(t, f.store(t, ""), 1, MinPartSize)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(work, res.Generation.Name()+".age")
	if err := f.admin.FGetObject(context.Background(), f.bucket, testDestination.Key(res.Generation.Name()), copyPath, minio.GetObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(work, "key.txt")
	if err := os.WriteFile(keyFile, []byte(f.identity.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	// The manual path docs/backup.md documents (restoring by hand).
	cmd := exec.Command("sh", "-c", `"$0" --decrypt --identity "$1" "$2" | tar -xz -C "$3"`, agePath, keyFile, copyPath, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("age | tar: %v: %s", err, msg)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "sub", "b.txt")); string(b) != "beta" {
		t.Fatalf("sub/b.txt decrypted as %q", b)
	}
}

// bytesMethod writes fixed bytes as a generation of the method it embeds.
type bytesMethod struct {
	Method
	body []byte
}

func (m bytesMethod) Write(_ context.Context, w io.Writer) error {
	_, err := w.Write(m.body)
	return err
}

func TestDrillChecksDumpsAndDefinitions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	definitions, err := os.ReadFile(filepath.Join("testdata", "definitions.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method string
		body   []byte
		ok     bool
	}{
		{"postgres", []byte(goodDump), true},
		{"postgres", []byte(cutBefore(goodDump, `\.`)), false},
		{"rabbitmq", definitions, true},
		{"rabbitmq", []byte(`{"users":[]}`), false},
	}
	for i, c := range cases {
		claim := t.TempDir()
		g := Generation{Method: c.method, Time: time.Date(2026, 10, 26, 3, i, 0, 0, time.UTC)}
		m, _ := MethodNamed(c.method)
		path, err := writeGeneration(t, claim, g, bytesMethod{m, c.body})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.copier(t, f.store(t, ""), 10, MinPartSize).Copy(ctx, g, path); err != nil {
			t.Fatal(err)
		}
		drilled, err := f.restorer(t).Drill(ctx, t.TempDir())
		if (err == nil) != c.ok {
			t.Errorf("%s case %d: drill said %v", c.method, i, err)
		}
		check := map[string]string{"postgres": "pg_dumpall's banners and every COPY block ending", "rabbitmq": "the definitions parse"}[c.method]
		if c.ok && (len(drilled.Checks) == 0 || drilled.Checks[len(drilled.Checks)-1] != check) {
			t.Errorf("%s case %d: checks %q, want %q last", c.method, i, drilled.Checks, check)
		}

		// The claim's copy restores too, into a file, byte for byte.
		target := t.TempDir()
		restored, err := Restorer{Source: ClaimSource{Dir: claim}}.Restore(ctx, g, target)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(restored.Path); !bytes.Equal(got, c.body) {
			t.Errorf("%s case %d: the claim's copy restored as %q", c.method, i, got)
		}
		gens, err := Restorer{Source: ClaimSource{Dir: claim}}.List(ctx)
		if err != nil || len(gens) != 1 || gens[0] != g {
			t.Errorf("the claim lists %v, %v", gens, err)
		}
	}
}
