package wholepath_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// release is one render of the auth Application as deploy-kit lays it out:
// its version, revision, what its migration was tested against ("" for the
// first) and which members' new copies fail their own traffic.
type release struct {
	version, revision, testedAgainst string
	failing                          map[string]bool
	// broken adds an object the API server refuses, so Flux's dry run
	// fails and nothing of the render is written.
	broken bool
}

func (r release) tag() string { return releasemodel.RevisionTag(r.revision) }

// commit is the Git commit the release was built from, made up from its
// version.
func (r release) commit() string {
	sum := sha256.Sum256([]byte(r.version))
	return hex.EncodeToString(sum[:20])
}

// The members, each with its Route's paths.
var members = []struct{ process, paths string }{{"auth-api", `["/api"]`}, {"auth-ui", `["/"]`}}

// labels are deploy-kit's labels of one of the Application's identities.
func labels(identity string) string {
	return fmt.Sprintf("{app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}", identity)
}

const restricted = `securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}`

const restrictedContainer = `securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}`

// render is the release's whole render in one file: the gate's inputs, each
// member's Deployment and Canary, the migration's ServiceAccount and its
// suspended up and down Jobs. Flux applies it in its own order.
func (r release) render(ns string) string {
	tested := ""
	if r.testedAgainst != "" {
		tested = fmt.Sprintf(`,"testedAgainst":%q`, r.testedAgainst)
	}
	inputs := `{"analysis":{"interval":"10s","iterations":2,"threshold":3},"deadline":"600s",` +
		`"endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080",` +
		`"members":[{"checks":["error-rate","latency"],"process":"auth-api","readiness":{"path":"/ready","port":8080}},` +
		`{"checks":["error-rate"],"process":"auth-ui","readiness":{"path":"/ready","port":8080}}],` +
		`"migration":{"identity":"auth-migration","nonTransactional":false` + tested + `}}`
	var b strings.Builder
	if r.broken {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Auth_Settings, namespace: %s}\n---\n", ns)
	}
	fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: auth-release-gate
  namespace: %s
  labels: {app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit}
data:
  releaseGate.json: '%s'
`, ns, inputs)
	for _, m := range members {
		fail := "0"
		if r.failing[m.process] {
			fail = "1"
		}
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: %[3]s
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s}
  template:
    metadata:
      labels: %[3]s
    spec:
      %[7]s
      containers:
        - name: %[1]s
          image: %[4]s
          args: [serve]
          env: [{name: RELEASE, value: %[5]q}, {name: FAIL, value: %[6]q}]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 2}
          %[8]s
`, m.process, ns, labels(m.process), testenv.MemberImage, r.version, fail, restricted, restrictedContainer)
	}
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: auth-migration
  namespace: %s
  labels: %s
`, ns, labels("auth-migration"))
	jobs := []struct{ name, args string }{{"auth-migration-" + r.tag(), "[migrate, up, " + r.tag() + "]"}}
	if r.testedAgainst != "" {
		jobs = append(jobs, struct{ name, args string }{"auth-migration-down-" + r.tag(), "[migrate, down, " + releasemodel.RevisionTag(r.testedAgainst) + "]"})
	}
	for _, j := range jobs {
		fmt.Fprintf(&b, `---
apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: %[3]s
  annotations: {kustomize.toolkit.fluxcd.io/ssa: IfNotPresent}
spec:
  suspend: true
  backoffLimit: 0
  activeDeadlineSeconds: 600
  template:
    metadata:
      labels: %[3]s
    spec:
      serviceAccountName: auth-migration
      restartPolicy: Never
      %[6]s
      containers:
        - name: migration
          image: %[4]s
          args: %[5]s
          %[7]s
`, j.name, ns, labels("auth-migration"), testenv.MemberImage, j.args, restricted, restrictedContainer)
	}
	for _, m := range members {
		fmt.Fprintf(&b, `---
apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: %[3]s
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  progressDeadlineSeconds: 600
  service: {port: 8080, targetPort: http, portName: http}
  analysis:
    interval: 10s
    iterations: 2
    threshold: 3
    webhooks:
`, m.process, ns, labels(m.process))
		for _, h := range []struct{ name, typ string }{{"may-start", "confirm-rollout"}, {"checks", "rollout"}, {"may-promote", "confirm-promotion"}, {"rollback", "rollback"}} {
			fmt.Fprintf(&b, `      - name: %s
        type: %s
        url: http://release-gate.delivery-system.svc.cluster.local:8080/%s
        metadata: {application: auth, process: %s, revision: %q, paths: '%s'}
`, h.name, h.typ, h.name, m.process, r.revision, m.paths)
		}
	}
	return b.String()
}
