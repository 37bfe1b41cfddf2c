package releaserecord_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/server"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// fleet is the release record as two replicas sharing the records in the
// real API server, under its grant, each answering the pushed facts over
// HTTP, and one real CloudEvents receiver.
type fleet struct {
	t     *testing.T
	urls  []string
	svcs  []*rr.Service
	store *rr.KubeStore
	recv  *cdeventstest.Receiver
}

func newFleet(t *testing.T) *fleet {
	ns, cfg := testenv.Shared(t).GrantRecords(t, rbacFile, serviceAccount)
	f := &fleet{t: t, recv: cdeventstest.Start(t)}
	for range 2 {
		store, err := rr.NewKubeStore(cfg, ns)
		if err != nil {
			t.Fatal(err)
		}
		sink, err := rr.NewCloudEventsSink(f.recv.URL)
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewJSONHandler(&testenv.LogBuffer{}, nil))
		svc := &rr.Service{Store: store, Sink: sink, Logger: logger}
		facts := &rr.Facts{Service: svc, Cluster: "prod-eu", Env: "prod", Token: token, Sources: []rr.Pushed{rr.Rollouts{}, rr.ArgoCD{}}, Logger: logger}
		srv := httptest.NewServer(server.Handler(server.Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Routes: facts.Routes, MaxBodyBytes: 1 << 20}))
		t.Cleanup(srv.Close)
		f.urls, f.svcs, f.store = append(f.urls, srv.URL), append(f.svcs, svc), store
	}
	return f
}

// send posts a fact to replica i; it fails nothing, so it may run off the
// test's goroutine.
func (f *fleet) send(i int, path, body string) (int, rr.Answer, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, f.urls[i]+path, strings.NewReader(body))
	if err != nil {
		return 0, rr.Answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, rr.Answer{}, err
	}
	defer resp.Body.Close()
	var a rr.Answer
	err = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a, err
}

// post sends a fact to replica i and holds the answer to code.
func (f *fleet) post(i int, path, body string, code int) rr.Answer {
	f.t.Helper()
	got, a, err := f.send(i, path, body)
	if err != nil || got != code {
		f.t.Fatalf("replica %d %s: %d %+v %v, want %d", i, path, got, a, err, code)
	}
	return a
}

func (f *fleet) record(id string) rr.Record {
	f.t.Helper()
	s, err := f.store.Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return s.Record
}

// ids are the distinct event ids the receiver took, in the order first taken.
func (f *fleet) ids() []string {
	var out []string
	for _, e := range f.recv.Events() {
		if id := e.CDEvent.GetId(); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func eventID(id, key string) string {
	t, outcome, _ := strings.Cut(key, ".")
	return rr.EventID(id, rr.Event{Type: rr.EventType(t), Outcome: outcome})
}

func syncOf(id, startedAt string) string {
	return argocd(func(m map[string]any) {
		m["releaseId"], m["operationPhase"], m["retryCount"], m["startedAt"] = id, "Running", 0, startedAt
		m["image"], m["revision"] = "ghcr.io/acme/docs:"+strings.Split(strings.Split(id, "@")[1], ":")[0], "rev-of-"+id[:10]
	})
}

func rolloutOf(id, phase, generation string) string {
	return rollout(func(m map[string]any) {
		m["releaseId"], m["phase"], m["generation"], m["observedGeneration"] = id, phase, generation, generation
	})
}

// TestTwoReplicasTakeFactsInAnyOrder: a Rollout's fact before its sync's,
// and a sync's before its Rollout's, each to another replica: no fact is
// lost, deploying goes out once, and the sync fills what the Rollout could
// not name.
func TestTwoReplicasTakeFactsInAnyOrder(t *testing.T) {
	f := newFleet(t)
	// 2.1.0: the Rollout first, to replica 0; its sync after, to replica 1.
	if a := f.post(0, "/facts/prod-eu", rolloutOf(idA, "Progressing", "7"), 200); a.State != rr.StateProgressing || !slices.Equal(a.Events, []string{"deploying"}) {
		t.Fatalf("the Rollout first: %+v", a)
	}
	if a := f.post(1, "/argocd/prod-eu", syncOf(idA, "2026-12-02T10:00:00Z"), 200); a.State != rr.StateProgressing || len(a.Events) != 0 {
		t.Fatalf("its sync after: %+v", a)
	}
	a := f.record(idA)
	if a.Image != "ghcr.io/acme/docs:2.1.0" || a.GitRevision == "" || a.ObjectGeneration != "Rollout/docs/docs=7" || a.SyncStartedAt.Format("15:04") != "10:00" {
		t.Fatalf("2.1.0: %+v", a)
	}
	// 2.2.0: the sync first, to replica 1; the Rollout after, to replica 0.
	if a := f.post(1, "/argocd/prod-eu", syncOf(idB, "2026-12-02T11:00:00Z"), 200); a.State != rr.StateMerged {
		t.Fatalf("the sync first: %+v", a)
	}
	if a := f.post(0, "/facts/prod-eu", rolloutOf(idB, "Progressing", "8"), 200); !slices.Equal(a.Events, []string{"deploying"}) {
		t.Fatalf("its Rollout after: %+v", a)
	}
	f.post(1, "/facts/prod-eu", rolloutOf(idB, "Healthy", "8"), 200)
	if a := f.record(idA); a.State != rr.StateSuperseded || a.SupersededBy != idB {
		t.Fatalf("2.1.0 after 2.2.0: %+v", a)
	}
	want := []string{eventID(idA, "deploying"), eventID(idB, "deploying"), eventID(idB, "deployed")}
	if got := f.ids(); !slices.Equal(got, want) {
		t.Fatalf("events %v", f.recv.Types())
	}
}

// TestTwoReplicasKeepEverySentEvent: replica 0 sends failed.aborted, and
// before it writes, replica 1 writes the release healthy. Replica 0's write
// conflicts; the write it retries keeps failed.aborted, so the record, and
// the figures read from it, count the change failure the sink was told of.
func TestTwoReplicasKeepEverySentEvent(t *testing.T) {
	f := newFleet(t)
	f.post(0, "/facts/prod-eu", rolloutOf(idA, "Progressing", "7"), 200)
	// The other replica's fact runs inside replica 0's send, off the test's
	// goroutine: it reports, it does not stop the test.
	f.svcs[0].Sink = &racingSink{Sink: f.svcs[0].Sink, other: func() {
		if code, a, err := f.send(1, "/facts/prod-eu", rolloutOf(idA, "Healthy", "7")); err != nil || code != 200 {
			t.Errorf("the other replica's Healthy: %d %+v %v", code, a, err)
		}
	}}
	degraded := rollout(func(m map[string]any) { m["phase"], m["aborted"], m["message"] = "Degraded", true, "analysis failed" })
	if a := f.post(0, "/facts/prod-eu", degraded, 200); !slices.Equal(a.Events, []string{"failed.aborted"}) || a.State != rr.StateHealthy {
		t.Fatalf("the losing write: %+v", a)
	}
	r := f.record(idA)
	if r.State != rr.StateHealthy || !slices.Equal(r.EmittedLive, []string{"deployed", "deploying", "failed.aborted"}) {
		t.Fatalf("record %+v", r)
	}
	if got := releasehistory.OutcomeOf(r); got != releasehistory.OutcomeFailed {
		t.Fatalf("the figures count %s", got)
	}
	sent := map[string]bool{}
	for _, id := range f.ids() {
		sent[id] = true
	}
	for _, key := range r.EmittedLive {
		if !sent[eventID(idA, key)] {
			t.Errorf("the record lists %s, which the sink never took", key)
		}
	}
	if len(sent) != len(r.EmittedLive) {
		t.Fatalf("the sink took %v, the record admits %v", f.recv.Types(), r.EmittedLive)
	}
}

// TestTwoReplicasOrderReleasesByTheirFacts: a late first notification of an
// older release, to the other replica, does not supersede the newer one:
// by the Rollout's generation, and by the start of Argo CD's sync.
func TestTwoReplicasOrderReleasesByTheirFacts(t *testing.T) {
	f := newFleet(t)
	f.post(0, "/facts/prod-eu", rolloutOf(idB, "Progressing", "8"), 200)
	f.post(0, "/argocd/prod-eu", syncOf(idB, "2026-12-02T11:00:00Z"), 200)
	// 2.1.0's Rollout notification, at generation 7, comes late.
	if a := f.post(1, "/facts/prod-eu", rolloutOf(idA, "Progressing", "7"), 200); a.State != rr.StateSuperseded || len(a.Events) != 0 {
		t.Fatalf("a late Rollout fact: %+v", a)
	}
	// 2.1.1's sync notification, begun before 2.2.0's, comes late.
	if a := f.post(1, "/argocd/prod-eu", syncOf(idC, "2026-12-02T10:30:00Z"), 200); a.State != rr.StateSuperseded {
		t.Fatalf("a late sync: %+v", a)
	}
	if b := f.record(idB); b.State != rr.StateProgressing || b.SupersededBy != "" {
		t.Fatalf("2.2.0: %+v", b)
	}
	for _, id := range []string{idA, idC} {
		if r := f.record(id); r.State != rr.StateSuperseded || r.SupersededBy != idB {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	// Their later facts send nothing; a newer sync supersedes 2.2.0.
	f.post(0, "/facts/prod-eu", rolloutOf(idA, "Healthy", "7"), 202)
	const idD = "docs@2.3.0:prod-eu/prod"
	f.post(1, "/argocd/prod-eu", syncOf(idD, "2026-12-02T12:00:00Z"), 200)
	if b := f.record(idB); b.State != rr.StateSuperseded || b.SupersededBy != idD {
		t.Fatalf("2.2.0 after 2.3.0: %+v", b)
	}
	if got := f.ids(); !slices.Equal(got, []string{eventID(idB, "deploying")}) {
		t.Fatalf("events %v", f.recv.Types())
	}
}
