package e2e_test

import (
	"context"
	"fmt"
	"strings"
)

// release is one render of the auth Application: its revision, what its
// migration was tested against ("" for the first release) and each member's
// image.
type release struct {
	revision, testedAgainst string
	images                  map[string]string
}

// core is the render's objects but its custom resources, as Flux applies them
// first: the inputs, each member's Deployment, the migration's
// ServiceAccount and its suspended up and down Jobs.
func (r release) core(ns string) string {
	tested := ""
	if r.testedAgainst != "" {
		tested = fmt.Sprintf(`,"testedAgainst":%q`, r.testedAgainst)
	}
	inputs := `{"analysis":{"interval":"10s","iterations":2,"threshold":8},"deadline":"600s",` +
		`"endpoint":"http://release-gate.delivery-system.svc.cluster.local:8080",` +
		`"members":[{"checks":["error-rate","latency"],"process":"auth-api","readiness":{"path":"/ready","port":8080}},` +
		`{"process":"auth-ui","readiness":{"path":"/ready","port":8080}}],` +
		`"migration":{"identity":"auth-migration","nonTransactional":false` + tested + `}}`
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: auth-release-gate
  namespace: %s
  labels: {app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit}
data:
  releaseGate.json: '%s'
`, ns, inputs)
	for _, p := range []string{"auth-api", "auth-ui"} {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
    spec:
      containers:
        - name: %[1]s
          image: %[3]s
          args: [serve]
          env: [{name: PORT, value: "8080"}]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /ready, port: 8080}}
`, p, ns, r.images[p])
	}
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: auth-migration
  namespace: %s
  labels: {app.kubernetes.io/name: auth-migration, app.kubernetes.io/instance: auth-migration, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
`, ns)
	jobs := []struct{ name, args string }{{"auth-migration-" + tag(r.revision), "[up, " + tag(r.revision) + "]"}}
	if r.testedAgainst != "" {
		jobs = append(jobs, struct{ name, args string }{"auth-migration-down-" + tag(r.revision), "[down, " + tag(r.testedAgainst) + "]"})
	}
	for _, j := range jobs {
		fmt.Fprintf(&b, `---
apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app.kubernetes.io/name: auth-migration, app.kubernetes.io/instance: auth-migration, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
  annotations: {kustomize.toolkit.fluxcd.io/ssa: IfNotPresent}
spec:
  suspend: true
  backoffLimit: 0
  activeDeadlineSeconds: 600
  template:
    metadata:
      labels: {app.kubernetes.io/name: auth-migration, app.kubernetes.io/instance: auth-migration, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
    spec:
      serviceAccountName: auth-migration
      restartPolicy: Never
      containers: [{name: migration, image: auth-migration:%[3]s, args: %[4]s}]
`, j.name, ns, tag(r.revision), j.args)
	}
	return b.String()
}

// canaries are the render's custom resources, which Flux applies last: one
// Canary per member, its four webhooks to the gate carrying the Application,
// process, revision and the member's Route paths.
func (r release) canaries(ns string) string {
	var b strings.Builder
	for _, m := range []struct{ process, paths string }{{"auth-api", `["/api"]`}, {"auth-ui", `["/"]`}} {
		fmt.Fprintf(&b, `---
apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app.kubernetes.io/name: %[1]s, app.kubernetes.io/instance: %[1]s, app.kubernetes.io/part-of: auth, app.kubernetes.io/managed-by: deploy-kit, app.kubernetes.io/component: none}
spec:
  provider: kubernetes
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s}
  progressDeadlineSeconds: 600
  service: {port: 8080, targetPort: http, portName: http}
  analysis:
    interval: 10s
    iterations: 2
    threshold: 8
    webhooks:
`, m.process, ns)
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

// apply applies manifests as Flux's kustomize-controller would, server-side.
func (e *estate) apply(manifests string) {
	e.t.Helper()
	if _, err := e.c.Apply(context.Background(), []byte(manifests)); err != nil {
		e.t.Fatalf("apply: %v", err)
	}
}
