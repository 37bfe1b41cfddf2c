package wholepath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// gateRecord reads the gate's record of the Application.
func (a *app) gateRecord() releasemodel.Record {
	a.t.Helper()
	cm, err := a.e.Node.Kube.CoreV1().ConfigMaps(gateNS).Get(context.Background(), releasemodel.RecordConfigMap(a.ns, "auth"), metav1.GetOptions{})
	if err != nil {
		a.t.Fatalf("read the gate's record: %v", err)
	}
	r, err := releasemodel.DecodeRecord(a.ns, "auth", cm.Data)
	if err != nil {
		a.t.Fatalf("decode the gate's record: %v", err)
	}
	return r
}

// gateLogged is whether a gate replica logged msg about this test's
// namespace with every field in fields.
func (a *app) gateLogged(msg string, fields map[string]string) bool {
	for _, line := range a.gateLines() {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg || l["namespace"] != a.ns {
			continue
		}
		all := true
		for k, v := range fields {
			if got, _ := l[k].(string); !strings.Contains(got, v) {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// gateLeader is the pod holding the gate's Lease.
func (a *app) gateLeader() string {
	a.t.Helper()
	var leader string
	a.waitFor("a gate replica to lead", time.Minute, func() (bool, string) {
		l, err := a.e.Node.Kube.CoordinationV1().Leases(gateNS).Get(context.Background(), "release-gate", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprint(err)
		}
		pods, err := a.e.Node.Kube.CoreV1().Pods(gateNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=release-gate"})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(*l.Spec.HolderIdentity, p.Name) {
				leader = p.Name
				return true, ""
			}
		}
		return false, "the holder " + *l.Spec.HolderIdentity + " is no pod"
	})
	return leader
}

// scale sets a Deployment's replicas, as a person stopping a controller
// would, and waits until its pods are gone when it sets none.
func (a *app) scale(namespace, name string, replicas int) {
	a.t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	d, err := a.e.Node.Kube.AppsV1().Deployments(namespace).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		a.t.Fatalf("scale %s/%s: %v", namespace, name, err)
	}
	if replicas > 0 {
		return
	}
	selector := metav1.FormatLabelSelector(d.Spec.Selector)
	a.waitFor(name+"'s pods to be gone", 2*time.Minute, func() (bool, string) {
		pods, err := a.e.Node.Kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
}

// copies are the pods of process's new copy that run version.
func (a *app) copies(process, version string) []corev1.Pod {
	a.t.Helper()
	pods, err := a.e.Node.Kube.CoreV1().Pods(a.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + process})
	if err != nil {
		a.t.Fatalf("list %s's pods: %v", process, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if releaseOf(&p) == version && !strings.Contains(p.Name, "-primary-") && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// setFailing tells each pod of process's new copy at version whether to
// fail its traffic, on the member program's control port: the test runs on
// the node, which alone reaches a pod's address.
func (a *app) setFailing(process, version string, failing bool) {
	a.t.Helper()
	pods := a.copies(process, version)
	if len(pods) == 0 {
		a.t.Fatalf("no pod of %s's new copy runs %s", process, version)
	}
	for _, p := range pods {
		url := "http://" + p.Status.PodIP + ":8081/failing"
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, url, strings.NewReader(fmt.Sprint(failing)))
		if err != nil {
			a.t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			a.t.Fatalf("tell %s to fail %v: %v", p.Name, failing, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			a.t.Fatalf("tell %s to fail %v: %s", p.Name, failing, resp.Status)
		}
	}
}

// jobPods counts the pods a Job created.
func (a *app) jobPods(job string) int {
	a.t.Helper()
	pods, err := a.e.Node.Kube.CoreV1().Pods(a.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		a.t.Fatalf("list %s's pods: %v", job, err)
	}
	return len(pods.Items)
}

// gateLog keeps every line the gate's pods logged but their request lines,
// read every second from the node: the kubelet removes a deleted pod's
// logs, and a test beside another that kills a gate pod would lose the
// answers that pod gave.
var gateLog struct {
	once  sync.Once
	mu    sync.Mutex
	seen  map[string]bool
	lines []string
}

// readGateLog adds the lines the gate's pods have logged since the last
// read.
func readGateLog(n *testenv.Node) {
	gateLog.mu.Lock()
	defer gateLog.mu.Unlock()
	if gateLog.seen == nil {
		gateLog.seen = map[string]bool{}
	}
	for _, line := range strings.Split(n.PodLogs(gateNS, "release-gate"), "\n") {
		if line == "" || strings.Contains(line, `"msg":"request"`) || gateLog.seen[line] {
			continue
		}
		gateLog.seen[line] = true
		gateLog.lines = append(gateLog.lines, line)
	}
}

// keepGateLog reads the gate's log every second from the estate's start
// until the package's tests end.
func keepGateLog(n *testenv.Node) {
	gateLog.once.Do(func() {
		go func() {
			for {
				readGateLog(n)
				time.Sleep(time.Second)
			}
		}()
	})
}

// gateLines is what the gate's pods have logged so far, each line once.
func (a *app) gateLines() []string {
	readGateLog(a.e.Node)
	gateLog.mu.Lock()
	defer gateLog.mu.Unlock()
	return append([]string(nil), gateLog.lines...)
}
