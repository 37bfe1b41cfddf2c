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
)

var shared struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Main runs a package's tests and then stops the control plane they shared.
// Use it as the package's TestMain: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if sharedCluster.c != nil {
		sharedCluster.c.stop()
	}
	if sharedNode.n != nil {
		sharedNode.n.Close()
	}
	if shared.cp != nil {
		if err := shared.cp.Stop(); err != nil {
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
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.cp, shared.err = Start(ctx)
	})
	if shared.err != nil {
		t.Fatalf("no Kubernetes API server for this test: %v", shared.err)
	}
	return shared.cp
}

// Own starts a control plane for this test alone, for a test that stops it.
func Own(t testing.TB) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := Start(ctx)
	if err != nil {
		t.Fatalf("no Kubernetes API server for this test: %v", err)
	}
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
	path, err := cp.KubeconfigAs(t.TempDir(), namespace, serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return path
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := kube.CoreV1().ConfigMaps(namespace).List(context.Background(), metav1.ListOptions{Limit: 1})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grant never took: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
