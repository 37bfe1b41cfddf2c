package releasehistory_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// SweepRBAC is the sweep's grant, the file the CronJob runs under, and
// sweepAccount the ServiceAccount it grants.
const (
	SweepRBAC    = "../../deploy/release-record-sweep/rbac.yaml"
	sweepAccount = "release-record-sweep"
)

// put writes records as the release record does, as the cluster's admin.
func put(t testing.TB, kube kubernetes.Interface, ns string, recs ...rr.Record) {
	t.Helper()
	for _, r := range recs {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name(), Namespace: ns, Labels: r.Labels()}, Data: r.Data()}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// stallEvents are the ReleaseStalled Events in ns, by the record each is on.
func stallEvents(t testing.TB, kube kubernetes.Interface, ns string) map[string]int {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", rh.StalledReason).String()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range list.Items {
		out[e.InvolvedObject.Name]++
	}
	return out
}

func records(t testing.TB, kube kubernetes.Interface, ns string) map[string]corev1.ConfigMap {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: rr.LabelManagedBy + "=" + rr.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, cm := range list.Items {
		out[cm.Name] = cm
	}
	return out
}

func kubeSweeper(t testing.TB, cfg *rest.Config, ns string) (*rh.Sweeper, *bytes.Buffer, *testenv.LogBuffer) {
	t.Helper()
	cluster, err := rh.NewKubeSweep(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	out, logs := &bytes.Buffer{}, &testenv.LogBuffer{}
	return &rh.Sweeper{Cluster: cluster, Out: out, Logger: slog.New(slog.NewJSONHandler(logs, nil))}, out, logs
}

// clock is the sweeps' time in these tests: records' times are offsets
// from it, and a record created now is 20 days old to it.
var clock = time.Now().Add(20 * day).Truncate(time.Second)

func before(d time.Duration) time.Time { return clock.Add(-d) }

// TestSweepRaisesAStallOnce: a merged and a progressing release with no
// fact for the stall time each get one ReleaseStalled Event on their
// record, remembered in the label; a second sweep raises nothing; the
// release moving on to its next state, still stalled, is said again.
func TestSweepRaisesAStallOnce(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, SweepRBAC, sweepAccount)
	merged := rec(t, "1", rr.StateMerged, before(time.Hour), before(time.Hour))
	progressing := rec(t, "2", rr.StateProgressing, before(3*time.Hour), before(46*time.Minute))
	fresh := rec(t, "3", rr.StateProgressing, before(3*time.Hour), before(10*time.Minute))
	put(t, cp.Kube, ns, merged, progressing, fresh)
	s, out, logs := kubeSweeper(t, cfg, ns)
	swept, err := s.Sweep(context.Background(), policy, clock)
	if err != nil || swept.Raised != 2 || swept.Records != 3 {
		t.Fatalf("%+v %v\n%s", swept, err, logs)
	}
	if got := stallEvents(t, cp.Kube, ns); len(got) != 2 || got[merged.Name()] != 1 || got[progressing.Name()] != 1 {
		t.Fatalf("events %v", got)
	}
	stored := records(t, cp.Kube, ns)
	for r, want := range map[string]string{merged.Name(): "merged", progressing.Name(): "progressing", fresh.Name(): ""} {
		if got := stored[r].Labels[rh.LabelStallAlerted]; got != want {
			t.Errorf("%s labelled %q, want %q", r, got, want)
		}
	}
	ev, err := cp.Kube.CoreV1().Events(ns).Get(context.Background(), rh.StallEventName(plannedStall(t, merged)), metav1.GetOptions{})
	if err != nil || ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "ConfigMap" || ev.InvolvedObject.UID != stored[merged.Name()].UID ||
		!strings.Contains(ev.Message, merged.ReleaseID) {
		t.Fatalf("the event: %+v %v", ev, err)
	}
	if n := len(testenv.JSONLines(t, out.String())); n != 2 {
		t.Fatalf("%d lines:\n%s", n, out)
	}

	out.Reset()
	if swept, err := s.Sweep(context.Background(), policy, clock); err != nil || swept.Raised != 0 || out.Len() != 0 {
		t.Fatalf("the second sweep: %+v %v\n%s", swept, err, out)
	}
	if got := stallEvents(t, cp.Kube, ns); len(got) != 2 || got[merged.Name()] != 1 {
		t.Fatalf("events after the second sweep %v", got)
	}

	// The release record writes the record whole as it moves on: the label
	// goes, and the stall of the next state is another Event.
	moved := merged
	moved.State, moved.StateAt, moved.LastFactAt = rr.StateProgressing, before(50*time.Minute), before(50*time.Minute)
	cm := stored[merged.Name()]
	cm.Labels, cm.Data = moved.Labels(), moved.Data()
	if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Update(context.Background(), &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if swept, err := s.Sweep(context.Background(), policy, clock); err != nil || swept.Raised != 1 {
		t.Fatalf("the next state's sweep: %+v %v", swept, err)
	}
	if got := stallEvents(t, cp.Kube, ns); got[merged.Name()] != 2 || got[progressing.Name()] != 1 {
		t.Fatalf("events after the next state %v", got)
	}
}

// plannedStall is the stall the sweep plans for r.
func plannedStall(t *testing.T, r rr.Record) rh.Stall {
	t.Helper()
	plan := rh.PlanSweep([]rh.Entry{{Name: r.Name(), Record: r}}, policy, clock)
	if len(plan.Stalls) != 1 {
		t.Fatalf("no stall planned for %s", r.ReleaseID)
	}
	return plan.Stalls[0]
}

// TestSweepDeletesPastTheTTL: with KEEP_HEALTHY 2, of a service's five
// finished releases that reached healthy, all past the TTL, the newest two
// are kept; a failure never healthy past the TTL goes, one within it
// stays; merged and progressing records stay however old; a legacy record
// goes by its creation time; an unreadable one is reported and kept.
func TestSweepDeletesPastTheTTL(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, SweepRBAC, sweepAccount)
	var window []rr.Record
	for i, v := range []string{"1", "2", "3", "4", "5"} {
		at := before(time.Duration(40-i) * day)
		window = append(window, healthy(rec(t, v, rr.StateSuperseded, at, at), at))
	}
	failed := rec(t, "6", rr.StateAborted, before(30*day), before(15*day))
	recent := rec(t, "7", rr.StateAborted, before(30*day), before(13*day))
	merged := rec(t, "8", rr.StateMerged, before(30*day), before(30*day))
	progressing := rec(t, "9", rr.StateProgressing, before(30*day), before(30*day))
	put(t, cp.Kube, ns, append(window, failed, recent, merged, progressing)...)
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "release-legacy", Namespace: ns, Labels: map[string]string{rr.LabelManagedBy: rr.ManagedBy}},
		Data: map[string]string{"releaseId": "docs@0.9:prod-eu/prod"}}
	bad := rec(t, "10", rr.StateAborted, before(30*day), before(20*day))
	unreadable := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: bad.Name(), Namespace: ns, Labels: bad.Labels()},
		Data: map[string]string{"releaseId": bad.ReleaseID, "state": "aborted"}}
	for _, cm := range []*corev1.ConfigMap{legacy, unreadable} {
		if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, out, logs := kubeSweeper(t, cfg, ns)
	swept, err := s.Sweep(context.Background(), policy, clock)
	if err != nil || swept.Deleted != 5 || swept.Unreadable != 1 || swept.Records != 11 {
		t.Fatalf("%+v %v\n%s", swept, err, logs)
	}
	var kept []string
	for name := range records(t, cp.Kube, ns) {
		kept = append(kept, name)
	}
	want := []string{window[3].Name(), window[4].Name(), recent.Name(), merged.Name(), progressing.Name(), bad.Name()}
	slices.Sort(kept)
	slices.Sort(want)
	if !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
	var deleted []string
	for _, l := range testenv.JSONLines(t, out.String()) {
		if l["action"] == "deleted" {
			deleted = append(deleted, l["record"].(string))
		}
	}
	if len(deleted) != 5 || !slices.Contains(deleted, "release-legacy") || !slices.Contains(deleted, failed.Name()) {
		t.Fatalf("deleted lines %v:\n%s", deleted, out)
	}
	if !strings.Contains(logs.String(), `"msg":"record unreadable","record":"`+bad.Name()+`"`) {
		t.Fatalf("the unreadable record is not said:\n%s", logs)
	}
}

// movingCluster is the sweep's cluster with the release record writing
// every record between the sweep's list and its writes.
type movingCluster struct {
	rh.SweepCluster
	move func()
}

func (m movingCluster) List(ctx context.Context) ([]rh.Entry, error) {
	entries, err := m.SweepCluster.List(ctx)
	m.move()
	return entries, err
}

// TestSweepLeavesAMovedRecordAlone: a record the release record wrote
// after the list is neither labelled nor deleted, and that is no failure.
func TestSweepLeavesAMovedRecordAlone(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, SweepRBAC, sweepAccount)
	stalled := rec(t, "1", rr.StateMerged, before(time.Hour), before(time.Hour))
	old := rec(t, "2", rr.StateAborted, before(30*day), before(20*day))
	put(t, cp.Kube, ns, stalled, old)
	s, _, logs := kubeSweeper(t, cfg, ns)
	s.Cluster = movingCluster{SweepCluster: s.Cluster, move: func() {
		for _, cm := range records(t, cp.Kube, ns) {
			cm.Data["lastError"] = "moved on"
			if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Update(context.Background(), &cm, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}}
	swept, err := s.Sweep(context.Background(), policy, clock)
	if err != nil || swept.Moved != 2 || swept.Deleted != 0 {
		t.Fatalf("%+v %v\n%s", swept, err, logs)
	}
	stored := records(t, cp.Kube, ns)
	if len(stored) != 2 || stored[stalled.Name()].Labels[rh.LabelStallAlerted] != "" {
		t.Fatalf("records %v", stored)
	}
	if n := strings.Count(logs.String(), "left to the next sweep"); n != 2 {
		t.Fatalf("%d moved lines:\n%s", n, logs)
	}
}

// TestSweepFailsHavingDoneTheRest: under a grant without delete, the
// sweep raises its stalls and fails on each deletion, naming it.
func TestSweepFailsHavingDoneTheRest(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, SweepRBAC, sweepAccount, "verbs: [list, patch, delete]", "verbs: [list, patch]")
	stalled := rec(t, "1", rr.StateMerged, before(time.Hour), before(time.Hour))
	old := rec(t, "2", rr.StateAborted, before(30*day), before(20*day))
	older := rec(t, "3", rr.StateAborted, before(30*day), before(21*day))
	put(t, cp.Kube, ns, stalled, old, older)
	s, _, logs := kubeSweeper(t, cfg, ns)
	swept, err := s.Sweep(context.Background(), policy, clock)
	if err == nil || !strings.Contains(err.Error(), "delete the record "+ns+"/"+old.Name()) ||
		!strings.Contains(err.Error(), "delete the record "+ns+"/"+older.Name()) || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("error %v", err)
	}
	if swept.Raised != 1 || swept.Deleted != 0 {
		t.Fatalf("%+v\n%s", swept, logs)
	}
	if got := stallEvents(t, cp.Kube, ns); got[stalled.Name()] != 1 || len(records(t, cp.Kube, ns)) != 3 {
		t.Fatalf("events %v", got)
	}
}
