package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestANodeRunsPodsAndTheRealFluxAppliesARelease starts the node, runs a
// restricted Deployment and its Service, reaches it by its DNS name from a
// Job's pod and by its ClusterIP from this machine, finds a name off the
// cluster unresolvable from a pod, has the real Flux apply a pushed
// artifact, and then checks that stopping the node left nothing behind.
func TestANodeRunsPodsAndTheRealFluxAppliesARelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	member, err := BuildMemberImage(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	n, err := StartNode(ctx, NodeOptions{Images: []string{member}, Say: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	t.Logf("node Ready %s after its start", time.Since(started).Round(time.Millisecond))
	dump := func() string { return n.ContainerLogs("", 3000) }

	ns := "web"
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
	// From this machine, by the ClusterIP kube-proxy routes.
	if err := waitFor(ctx, "the ClusterIP to answer from this machine", func() (bool, string) {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + svc.Spec.ClusterIP + ":8080/")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "release one"), string(body)
	}); err != nil {
		t.Fatal(err)
	}
	// From a pod, by the Service's name; and a name off the cluster fails.
	if phase := runJob(ctx, t, n, ns, "reach-web", "http://web."+ns+".svc.cluster.local:8080/"); phase != batchv1.JobComplete {
		t.Fatalf("a pod could not reach the Service by its name: %s\n%s", phase, dump())
	}
	if phase := runJob(ctx, t, n, ns, "reach-outside", "http://example.com/"); phase != batchv1.JobFailed {
		t.Fatalf("a pod reached a name off the cluster: %s", phase)
	}

	flux, err := n.StartFlux(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, n.ContainerLogs(FluxNamespace, 3000))
	}
	artifact := t.TempDir()
	if err := os.WriteFile(filepath.Join(artifact, "config.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "+ns+"}\ndata: {release: two}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pushed, err := flux.Push(ctx, artifact, "estate/web", "2.0.0", "https://example.invalid/estate", "main@sha1:0123456789abcdef0123456789abcdef01234567")
	if err != nil {
		t.Fatal(err)
	}
	unit := fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-web, namespace: %[1]s}
spec:
  interval: 10m
  url: %[2]s
  insecure: true
  ref: {digest: %[3]s}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: web, namespace: %[1]s}
spec:
  interval: 10m
  prune: true
  wait: true
  timeout: 2m
  path: ./
  sourceRef: {kind: OCIRepository, name: project-web}
`, FluxNamespace, pushed.URL(flux), pushed.Digest)
	if _, err := n.Apply(ctx, []byte(unit)); err != nil {
		t.Fatal(err)
	}
	var k kustomizev1.Kustomization
	if err := waitFor(ctx, "Flux to apply the artifact", func() (bool, string) {
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: FluxNamespace, Name: "web"}, &k); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(k.Status.Conditions, meta.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && k.Status.LastAppliedRevision != "", fmt.Sprintf("%+v", k.Status.Conditions)
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.ContainerLogs(FluxNamespace, 3000))
	}
	if k.Status.LastAppliedRevision != pushed.Digest {
		t.Errorf("Flux applied revision %q, want the pushed digest %q", k.Status.LastAppliedRevision, pushed.Digest)
	}
	if k.Status.LastAppliedOriginRevision != "main@sha1:0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("Flux's origin revision is %q", k.Status.LastAppliedOriginRevision)
	}
	var repo sourcev1.OCIRepository
	if err := n.Client.Get(ctx, client.ObjectKey{Namespace: FluxNamespace, Name: "project-web"}, &repo); err != nil {
		t.Fatal(err)
	}
	cm, err := n.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["release"] != "two" {
		t.Fatalf("the artifact's ConfigMap is not applied: %v %v", cm, err)
	}

	closed = true
	n.Close()
	assertNothingLeft(t)
}

// assertNothingLeft checks this machine for what a node makes.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	if exec.Command("ip", "link", "show", nodeBridge).Run() == nil {
		t.Errorf("the bridge %s is still there", nodeBridge)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), "/"+nodeMark+"-") {
		t.Errorf("a node's mount is still there")
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, _ := exec.Command(tool, "-t", table, "-S").Output()
			if strings.Contains(string(out), "KUBE-") || strings.Contains(string(out), nodeGuardComment) {
				t.Errorf("%s's %s table still holds the node's rules:\n%s", tool, table, out)
			}
		}
	}
	if cgs := nodeCgroups(); len(cgs) > 0 {
		t.Errorf("the node's cgroups are still there: %v", cgs)
	}
	if _, err := os.Stat(nodeStateFile()); err == nil {
		t.Errorf("the kernel settings were not put back")
	}
	if cached, _ := exec.Command("grep", "-rl", `"`+nodeGateway+`"`, "/var/lib/cni/results").Output(); len(cached) > 0 {
		t.Errorf("libcni still caches the node's pods: %s", cached)
	}
	out, _ := exec.Command("ip", "route", "show", nodeSvcRange).Output()
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("the service range is still routed: %s", out)
	}
}

// runJob runs member get url as a Job and returns how it ended.
func runJob(ctx context.Context, t *testing.T, n *Node, ns, name, url string) batchv1.JobConditionType {
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
`, name, ns, MemberImage, url)
	if _, err := n.Apply(ctx, []byte(job)); err != nil {
		t.Fatal(err)
	}
	var ended batchv1.JobConditionType
	if err := waitFor(ctx, "Job "+name+" to end", func() (bool, string) {
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
		return false, n.podStates(ctx, ns)
	}); err != nil {
		t.Fatal(err)
	}
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
`, ns, MemberImage)
}
