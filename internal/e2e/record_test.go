package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord/cdeventstest"
	"github.com/JorisJonkers-dev/delivery/internal/reporter"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// recordBin is the release-record binary TestMain builds.
var recordBin string

// The release record's settings in the estate, and the events it sends.
const (
	recordCluster = "e2e"
	recordEnv     = "prod"
	evDeploying   = "dev.cdeventsx.delivery-release.deploying.0.1.0"
	evFailed      = "dev.cdeventsx.delivery-release.failed.0.1.0"
	evDeployed    = "dev.cdevents.service.deployed.0.3.0"
	evUpgraded    = "dev.cdevents.service.upgraded.0.3.0"
)

// recorder is the release-record binary looking at the estate's Project:
// a Flux unit the test writes as Flux would (no Flux controller runs
// here) whose inventory is the two Canaries the real Flagger drives, and a
// CloudEvents receiver that validates every event it is sent.
type recorder struct {
	e       *estate
	fluxNS  string
	project string
	store   *rr.KubeStore
	recv    *cdeventstest.Receiver
	proc    *process
}

// startRecord runs the release record under its grant, recording in the
// gate's namespace and looking at a Flux namespace of the test's own.
func (e *estate) startRecord() *recorder {
	t := e.t
	t.Helper()
	r := &recorder{e: e, fluxNS: e.c.Namespace(t), project: e.ns, recv: cdeventstest.Start(t)}
	var err error
	if r.store, err = rr.NewKubeStore(e.c.Config, gateNS); err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeLoopback(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.c.GrantKubeconfig(t, "../../deploy/release-record/rbac.yaml", gateNS, "release-record")
	r.proc = e.startProcess("the release record", []string{recordBin}, []string{
		"ADDR=" + addr,
		"KUBECONFIG=" + kubeconfig,
		"CLUSTER_NAME=" + recordCluster,
		"ENVIRONMENT=" + recordEnv,
		"RECORD_NAMESPACE=" + gateNS,
		"FACTS_MODE=emit",
		"CDEVENTS_SINK=" + r.recv.URL,
		"FLUX_NAMESPACE=" + r.fluxNS,
		"GATE_URL=http://" + gateAddress,
		"INTERVAL=1s",
	}, addr)
	return r
}

// unit writes the Project's unit at version, its source pinned to pin and
// Flux's status saying it applied applied, Ready when the two are one.
func (r *recorder) unit(version, pin, applied string) {
	r.e.t.Helper()
	ready, reason := "Unknown", "Progressing"
	if pin == applied {
		ready, reason = "True", "ReconciliationSucceeded"
	}
	ns, name := r.fluxNS, "project-"+r.project
	r.e.apply(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: %[2]s, namespace: %[1]s}
spec: {interval: 10m, url: "oci://registry.example/estate/auth", ref: {digest: "%[3]s"}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[2]s
  namespace: %[1]s
  annotations: {%[4]s: acme/auth, %[5]s: "%[6]s", %[7]s: "%[3]s"}
spec: {interval: 10m, prune: true, path: ./, sourceRef: {kind: OCIRepository, name: %[2]s}}
status:
  lastAppliedRevision: "latest@%[8]s"
  lastAttemptedRevision: "latest@%[3]s"
  lastAppliedOriginRevision: "main@sha1:commit-of-%[6]s"
  conditions: [{type: Ready, status: "%[9]s", reason: %[10]s, message: "as Flux says", lastTransitionTime: "%[11]s"}]
  inventory:
    entries:
      - {id: %[12]s_auth-api_flagger.app_Canary, v: v1beta1}
      - {id: %[12]s_auth-ui_flagger.app_Canary, v: v1beta1}`,
		ns, name, pin, reporter.AnnotationRepository, reporter.AnnotationVersion, version, reporter.AnnotationDigest,
		applied, ready, reason, time.Now().UTC().Format(time.RFC3339), r.e.ns))
}

func (r *recorder) id(version string) string {
	return r.project + "@" + version + ":" + recordCluster + "/" + recordEnv
}

// expect waits until the record of version is in state, with the events
// sent so far being events.
func (r *recorder) expect(version string, state rr.State, events ...string) rr.Record {
	r.e.t.Helper()
	var rec rr.Record
	r.e.waitFor(fmt.Sprintf("the record of %s to be %s", version, state), 2*time.Minute, func() (bool, string) {
		s, err := r.store.Get(context.Background(), r.id(version))
		if err != nil {
			r.e.t.Fatalf("read the record of %s: %v", version, err)
		}
		rec = s.Record
		got := r.recv.Types()
		return rec.State == state && slices.Equal(got, events), fmt.Sprintf("%q, events %v\nrelease record log:\n%s", rec.State, got, r.proc.tail())
	})
	return rec
}
