package estate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	releasemodel "github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// Release is one render of the auth Application as deploy-kit lays it out:
// its version, revision, what its migration was tested against ("" for the
// first) and which members' new copies fail their own traffic.
type Release struct {
	Version, Revision, TestedAgainst string
	Failing                          map[string]bool
	// broken adds an object the API server refuses, so Flux's dry run
	// fails and nothing of the render is written.
	Broken bool
	// crashing is how many of their first starts members' new copies
	// crash on.
	Crashing map[string]int
	// iterations and threshold are the analysis's (2 and 3 when zero).
	Iterations, Threshold int
	// application is the Application the Canaries' webhooks name ("auth"
	// when empty): another one's inputs are not in the render.
	Application string
}

// analysis is the render's iterations and threshold.
func (r Release) analysis() (iterations, threshold int) {
	iterations, threshold = 2, 3
	if r.Iterations > 0 {
		iterations = r.Iterations
	}
	if r.Threshold > 0 {
		threshold = r.Threshold
	}
	return iterations, threshold
}

// Tag is the revision's tag, as the migration Jobs' names carry it.
func (r Release) Tag() string { return releasemodel.RevisionTag(r.Revision) }

// Commit is the Git commit the release was built from, made up from its
// version.
func (r Release) Commit() string {
	sum := sha256.Sum256([]byte(r.Version))
	return hex.EncodeToString(sum[:20])
}

// Member is one of the auth Application's members: its process and its
// Route's paths.
type Member struct{ Process, Paths string }

// Members are the auth Application's two members.
var Members = []Member{{"auth-api", `["/api"]`}, {"auth-ui", `["/"]`}}

// labels are deploy-kit's labels of one of the Application's identities.
func labels(identity string) string {
	return fmt.Sprintf("{app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}", identity)
}

const restricted = `securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}`

const restrictedContainer = `securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}`

// Render is the release's whole render in one file: the gate's inputs, each
// member's Deployment and Canary, the migration's ServiceAccount and its
// suspended up and down Jobs. Flux applies it in its own order.
func (r Release) Render(ns string) string {
	tested := ""
	if r.TestedAgainst != "" {
		tested = fmt.Sprintf(`,"testedAgainst":%q`, r.TestedAgainst)
	}
	iterations, threshold := r.analysis()
	application := r.Application
	if application == "" {
		application = "auth"
	}
	inputs := fmt.Sprintf(`{"analysis":{"interval":"10s","iterations":%d,"threshold":%d},"deadline":"600s",`, iterations, threshold) +
		`"endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080",` +
		`"members":[{"checks":["error-rate","latency"],"process":"auth-api","readiness":{"path":"/ready","port":8080}},` +
		`{"checks":["error-rate"],"process":"auth-ui","readiness":{"path":"/ready","port":8080}}],` +
		`"migration":{"identity":"auth-migration","nonTransactional":false` + tested + `}}`
	var b strings.Builder
	if r.Broken {
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
	for _, m := range Members {
		fail := "0"
		if r.Failing[m.Process] {
			fail = "1"
		}
		// A crashing copy counts its starts in an emptyDir, which outlives
		// its container's restarts.
		crash, volumes, mounts := "", "", ""
		if n := r.Crashing[m.Process]; n > 0 {
			crash = fmt.Sprintf(", {name: CRASH_STARTS, value: %q}, {name: STATE_DIR, value: /state}", fmt.Sprint(n))
			volumes = "volumes: [{name: state, emptyDir: {}}]"
			mounts = "volumeMounts: [{name: state, mountPath: /state}]"
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
      %[10]s
      containers:
        - name: %[1]s
          image: %[4]s
          args: [serve]
          env: [{name: RELEASE, value: %[5]q}, {name: FAIL, value: %[6]q}%[9]s]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 2}
          %[8]s
          %[11]s
`, m.Process, ns, labels(m.Process), testenv.MemberImage, r.Version, fail, restricted, restrictedContainer, crash, volumes, mounts)
	}
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: auth-migration
  namespace: %s
  labels: %s
`, ns, labels("auth-migration"))
	jobs := []struct{ name, args string }{{"auth-migration-" + r.Tag(), "[migrate, up, " + r.Tag() + "]"}}
	if r.TestedAgainst != "" {
		jobs = append(jobs, struct{ name, args string }{"auth-migration-down-" + r.Tag(), "[migrate, down, " + releasemodel.RevisionTag(r.TestedAgainst) + "]"})
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
	for _, m := range Members {
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
    iterations: %[4]d
    threshold: %[5]d
    webhooks:
`, m.Process, ns, labels(m.Process), iterations, threshold)
		for _, h := range []struct{ name, typ string }{{"may-start", "confirm-rollout"}, {"checks", "rollout"}, {"may-promote", "confirm-promotion"}, {"rollback", "rollback"}} {
			fmt.Fprintf(&b, `      - name: %s
        type: %s
        url: http://release-gate.delivery-system.svc.cluster.local:8080/%s
        metadata: {application: %s, process: %s, revision: %q, paths: '%s'}
`, h.name, h.typ, h.name, application, m.Process, r.Revision, m.Paths)
		}
	}
	return b.String()
}
