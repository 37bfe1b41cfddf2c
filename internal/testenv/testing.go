package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// sharedServer is the one server of a kind that a package's tests share:
// started on first use, since most packages need only some of them, and
// stopped by Main once the tests end.
type sharedServer[T any] struct {
	once    sync.Once
	started T
	err     error
}

// get returns the server, starting it within the deadline on first use. A
// test that cannot have it fails, saying what it lacks; it never skips.
func (s *sharedServer[T]) get(t testing.TB, within time.Duration, lacking string, start func(context.Context) (T, error)) T {
	t.Helper()
	s.once.Do(func() { s.started, s.err = startWithin(within, start) })
	if s.err != nil {
		t.Fatalf("%s: %v", lacking, s.err)
	}
	return s.started
}

var shared sharedServer[*ControlPlane]

// startWithin runs start with a deadline of within from now.
func startWithin[T any](within time.Duration, start func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return start(ctx)
}

// forTest starts a server for one test within the deadline; the caller
// stops it when the test ends. A test that cannot have it fails, saying what
// it lacks; it never skips.
func forTest[T any](t testing.TB, within time.Duration, lacking string, start func(context.Context) (T, error)) T {
	t.Helper()
	started, err := startWithin(within, start)
	if err != nil {
		t.Fatalf("%s: %v", lacking, err)
	}
	return started
}

// Main runs a package's tests and then stops the control plane they shared.
// Use it as the package's TestMain: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if sharedCluster.started != nil {
		sharedCluster.started.stop()
	}
	if sharedNode.started != nil {
		sharedNode.started.Close()
	}
	if shared.started != nil {
		if err := shared.started.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the shared control plane:", err)
		}
	}
	return code
}

// Shared returns the package's one control plane, starting it on first use.
// A test that cannot have it fails, naming the command that builds it; it
// never skips.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	return shared.get(t, 2*time.Minute, "no Kubernetes API server for this test", Start)
}

// Own starts a control plane for this test alone, for a test that stops it.
func Own(t testing.TB) *ControlPlane {
	t.Helper()
	cp := forTest(t, 2*time.Minute, "no Kubernetes API server for this test", Start)
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// Namespace creates a namespace named for the test, so tests sharing a control
// plane do not see each other's objects.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(name, "-") + "-"}}
	created, err := cp.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace: %v", err)
	}
	return created.Name
}

// Grant applies a service's RBAC file, after the namespace its ServiceAccount
// lives in, and returns a config acting as that ServiceAccount: the test runs
// the service under exactly the grant the file gives. replace holds pairs of
// text to swap in the file before it is applied, for lines a deployment fills
// in (such as another service's namespace).
func (cp *ControlPlane) Grant(t testing.TB, rbacFile, namespace, serviceAccount string, replace ...string) *rest.Config {
	t.Helper()
	rbac, err := os.ReadFile(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	rbac = []byte(strings.NewReplacer(replace...).Replace(string(rbac)))
	ns := []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: " + namespace + "}\n---\n")
	if _, err := cp.Apply(context.Background(), append(ns, rbac...)); err != nil {
		t.Fatalf("apply %s: %v", rbacFile, err)
	}
	return cp.As(namespace, serviceAccount)
}

// GrantKubeconfig is Grant for a binary started with KUBECONFIG: it returns
// the path of a kubeconfig file acting as the ServiceAccount.
func (cp *ControlPlane) GrantKubeconfig(t testing.TB, rbacFile, namespace, serviceAccount string, replace ...string) string {
	t.Helper()
	cp.Grant(t, rbacFile, namespace, serviceAccount, replace...)
	return cp.kubeconfigFile(t, namespace, serviceAccount)
}

func (cp *ControlPlane) kubeconfigFile(t testing.TB, namespace, serviceAccount string) string {
	t.Helper()
	path, err := cp.KubeconfigAs(t.TempDir(), namespace, serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// recordKeepers is the namespace the release record's RBAC files put its
// ServiceAccounts in, the service's and its sweep's.
const recordKeepers = "delivery-system"

// GrantRecords applies rbacFile, the release record's RBAC file or its
// sweep's, with the records in a namespace of the test's (the file's lines
// marked RECORD_NAMESPACE) and replace swapping more of it, and waits until
// the authoriser has the grant. It returns that namespace and a config
// acting as serviceAccount.
func (cp *ControlPlane) GrantRecords(t testing.TB, rbacFile, serviceAccount string, replace ...string) (recordNS string, cfg *rest.Config) {
	t.Helper()
	recordNS = cp.Namespace(t)
	replace = append([]string{recordKeepers + " # RECORD_NAMESPACE", recordNS + " # RECORD_NAMESPACE"}, replace...)
	cfg = cp.Grant(t, rbacFile, recordKeepers, serviceAccount, replace...)
	WaitForGrant(t, cfg, recordNS)
	return recordNS, cfg
}

// GrantRecordsKubeconfig is GrantRecords for a binary started with
// KUBECONFIG: it returns the path of a kubeconfig file acting as the
// ServiceAccount instead of a config.
func (cp *ControlPlane) GrantRecordsKubeconfig(t testing.TB, rbacFile, serviceAccount string, replace ...string) (recordNS, kubeconfig string) {
	t.Helper()
	recordNS, _ = cp.GrantRecords(t, rbacFile, serviceAccount, replace...)
	return recordNS, cp.kubeconfigFile(t, recordKeepers, serviceAccount)
}

// WaitForGrant waits, up to 15 s, until cfg may list the ConfigMaps of
// namespace: the API server's authoriser takes a grant a moment after it
// is written, so a test that acts at once would see it refused.
func WaitForGrant(t testing.TB, cfg *rest.Config, namespace string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wait.Poll{Within: 15 * time.Second}.Until(t, "the grant to take", func() (bool, string) {
		_, err := kube.CoreV1().ConfigMaps(namespace).List(context.Background(), metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}
