package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOVersion is the MinIO scripts/test-binaries.sh builds.
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// MinIOBuildCommand builds the MinIO binary; every failure to find it names it.
const MinIOBuildCommand = "scripts/test-binaries.sh minio (make test runs it)"

// MinIOBinary is the cached MinIO server: MINIO_BINARY when set, else the file
// scripts/test-binaries.sh writes.
func MinIOBinary() (string, error) {
	return cachedBinary("MINIO_BINARY", "minio-"+MinIOVersion, "minio", "MinIO", MinIOBuildCommand)
}

// MinIO is a running single-drive MinIO server on 127.0.0.1 that checks
// Signature Version 4 on every request.
type MinIO struct {
	// Endpoint is host:port, without a scheme; the server speaks plain HTTP.
	Endpoint  string
	AccessKey string
	SecretKey string
	// DataDir holds the server's drive, so a test can damage what it stores.
	DataDir string

	proc *process
	log  *LogBuffer
	home string
	stop sync.Once
}

// URL is the endpoint as a client configures it: http://host:port.
func (m *MinIO) URL() string { return "http://" + m.Endpoint }

// StartMinIO starts a MinIO server on a fresh data folder; Stop ends it and
// removes the data.
func StartMinIO(ctx context.Context) (*MinIO, error) {
	bin, err := MinIOBinary()
	if err != nil {
		return nil, err
	}
	return onFreePort(func() (*MinIO, error) { return startMinIO(ctx, bin) })
}

func startMinIO(ctx context.Context, bin string) (*MinIO, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	consolePort, err := freePort()
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp("", "minio-data-")
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "minio-home-")
	if err != nil {
		_ = os.RemoveAll(data)
		return nil, err
	}
	m := &MinIO{
		Endpoint:  "127.0.0.1:" + strconv.Itoa(port),
		AccessKey: "minio-test-" + randomHex(4),
		SecretKey: "minio-secret-" + randomHex(12),
		DataDir:   data,
		log:       &LogBuffer{},
		home:      home,
	}
	// The API listens on 127.0.0.1 and, whatever the flags say, on every
	// other loopback address (MinIO adds them all for its console; there is
	// no switch to drop [::1]), so it is never reachable from outside the
	// machine. The console is named a loopback port too and is turned off.
	cmd := exec.Command(bin, "server", "--quiet", "--anonymous",
		"--address", m.Endpoint, "--console-address", "127.0.0.1:"+strconv.Itoa(consolePort),
		"--certs-dir", filepath.Join(home, "certs"), data)
	// A private HOME keeps the server's config and certs folder out of the
	// user's; the browser console and update checks stay off.
	cmd.Env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"MINIO_ROOT_USER=" + m.AccessKey, "MINIO_ROOT_PASSWORD=" + m.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1",
	}
	cmd.Stdout, cmd.Stderr = m.log, m.log
	if m.proc, err = startProcess(cmd); err != nil {
		_ = os.RemoveAll(data)
		_ = os.RemoveAll(home)
		return nil, err
	}
	if err := m.waitReady(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *MinIO) waitReady(ctx context.Context) error {
	return m.proc.awaitHTTP(ctx, "minio", m.Endpoint, m.URL()+"/minio/health/ready", 100*time.Millisecond, m.log)
}

// Stop ends the server and removes its data.
func (m *MinIO) Stop() error {
	m.stop.Do(func() {
		m.proc.terminate()
		_ = os.RemoveAll(m.DataDir)
		_ = os.RemoveAll(m.home)
	})
	return nil
}

// Log is what the server printed so far.
func (m *MinIO) Log() string { return m.log.String() }

// NewMinIO starts a MinIO server for this test and stops it when the test
// ends. A test that cannot have one fails, naming the command that builds it.
func NewMinIO(t testing.TB) *MinIO {
	t.Helper()
	m := forTest(t, 2*time.Minute, "no MinIO server for this test", StartMinIO)
	t.Cleanup(func() { _ = m.Stop() })
	return m
}

// MakeBucket makes the bucket name, as the platform makes a backup's bucket
// before its job first writes there, and returns the root user's client it
// made it with, for the test to read the bucket beside the code under test.
func (m *MinIO) MakeBucket(t testing.TB, name string) *minio.Client {
	t.Helper()
	admin, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make the bucket %s: %v", name, err)
	}
	return admin
}
