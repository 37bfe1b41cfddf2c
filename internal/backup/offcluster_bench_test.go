package backup

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// BenchmarkOffClusterCopyVersusPlainUpload copies one generation of
// BACKUP_BENCH_OFFCLUSTER_MIB (default 6144) random, so incompressible,
// bytes: first a plain minio-go FPutObject of the generation to the same
// MinIO, then the off-cluster copy (encrypt, signed upload, read back). Each
// runs in its own process (this test binary, re-run as a helper), so wall
// time and peak RSS are that process's alone.
func BenchmarkOffClusterCopyVersusPlainUpload(b *testing.B) {
	size := benchSize(b, "BACKUP_BENCH_OFFCLUSTER_MIB", 6144)
	fx := newFixture(b)
	m, id := fx.minio, fx.identity
	claim := b.TempDir()
	g := Generation{Method: "files", Time: time.Date(2026, 10, 26, 2, 45, 0, 0, time.UTC)}
	path := filepath.Join(claim, g.Name())
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()

	helper := func(mode string) (time.Duration, int64) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOffClusterBenchHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "OFFCLUSTER_BENCH_HELPER="+mode, "OFFCLUSTER_BENCH_FILE="+path,
			"OFFCLUSTER_BENCH_ENDPOINT="+m.URL(), "OFFCLUSTER_BENCH_ACCESS="+m.AccessKey,
			"OFFCLUSTER_BENCH_SECRET="+m.SecretKey, "OFFCLUSTER_BENCH_RECIPIENT="+id.Recipient().String())
		return measured(b, cmd)
	}
	for b.Loop() {
		plainTime, plainRSS := helper("plain")
		copyTime, copyRSS := helper("copy")
		mib := float64(size) / (1 << 20)
		b.ReportMetric(mib/plainTime.Seconds(), "plain-MiB/s")
		b.ReportMetric(mib/copyTime.Seconds(), "copy-MiB/s")
		b.ReportMetric(plainTime.Seconds()/copyTime.Seconds(), "throughput-ratio")
		b.ReportMetric(float64(plainRSS)/(1<<20), "plain-peak-RSS-MiB")
		b.ReportMetric(float64(copyRSS)/(1<<20), "copy-peak-RSS-MiB")
	}
}

// TestOffClusterBenchHelper is the process the benchmark above measures; run
// without OFFCLUSTER_BENCH_HELPER it checks only that the helper's plain mode
// refuses a missing file.
func TestOffClusterBenchHelper(t *testing.T) {
	mode := os.Getenv("OFFCLUSTER_BENCH_HELPER")
	if mode == "" {
		if err := benchHelper(context.Background(), "plain", filepath.Join(t.TempDir(), "absent")); err == nil {
			t.Fatal("the helper uploaded a file that does not exist")
		}
		return
	}
	if err := benchHelper(context.Background(), mode, os.Getenv("OFFCLUSTER_BENCH_FILE")); err != nil {
		t.Fatal(err)
	}
}

func benchHelper(ctx context.Context, mode, path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	endpoint := os.Getenv("OFFCLUSTER_BENCH_ENDPOINT")
	if mode == "plain" {
		u := endpoint[len("http://"):]
		client, err := minio.New(u, &minio.Options{Creds: credentials.NewStaticV4(os.Getenv("OFFCLUSTER_BENCH_ACCESS"), os.Getenv("OFFCLUSTER_BENCH_SECRET"), "")})
		if err != nil {
			return err
		}
		_, err = client.FPutObject(ctx, "backups", "plain/"+filepath.Base(path), path, minio.PutObjectOptions{})
		return err
	}
	store, err := NewS3Store(S3Settings{Endpoint: endpoint, AccessKey: os.Getenv("OFFCLUSTER_BENCH_ACCESS"),
		SecretKey: os.Getenv("OFFCLUSTER_BENCH_SECRET"), Region: "us-east-1", Bucket: "backups"})
	if err != nil {
		return err
	}
	recipient, err := ParseRecipient(os.Getenv("OFFCLUSTER_BENCH_RECIPIENT"))
	if err != nil {
		return err
	}
	g, err := ParseName(filepath.Base(path))
	if err != nil {
		return err
	}
	part, _ := strconv.ParseInt(os.Getenv("BACKUP_BENCH_PART_MIB"), 10, 64)
	if part == 0 {
		part = DefaultPartSize >> 20
	}
	copier := OffClusterCopy{Store: store, Destination: Destination{Bucket: "backups", Folder: "bench"},
		Recipient: recipient, PartSize: part << 20, Retain: 1}
	return copier.Copy(ctx, g, path)
}
