package releaserecord_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The tests run the store as the service's ServiceAccount, under the grant
// its RBAC file gives.
const (
	rbacFile       = "../../deploy/release-record/rbac.yaml"
	serviceAccount = "release-record"
)

func TestKubeStoreUnderItsGrant(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, rbacFile, serviceAccount)
	ctx := context.Background()
	store, err := rr.NewKubeStore(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := store.Get(ctx, idA); err != nil || s.Record.Exists() {
		t.Fatalf("no record yet: %+v %v", s, err)
	}
	rec := rr.NewRecord(rr.Release{ID: mustID(t, idA)}, t0)
	created, err := store.Put(ctx, rr.Stored{Record: rec})
	if err != nil || created.Version == "" {
		t.Fatalf("create: %+v %v", created, err)
	}
	if _, err := store.Put(ctx, rr.Stored{Record: rec}); !errors.Is(err, rr.ErrConflict) {
		t.Fatalf("a second create: %v", err)
	}
	got, err := store.Get(ctx, idA)
	if err != nil || got.Version != created.Version || !reflectEqual(got.Record, rec) {
		t.Fatalf("get: %+v %v", got, err)
	}
	cm, err := cp.Kube.CoreV1().ConfigMaps(ns).Get(ctx, rr.RecordName(idA), metav1.GetOptions{})
	if err != nil || cm.Labels[rr.LabelApp] != "docs" || cm.Labels[rr.LabelEnv] != "prod" || cm.Labels[rr.LabelCluster] != "prod-eu" ||
		cm.Labels[rr.LabelManagedBy] != "release-record" || len(cm.Data) != len(rr.Keys) {
		t.Fatalf("the ConfigMap: %+v %v", cm, err)
	}
	moved := rec
	moved.State = rr.StateProgressing
	updated, err := store.Put(ctx, rr.Stored{Record: moved, Version: created.Version})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, rr.Stored{Record: moved, Version: created.Version}); !errors.Is(err, rr.ErrConflict) {
		t.Fatalf("a write over a stale version: %v", err)
	}
	other := rr.NewRecord(rr.Release{ID: mustID(t, "docs@2.1.0:prod-eu/stage")}, t0)
	if _, err := store.Put(ctx, rr.Stored{Record: other}); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx, "docs", "prod", "prod-eu")
	if err != nil || len(list) != 1 || list[0].Record.State != rr.StateProgressing {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := store.Drift(ctx, updated, rr.Drift{Message: "the pod hash moved from a to b"}); err != nil {
		t.Fatal(err)
	}
	if err := store.Drift(ctx, updated, rr.Drift{Message: "the pod hash moved from a to b"}); err != nil {
		t.Fatalf("the same drift again: %v", err)
	}
	events, err := cp.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(events.Items) != 1 || events.Items[0].Reason != "ReleaseDrift" || events.Items[0].InvolvedObject.Name != rr.RecordName(idA) ||
		events.Items[0].Type != corev1.EventTypeWarning {
		t.Fatalf("drift events: %+v %v", events, err)
	}
}

// TestAnUnreadableRecordIsReportedAndNeverOverwritten: a ConfigMap of the
// record's name that does not decode, or that the service does not manage,
// stops the fact and is left as it is.
func TestAnUnreadableRecordIsReportedAndNeverOverwritten(t *testing.T) {
	cp := testenv.Shared(t)
	ns, cfg := cp.GrantRecords(t, rbacFile, serviceAccount)
	ctx := context.Background()
	store, err := rr.NewKubeStore(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	for id, cm := range map[string]*corev1.ConfigMap{
		idA: {ObjectMeta: metav1.ObjectMeta{Name: rr.RecordName(idA), Labels: map[string]string{rr.LabelManagedBy: rr.ManagedBy}},
			Data: map[string]string{"releaseId": idA, "state": "sideways"}},
		idB: {ObjectMeta: metav1.ObjectMeta{Name: rr.RecordName(idB)}, Data: rr.NewRecord(rr.Release{ID: mustID(t, idB)}, t0).Data()},
	} {
		if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		recv := cdeventstest.Start(t)
		sink, _ := rr.NewCloudEventsSink(recv.URL)
		logs := &testenv.LogBuffer{}
		svc := &rr.Service{Store: store, Sink: sink, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
		if _, err := svc.Take(ctx, rr.Fact{Phase: rr.PhaseHealthy, Release: rr.Release{ID: mustID(t, id)}}); !errors.Is(err, rr.ErrUnreadable) {
			t.Fatalf("%s: %v", id, err)
		}
		after, _ := cp.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
		if after.ResourceVersion == "" || after.Data["state"] != cm.Data["state"] || len(recv.Events()) != 0 || !strings.Contains(logs.String(), "record unreadable") {
			t.Fatalf("%s: overwritten or sent: %+v %v\n%s", id, after.Data, recv.Types(), logs)
		}
	}
}

// TestTwoReplicasShareTheRecords: two services over one namespace take the
// same release's facts at once; the conflicts are read and reduced again,
// and the record ends where one service alone would have left it.
func TestTwoReplicasShareTheRecords(t *testing.T) {
	ns, cfg := testenv.Shared(t).GrantRecords(t, rbacFile, serviceAccount)
	ctx := context.Background()
	recv := cdeventstest.Start(t)
	var replicas []*rr.Service
	for range 2 {
		store, err := rr.NewKubeStore(cfg, ns)
		if err != nil {
			t.Fatal(err)
		}
		sink, _ := rr.NewCloudEventsSink(recv.URL)
		replicas = append(replicas, &rr.Service{Store: store, Sink: sink, Logger: slog.New(slog.NewJSONHandler(&testenv.LogBuffer{}, nil))})
	}
	release := rr.Release{ID: mustID(t, idA)}
	if _, err := replicas[0].Take(ctx, rr.Fact{Phase: rr.PhaseMerged, Release: release}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			phase := rr.PhaseProgressing
			if i >= 10 {
				phase = rr.PhaseHealthy
			}
			if _, err := replicas[i%2].Take(ctx, rr.Fact{Phase: phase, Release: release, PodHash: "h1"}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := replicas[1].Take(ctx, rr.Fact{Phase: rr.PhaseHealthy, Release: release, PodHash: "h1"}); err != nil {
		t.Fatal(err)
	}
	got, err := replicas[0].Store.Get(ctx, idA)
	if err != nil || got.Record.State != rr.StateHealthy || !slices.Equal(got.Record.EmittedLive, []string{"deployed", "deploying"}) {
		t.Fatalf("%+v %v", got.Record, err)
	}
	// Each event may have gone out more than once across the races; every
	// copy carries the one id.
	ids := map[string]bool{}
	for _, e := range recv.Events() {
		ids[e.CDEvent.GetId()] = true
	}
	if len(ids) != 2 || !ids[rr.EventID(idA, rr.Event{Type: rr.EventDeploying})] || !ids[rr.EventID(idA, rr.Event{Type: rr.EventDeployed})] {
		t.Fatalf("ids %v of %v", ids, recv.Types())
	}
}

// TestNoGrantGoesStateless: a store whose namespace the grant does not
// reach cannot read or write; the service sends the events regardless and
// says so once.
func TestNoGrantGoesStateless(t *testing.T) {
	cp := testenv.Shared(t)
	_, cfg := cp.GrantRecords(t, rbacFile, serviceAccount)
	ctx := context.Background()
	store, err := rr.NewKubeStore(cfg, cp.Namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	recv := cdeventstest.Start(t)
	sink, _ := rr.NewCloudEventsSink(recv.URL)
	logs := &testenv.LogBuffer{}
	svc := &rr.Service{Store: store, Sink: sink, Logger: slog.New(slog.NewJSONHandler(logs, nil)), Now: func() time.Time { return now }}
	for range 3 {
		out, err := svc.Take(ctx, rr.Fact{Phase: rr.PhaseHealthy, Release: rr.Release{ID: mustID(t, idA)}})
		if err != nil || out.Recorded || !slices.Equal(out.Events, []string{"deploying", "deployed"}) {
			t.Fatalf("%+v %v", out, err)
		}
	}
	if n := strings.Count(logs.String(), "going on stateless"); n != 1 {
		t.Fatalf("%d lines:\n%s", n, logs)
	}
	ids := map[string]bool{}
	for _, e := range recv.Events() {
		ids[e.CDEvent.GetId()] = true
	}
	if len(recv.Events()) != 6 || len(ids) != 2 {
		t.Fatalf("%d events, %d ids", len(recv.Events()), len(ids))
	}
}
