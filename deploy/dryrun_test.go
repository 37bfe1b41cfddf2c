package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// namespaces are where the base and the templates put their objects; a
// dry run admits an object only into a namespace that exists.
var namespaces = []string{"delivery-system", "secrets-system", "data-system", "knowledge-platform-system"}

// TestServerSideDryRun applies every object of the base, the overlay and the
// job templates to a real API server, with Flagger's and Flux's CRDs
// installed, as a server-side dry run: the API server defaults, validates
// and admits each one as Flux's apply would, and stores none.
func TestServerSideDryRun(t *testing.T) {
	cp := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		_, err := cp.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	streams := map[string][]byte{base: build(t, base), overlay: build(t, overlay)}
	for _, file := range templates {
		streams[file] = readTemplate(t, file)
	}
	for name, stream := range streams {
		applied, err := cp.ApplyDryRun(ctx, stream)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := len(decode(t, name, stream).all); len(applied) != want {
			t.Errorf("%s: %d objects admitted of %d", name, len(applied), want)
		}
	}
	// A dry run stores nothing.
	if _, err := cp.Kube.AppsV1().Deployments("delivery-system").Get(ctx, "release-gate", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry run stored the gate's Deployment (%v)", err)
	}
}

// TestDryRunRefusesWhatTheAPIServerWould keeps the dry run honest: a
// manifest the API server refuses fails it, so a passing dry run means the
// manifests would apply.
func TestDryRunRefusesWhatTheAPIServerWould(t *testing.T) {
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	for name, manifest := range map[string]string{
		"a Service port out of range": "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: " + ns + "}\nspec: {ports: [{port: 70000}]}\n",
		"a Canary with no target":     "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: c, namespace: " + ns + "}\nspec: {service: {port: 80}, analysis: {interval: 1m}}\n",
		"an object in no namespace":   "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: no-such-namespace}\n",
	} {
		if _, err := cp.ApplyDryRun(context.Background(), []byte(manifest)); err == nil || !strings.Contains(err.Error(), "dry-run apply") {
			t.Errorf("%s: the dry run admitted it (%v)", name, err)
		}
	}
}
