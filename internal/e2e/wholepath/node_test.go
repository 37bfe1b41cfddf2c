package wholepath_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestTheNodeRunsPodsOnItsOwnNetwork runs a restricted Deployment and its
// Service on the node, reaches it by its ClusterIP from this machine and by
// its DNS name from a Job's pod, and finds a name off the cluster
// unresolvable from a pod: the network the releases travel is a cluster's,
// and it ends at this machine.
func TestTheNodeRunsPodsOnItsOwnNetwork(t *testing.T) {
	e := theEstate(t)
	n := e.Node
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := n.Namespace(t)
	dump := func() string { return n.ContainerLogs(ns, 3000) }
	if _, err := n.Apply(ctx, []byte(webManifests(ns))); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitAvailable(ctx, ns, "web"); err != nil {
		t.Fatalf("%v\n%s", err, dump())
	}
	svc, err := n.Kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body := ""
	waitUntil(ctx, t, "the ClusterIP to answer from this machine", func() (bool, string) {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + svc.Spec.ClusterIP + ":8080/") //nolint:noctx // a probe with the client's timeout
		if err != nil {
			return false, err.Error()
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(raw)
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if !strings.Contains(body, "release one") {
		t.Errorf("the ClusterIP answered %q, not the Deployment's release", body)
	}
	if phase := runJob(ctx, t, n, ns, "reach-web", "http://web."+ns+".svc.cluster.local:8080/"); phase != batchv1.JobComplete {
		t.Fatalf("a pod could not reach the Service by its name: %s\n%s", phase, dump())
	}
	if phase := runJob(ctx, t, n, ns, "reach-outside", "http://example.com/"); phase != batchv1.JobFailed {
		t.Fatalf("a pod reached a name off the cluster: %s", phase)
	}
}

// waitUntil polls cond every 100 ms until it holds, failing the test with
// what it last said when ctx ends.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %s: %s", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runJob runs member get url as a Job and returns how it ended.
func runJob(ctx context.Context, t *testing.T, n *testenv.Node, ns, name, url string) batchv1.JobConditionType {
	t.Helper()
	job := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: get
        image: %[3]s
        args: [get, %[4]q]
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`, name, ns, testenv.MemberImage, url)
	if _, err := n.Apply(ctx, []byte(job)); err != nil {
		t.Fatal(err)
	}
	var ended batchv1.JobConditionType
	waitUntil(ctx, t, "Job "+name+" to end", func() (bool, string) {
		j, err := n.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				ended = c.Type
				return true, ""
			}
		}
		return false, "running"
	})
	return ended
}

// webManifests is a namespace held to the restricted Pod Security standard
// with a Deployment of the member program and its Service.
func webManifests(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: %[2]s
        args: [serve]
        env: [{name: RELEASE, value: one}]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /readyz, port: http}, periodSeconds: 1}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{name: http, port: 8080, targetPort: http}]
`, ns, testenv.MemberImage)
}
