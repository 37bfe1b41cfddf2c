package collector_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/collector"
	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	estateRepo   = "estate-org/estate"
	snapshotPath = "clusters/production/cluster-state.yml"
)

// grantCollector applies deploy/collector/rbac.yaml and returns a client that
// acts as the Collector's ServiceAccount: the tests run under exactly that grant.
func grantCollector(t testing.TB, cp *testenv.ControlPlane) *collector.Kube {
	t.Helper()
	kube, err := collector.NewKube(cp.Grant(t, "../../deploy/collector/rbac.yaml", "delivery-system", "collector"))
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

func createPod(t testing.TB, kube kubernetes.Interface, ns, name, process, node string, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			collector.LabelManagedBy: collector.ManagedBy, collector.LabelName: process,
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "registry.example/app:1"}}},
	}
	created, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = phase
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createBoundClaim makes a local volume on node (or on any node when node is
// empty) and a claim bound to it, as the volume controller would leave them.
func createBoundClaim(t testing.TB, kube kubernetes.Interface, ns, claim, node string) {
	t.Helper()
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName:  ns + "-" + claim,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/srv/" + claim}},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim, UID: pvc.UID},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if node == "" {
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"node-a", "node-b"}
	}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// racingFile lets another writer commit between the Collector's read and write.
type racingFile struct {
	collector.SnapshotFile
	afterRead func()
}

func (f racingFile) Read(ctx context.Context) (githubapp.Content, error) {
	c, err := f.SnapshotFile.Read(ctx)
	if f.afterRead != nil {
		f.afterRead()
	}
	return c, err
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newFile(t *testing.T, fake *fakegithub.Server) *githubapp.File {
	t.Helper()
	gh, err := githubapp.New(githubapp.Config{AppID: fake.AppID, InstallationID: fake.InstallationID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := githubapp.ParseRepository(estateRepo)
	return gh.File(repo, snapshotPath, "")
}

// TestCaptureAgainstTheAPIServerAndGitHub walks the Collector through the
// story of a capture on one cluster, under exactly the RBAC file's grant.
func TestCaptureAgainstTheAPIServerAndGitHub(t *testing.T) {
	ctx := context.Background()
	cp := testenv.Shared(t)
	kube := grantCollector(t, cp)
	ns := cp.Namespace(t)
	createBoundClaim(t, cp.Kube, ns, "data-postgres-0", "node-a")
	createBoundClaim(t, cp.Kube, ns, "shared-cache", "")
	createPod(t, cp.Kube, ns, "api-1", "api", "node-a", corev1.PodRunning)
	createPod(t, cp.Kube, ns, "api-2", "api", "node-a", corev1.PodRunning)
	createPod(t, cp.Kube, ns, "web-1", "web", "node-b", corev1.PodPending)
	createPod(t, cp.Kube, ns, "migrate", "migrate", "node-b", corev1.PodSucceeded)
	createPod(t, cp.Kube, ns, "crashed", "worker", "node-b", corev1.PodFailed)

	fake := fakegithub.New(t)
	fake.AddRepository(estateRepo)
	clk := &clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	file := newFile(t, fake)
	c := &collector.Collector{Cluster: "production", Inventory: kube, File: file, Now: clk.Now}

	// A first capture creates the file.
	out, err := c.Capture(ctx)
	if err != nil || !out.Committed {
		t.Fatalf("first capture: %+v %v", out, err)
	}
	content, sha, ok := fake.File(estateRepo, snapshotPath)
	if !ok {
		t.Fatal("no snapshot was committed")
	}
	snap, err := collector.Decode(content)
	if err != nil {
		t.Fatal(err)
	}
	wantFacts := collector.Facts{
		Bindings:   []collector.Binding{{Claim: "data-postgres-0", Node: "node-a"}},
		Placements: []collector.Placement{{Process: "api", Node: "node-a"}, {Process: "web", Node: "node-b"}},
	}
	if !snap.Facts().Equal(wantFacts) || snap.Cluster != "production" || snap.CapturedAt != "2026-11-30T09:00:00Z" {
		t.Fatalf("committed %+v", snap)
	}
	if commits := fake.Commits(estateRepo); len(commits) != 1 || !strings.HasPrefix(commits[0].Message, "cluster-state: production: first capture") {
		t.Fatalf("commits %+v", commits)
	}

	// An unchanged cluster makes no commit and keeps capturedAt.
	clk.now = clk.now.Add(10 * time.Minute)
	fake.ResetCalls()
	if out, err := c.Capture(ctx); err != nil || out.Committed {
		t.Fatalf("unchanged capture: %+v %v", out, err)
	}
	if _, again, _ := fake.File(estateRepo, snapshotPath); again != sha || len(fake.Commits(estateRepo)) != 1 {
		t.Fatal("an unchanged cluster changed the file")
	}
	if n := fake.CallsMatching("PUT", "/contents/"); n != 0 {
		t.Fatalf("an unchanged capture wrote %d times", n)
	}
	// The next unchanged capture reads through a conditional request that
	// GitHub answers 304: it costs no rate-limit units.
	fake.ResetCalls()
	if out, err := c.Capture(ctx); err != nil || out.Committed {
		t.Fatalf("second unchanged capture: %+v %v", out, err)
	}
	if used := fake.RateLimitUsed(); used != 0 || fake.CallsMatching("GET", "/contents/") != 1 {
		t.Fatalf("an unchanged capture spent %d rate-limit units: %v", used, fake.Calls())
	}

	// A moved pod makes exactly one commit, over the blob it read.
	if err := cp.Kube.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	createPod(t, cp.Kube, ns, "web-1b", "web", "node-c", corev1.PodRunning)
	fake.ResetCalls()
	out, err = c.Capture(ctx)
	if err != nil || !out.Committed {
		t.Fatalf("capture after a move: %+v %v", out, err)
	}
	commits := fake.Commits(estateRepo)
	if len(commits) != 2 || fake.CallsMatching("PUT", "/contents/") != 1 ||
		commits[1].Message != "cluster-state: production: placements +1 -1\n\n+ process web on node-c\n- process web on node-b\n" {
		t.Fatalf("commits after a move: %+v", commits)
	}
	snap, _ = collector.Decode(commits[1].Content)
	if snap.CapturedAt != "2026-11-30T09:10:00Z" {
		t.Fatalf("capturedAt %s", snap.CapturedAt)
	}

	// A concurrent edit between read and write fails that capture and wins;
	// the next capture succeeds over it.
	createPod(t, cp.Kube, ns, "worker-1", "worker", "node-a", corev1.PodRunning)
	edited := strings.Replace(string(commits[1].Content), "node-c", "node-z", 1)
	racing := &collector.Collector{Cluster: "production", Inventory: kube, Now: clk.Now,
		File: racingFile{SnapshotFile: file, afterRead: func() { fake.PutFile(estateRepo, snapshotPath, []byte(edited)) }}}
	_, err = racing.Capture(ctx)
	var conflict *githubapp.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("a capture racing an edit: %v", err)
	}
	if now, _, _ := fake.File(estateRepo, snapshotPath); string(now) != edited {
		t.Fatal("the racing capture overwrote the other writer's edit")
	}
	if out, err := c.Capture(ctx); err != nil || !out.Committed {
		t.Fatalf("the capture after a conflict: %+v %v", out, err)
	}
	if now, _, _ := fake.File(estateRepo, snapshotPath); !strings.Contains(string(now), "node-c") || !strings.Contains(string(now), "worker") {
		t.Fatalf("the next capture did not record the cluster:\n%s", now)
	}
	for _, call := range fake.Calls() {
		if call.Auth == "" {
			t.Errorf("an unauthenticated call: %v", call)
		}
	}
}

func TestSnapshotsThatAreNotOursAreNeverOverwritten(t *testing.T) {
	ctx := context.Background()
	cp := testenv.Shared(t)
	kube := grantCollector(t, cp)
	cases := map[string]string{
		"another cluster": "apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\nschemaVersion: 1.0.0\ncluster: staging\ncapturedAt: \"2026-09-30T00:00:00Z\"\nbindings: []\nplacements: []\n",
		"schema-invalid":  "apiVersion: state.jorisjonkers.dev/v1\nkind: ClusterState\ncluster: production\nbindings: none\n",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			fake := fakegithub.New(t)
			fake.PutFile(estateRepo, snapshotPath, []byte(doc))
			c := &collector.Collector{Cluster: "production", Inventory: kube, File: newFile(t, fake), Now: time.Now}
			_, err := c.Capture(ctx)
			if err == nil || !strings.Contains(err.Error(), "is not overwritten") && !errors.Is(err, collector.ErrOtherCluster) {
				t.Fatalf("capture: %v", err)
			}
			if now, _, _ := fake.File(estateRepo, snapshotPath); string(now) != doc || len(fake.Commits(estateRepo)) != 1 {
				t.Fatal("the snapshot was overwritten")
			}
		})
	}
	t.Run("GitHub failing", func(t *testing.T) {
		fake := fakegithub.New(t)
		fake.AddRepository(estateRepo)
		fake.FailWith(503)
		c := &collector.Collector{Cluster: "production", Inventory: kube, File: newFile(t, fake), Now: time.Now}
		if err := c.Pass(ctx); err == nil || !strings.Contains(err.Error(), "read the committed snapshot") {
			t.Fatalf("capture: %v", err)
		}
	})
}

func TestTheGrantIsNoWider(t *testing.T) {
	ctx := context.Background()
	cp := testenv.Shared(t)
	kube := grantCollector(t, cp)
	if _, err := kube.Client.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets: %v", err)
	}
	if err := kube.Client.CoreV1().Pods("default").Delete(ctx, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a pod: %v", err)
	}
	if _, err := kube.Facts(ctx); err != nil {
		t.Fatalf("the grant does not cover a capture: %v", err)
	}
	// Without the grant a capture fails and says what it could not list.
	bare, err := collector.NewKube(cp.As("delivery-system", "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Facts(ctx); err == nil || !strings.Contains(err.Error(), "list PersistentVolumes") {
		t.Fatalf("an ungranted capture: %v", err)
	}
}

func TestListsArePaged(t *testing.T) {
	ctx := context.Background()
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	for i := range 5 {
		createPod(t, cp.Kube, ns, "paged-"+string(rune('a'+i)), "paged", "node-p", corev1.PodRunning)
	}
	counted, counter := testenv.Counting(cp.Config)
	kube, err := collector.NewKube(counted)
	if err != nil {
		t.Fatal(err)
	}
	kube.PageSize = 2
	facts, err := kube.Facts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range facts.Placements {
		found = found || p == collector.Placement{Process: "paged", Node: "node-p"}
	}
	if !found {
		t.Fatalf("placements %v", facts.Placements)
	}
	if n := counter.Matching("GET /api/v1/pods"); n < 3 {
		t.Fatalf("%d page requests for at least 5 pods in pages of 2: %v", n, counter.Requests())
	}
}
