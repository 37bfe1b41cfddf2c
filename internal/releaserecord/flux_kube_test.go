package releaserecord_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gaterelease "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fluxunit"
)

// fluxWorld is the API server with a Project's unit, its source and its
// Canaries, whose statuses the test writes, and a release record looking at
// them under its own grant.
type fluxWorld struct {
	t             *testing.T
	cp            *testenv.ControlPlane
	fluxNS, appNS string
	store         *rr.KubeStore
	recv          *cdeventstest.Receiver
	observer      *rr.Observer
	logs          *testenv.LogBuffer
	// recordNS is where the records are, and the gate's (GATE_NAMESPACE);
	// gated, when set, is the revision the Canary's gate webhook carries.
	recordNS, gated string
}

func newFluxWorld(t *testing.T) *fluxWorld {
	cp := testenv.Shared(t)
	recordNS, cfg := cp.GrantRecords(t, rbacFile, serviceAccount)
	w := &fluxWorld{t: t, cp: cp, fluxNS: cp.Namespace(t), appNS: cp.Namespace(t), recv: cdeventstest.Start(t), logs: &testenv.LogBuffer{},
		recordNS: recordNS}
	var err error
	if w.store, err = rr.NewKubeStore(cfg, recordNS); err != nil {
		t.Fatal(err)
	}
	kube, err := releasepath.NewKube(cfg)
	if err != nil {
		t.Fatal(err)
	}
	origins, err := rr.NewKubeOrigins(cfg)
	if err != nil {
		t.Fatal(err)
	}
	holds, err := rr.NewGateRecords(cfg, recordNS)
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = rw.Write([]byte(`{"readAt":"2026-12-02T10:00:00Z","truncated":false,"applications":[]}`))
	}))
	t.Cleanup(gate.Close)
	sink, _ := rr.NewCloudEventsSink(w.recv.URL)
	logger := slog.New(slog.NewJSONHandler(w.logs, nil))
	svc := &rr.Service{Store: w.store, Sink: sink, Logger: logger}
	w.observer = &rr.Observer{Service: svc, Logger: logger,
		Source: &rr.Flux{Namespace: w.fluxNS, Cluster: "prod-eu", Env: "prod", Kube: kube, Gate: releasepath.NewGateClient(gate.URL), Origins: origins, Holds: holds, Logger: logger}}
	return w
}

func (w *fluxWorld) apply(format string, args ...any) {
	w.t.Helper()
	if _, err := w.cp.Apply(context.Background(), fmt.Appendf(nil, format, args...)); err != nil {
		w.t.Fatal(err)
	}
}

// unit writes project-docs at version, pinned to pin, applied as applied
// says, with Ready ready and the Canary api in its inventory.
func (w *fluxWorld) unit(version, pin, applied, ready, reason string) {
	w.t.Helper()
	fluxunit.Unit{Namespace: w.fluxNS, Project: "docs", Pin: pin, Repository: "acme/docs", Version: version,
		Applied: "latest@" + applied, Attempted: "latest@" + pin, Origin: "main@sha1:commit-of-" + applied,
		Ready: ready, Reason: reason, Message: "as the test says", Inventory: []fluxunit.Entry{fluxunit.Canary(w.appNS, "api")}}.Apply(w.t, w.cp)
}

// canary writes the Canary api in phase, its spec applied and, settled,
// promoted, with its Deployment and primary.
func (w *fluxWorld) canary(phase, spec string, settled bool) {
	w.t.Helper()
	promoted, primary := spec, "img:"+spec
	if !settled {
		promoted, primary = "spec-before", "img:before"
	}
	webhooks := ""
	if w.gated != "" {
		webhooks = `, webhooks: [{name: gate, url: "http://release-gate.example/checks", metadata: {application: docs, revision: "` + w.gated + `"}}]`
	}
	w.apply(`apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: api, namespace: %[1]s}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
  service: {port: 8080}
  analysis: {interval: 30s, iterations: 4, threshold: 3%[7]s}
status:
  phase: %[2]s
  lastAppliedSpec: %[3]s
  lastPromotedSpec: %[4]s
  conditions: [{type: Promoted, status: "Unknown", reason: %[2]s, message: "as the test says", lastUpdateTime: "%[6]s", lastTransitionTime: "%[6]s"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: api}}
  template: {metadata: {labels: {app: api}}, spec: {containers: [{name: app, image: "img:%[3]s"}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api-primary, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: api-primary}}
  template: {metadata: {labels: {app: api-primary}}, spec: {containers: [{name: app, image: "%[5]s"}]}}`,
		w.appNS, phase, spec, promoted, primary, time.Now().UTC().Format(time.RFC3339), webhooks)
}

func (w *fluxWorld) pass() {
	w.t.Helper()
	if err := w.observer.Pass(context.Background()); err != nil {
		w.t.Fatalf("pass: %v\n%s", err, w.logs)
	}
}

func (w *fluxWorld) record(id string) rr.Record {
	w.t.Helper()
	s, err := w.store.Get(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return s.Record
}

func (w *fluxWorld) expect(id string, state rr.State, types ...string) {
	w.t.Helper()
	if r := w.record(id); r.State != state {
		w.t.Fatalf("%s is %q, want %q\n%s", id, r.State, state, w.logs)
	}
	if got := w.recv.Types(); !slices.Equal(got, types) {
		w.t.Fatalf("events %v, want %v", got, types)
	}
}

const (
	deploying = "dev.cdeventsx.delivery-release.deploying.0.1.0"
	failedEv  = "dev.cdeventsx.delivery-release.failed.0.1.0"
	deployed  = "dev.cdevents.service.deployed.0.3.0"
	upgraded  = "dev.cdevents.service.upgraded.0.3.0"
)

// TestAReleaseOnTheFluxPath walks Flux-shaped units and a Canary through
// every state, the statuses written by the test as Flux and Flagger would.
func TestAReleaseOnTheFluxPath(t *testing.T) {
	w := newFluxWorld(t)
	pin2 := "sha256:" + strings.Repeat("2", 64)

	// The pin moved; Flux has not applied it: merged.
	w.canary("Succeeded", "spec-1", true)
	w.unit("2.1.0", pin1, pin0, "Unknown", "Progressing")
	w.pass()
	w.expect(idA, rr.StateMerged)
	if r := w.record(idA); r.Image != pin1 || r.GitURL != "https://github.com/acme/docs" {
		t.Fatalf("%+v", r)
	}
	// Applied, and Flagger analysing: progressing.
	w.unit("2.1.0", pin1, pin1, "Unknown", "Progressing")
	w.canary("Progressing", "spec-2", false)
	w.pass()
	w.expect(idA, rr.StateProgressing, deploying)
	if r := w.record(idA); r.GitRevision != "commit-of-"+pin1 {
		t.Fatalf("git revision %q", r.GitRevision)
	}
	w.pass() // a repeat: nothing
	w.expect(idA, rr.StateProgressing, deploying)
	// Promoted and settled: healthy, with the pod hash.
	w.canary("Succeeded", "spec-2", true)
	w.unit("2.1.0", pin1, pin1, "True", "ReconciliationSucceeded")
	w.pass()
	w.expect(idA, rr.StateHealthy, deploying, deployed)
	if r := w.record(idA); r.PodHash != "api=spec-2" {
		t.Fatalf("pod hash %q", r.PodHash)
	}
	// Someone changes the member and Flagger promotes it: drift, no event.
	w.canary("Succeeded", "spec-2b", true)
	w.pass()
	w.expect(idA, rr.StateHealthy, deploying, deployed)
	if r := w.record(idA); !strings.Contains(r.Drift, "api=spec-2 to api=spec-2b") {
		t.Fatalf("drift %q", r.Drift)
	}
	// The next release: merged supersedes 2.1.0; Flux fails to build it.
	w.unit("2.2.0", pin2, pin1, "False", "BuildFailed")
	w.pass()
	w.expect(idB, rr.StateSyncFailed, deploying, deployed, deploying, failedEv)
	if r := w.record(idA); r.State != rr.StateSuperseded || r.SupersededBy != idB {
		t.Fatalf("2.1.0: %+v", r)
	}
	w.pass() // Flux retries and fails again: nothing more
	w.expect(idB, rr.StateSyncFailed, deploying, deployed, deploying, failedEv)
	// Fixed; applied; Flagger fails the Canary: aborted.
	w.unit("2.2.0", pin2, pin2, "Unknown", "Progressing")
	w.canary("Progressing", "spec-3", false)
	w.pass()
	w.expect(idB, rr.StateProgressing, deploying, deployed, deploying, failedEv)
	w.canary("Failed", "spec-3", false)
	w.pass()
	w.expect(idB, rr.StateAborted, deploying, deployed, deploying, failedEv, failedEv)
	// Flagger tries the release again and promotes it: healthy, an upgrade.
	w.canary("Progressing", "spec-3", false)
	w.pass()
	w.expect(idB, rr.StateProgressing, deploying, deployed, deploying, failedEv, failedEv)
	w.canary("Succeeded", "spec-3", true)
	w.unit("2.2.0", pin2, pin2, "True", "ReconciliationSucceeded")
	w.pass()
	w.expect(idB, rr.StateHealthy, deploying, deployed, deploying, failedEv, failedEv, upgraded)
	if got := w.record(idB); !slices.Equal(got.EmittedLive, []string{"deploying", "failed.aborted", "failed.sync-failed", "upgraded"}) {
		t.Fatalf("sent %v", got.EmittedLive)
	}
}

// TestFluxEarlyProgressAndFirstFailure: a Canary analysing the pin Flux
// attempted, before Flux records it applied, is the release progressing;
// the source's first failed fetch of the next pin, while it still retries
// and its status.observedGeneration lags, is that release's sync failure.
func TestFluxEarlyProgressAndFirstFailure(t *testing.T) {
	w := newFluxWorld(t)
	pin2 := "sha256:" + strings.Repeat("2", 64)
	w.canary("Succeeded", "spec-1", true)
	w.unit("2.1.0", pin1, pin0, "Unknown", "Progressing")
	w.pass()
	w.expect(idA, rr.StateMerged)
	// Flux attempted the pin and waits on its health checks; Flagger
	// analyses the new spec.
	w.canary("Progressing", "spec-2", false)
	w.pass()
	w.expect(idA, rr.StateProgressing, deploying)

	// The next pin: the source's first fetch fails, and it retries.
	w.unit("2.2.0", pin2, pin0, "Unknown", "Progressing")
	objs, err := w.cp.Apply(context.Background(), fmt.Appendf(nil, `apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-docs, namespace: %s}
spec: {interval: 10m, url: "oci://registry.example/estate/docs", ref: {digest: "%s"}}`, w.fluxNS, pin2))
	if err != nil {
		t.Fatal(err)
	}
	gen := objs[0].GetGeneration()
	w.apply(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-docs, namespace: %[1]s}
spec: {interval: 10m, url: "oci://registry.example/estate/docs", ref: {digest: "%[2]s"}}
status:
  observedGeneration: %[3]d
  conditions:
    - {type: Reconciling, status: "True", reason: ProgressingWithRetry, message: "retrying", observedGeneration: %[4]d, lastTransitionTime: "2026-12-02T10:00:00Z"}
    - {type: Ready, status: "False", reason: OCIArtifactPullFailed, message: "manifest unknown", observedGeneration: %[4]d, lastTransitionTime: "2026-12-02T10:00:00Z"}`,
		w.fluxNS, pin2, gen-1, gen)
	w.pass()
	w.expect(idB, rr.StateSyncFailed, deploying, deploying, failedEv)
	if r := w.record(idB); r.LastError != "OCIArtifactPullFailed: manifest unknown" {
		t.Fatalf("lastError %q", r.LastError)
	}
	if r := w.record(idA); r.State != rr.StateSuperseded || r.SupersededBy != idB {
		t.Fatalf("2.1.0: %+v", r)
	}
	w.pass() // it retries and fails again: nothing more
	w.expect(idB, rr.StateSyncFailed, deploying, deploying, failedEv)
}

// TestFluxAStaleLookDoesNotSupersedeANewerRelease: one replica reads the
// unit at 2.1.0 and is slow to take what it saw; meanwhile the unit moves
// to 2.2.0 and another look records it. The stale look's first fact of
// 2.1.0 comes last, and the source's generation says it is the older.
func TestFluxAStaleLookDoesNotSupersedeANewerRelease(t *testing.T) {
	w := newFluxWorld(t)
	ctx := context.Background()
	pin2 := "sha256:" + strings.Repeat("2", 64)
	w.canary("Succeeded", "spec-1", true)
	w.unit("2.1.0", pin1, pin0, "Unknown", "Progressing")
	stale, err := w.observer.Source.Observe(ctx)
	if err != nil || len(stale) == 0 || stale[0].Release.ID.String() != idA || stale[0].Order.ObjectGeneration == "" {
		t.Fatalf("the slow look: %+v %v", stale, err)
	}
	w.unit("2.2.0", pin2, pin0, "Unknown", "Progressing")
	w.pass()
	w.expect(idB, rr.StateMerged)
	for _, f := range stale {
		if _, err := w.observer.Service.Take(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if a := w.record(idA); a.State != rr.StateSuperseded || a.SupersededBy != idB {
		t.Fatalf("2.1.0: %+v", a)
	}
	b := w.record(idB)
	if b.State != rr.StateMerged || !strings.HasPrefix(b.ObjectGeneration, "OCIRepository/"+w.fluxNS+"/project-docs/") {
		t.Fatalf("2.2.0: %+v", b)
	}
	w.expect(idB, rr.StateMerged)
}

// TestAHeldReleaseOnTheFluxPath: the gate's record pins the revision the
// Canary carries; Flagger failing it after the gate first saw it is the
// release held as analysis-failed on its record, and a retry ends the hold.
func TestAHeldReleaseOnTheFluxPath(t *testing.T) {
	w := newFluxWorld(t)
	w.gated = "sha256:" + strings.Repeat("a", 64)
	gateRecord := func(rec gaterelease.Record) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.recordNS, Name: gaterelease.RecordConfigMap(w.appNS, "docs")},
			Data: gaterelease.EncodeRecord(rec)}
		kube := w.cp.Kube.CoreV1().ConfigMaps(w.recordNS)
		if _, err := kube.Update(context.Background(), cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = kube.Create(context.Background(), cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	since := time.Now().Add(-time.Minute).UTC()
	gateRecord(gaterelease.Record{Namespace: w.appNS, Application: "docs", Pinned: w.gated, Since: &since})
	w.unit("2.1.0", pin1, pin1, "Unknown", "Progressing")
	w.canary("Progressing", "spec-2", false)
	w.pass()
	w.expect(idA, rr.StateProgressing, deploying)
	if r := w.record(idA); r.Held != "" || r.Objects != "Canary/"+w.appNS+"/api,Kustomization/"+w.fluxNS+"/project-docs" {
		t.Fatalf("held %q, objects %q", r.Held, r.Objects)
	}
	w.canary("Failed", "spec-2", false)
	w.pass()
	w.expect(idA, rr.StateAborted, deploying, failedEv)
	if r := w.record(idA); r.Held != "analysis-failed" {
		t.Fatalf("held %q\n%s", r.Held, w.logs)
	}
	w.pass() // the same word again: nothing
	w.expect(idA, rr.StateAborted, deploying, failedEv)
	// Flagger tries the release again: the gate no longer counts a failure
	// of it, so the hold ends.
	w.canary("Progressing", "spec-2", false)
	w.pass()
	w.expect(idA, rr.StateProgressing, deploying, failedEv)
	if r := w.record(idA); r.Held != "" {
		t.Fatalf("still held %q", r.Held)
	}
}
