package testenv

import (
	"fmt"
	"strings"
)

// fluxManifests are Flux's controllers as flux install lays them out: one
// Deployment, ServiceAccount and probe set each in flux-system, the
// crd-controller role for all three and cluster-admin for
// kustomize-controller, which applies whatever a unit holds; Services for
// source-controller's artifacts and notification-controller's events. The
// images are the controllers' own binaries, never pulled; pods meet the
// restricted Pod Security standard, as Flux's own do.
func fluxManifests() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flux-crd-controller}
rules:
- apiGroups: [source.toolkit.fluxcd.io, kustomize.toolkit.fluxcd.io, notification.toolkit.fluxcd.io]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [""]
  resources: [namespaces, secrets, configmaps, serviceaccounts]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flux-crd-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flux-crd-controller}
subjects:
- {kind: ServiceAccount, name: source-controller, namespace: %[1]s}
- {kind: ServiceAccount, name: kustomize-controller, namespace: %[1]s}
- {kind: ServiceAccount, name: notification-controller, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flux-cluster-reconciler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: kustomize-controller, namespace: %[1]s}
---
apiVersion: v1
kind: Service
metadata: {name: source-controller, namespace: %[1]s}
spec:
  selector: {app: source-controller}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: notification-controller, namespace: %[1]s}
spec:
  selector: {app: notification-controller}
  ports: [{name: http, port: 80, targetPort: http}]
`, FluxNamespace)
	events := "http://notification-controller." + FluxNamespace + ".svc.cluster.local./"
	for _, c := range fluxControllers {
		args := []string{"--watch-all-namespaces=true", "--log-level=info", "--log-encoding=json",
			"--enable-leader-election=false", "--metrics-addr=:8080", "--health-addr=:9440"}
		volumes := "- {name: temp, emptyDir: {}}"
		mounts := "- {name: temp, mountPath: /tmp}"
		switch c.name {
		case "source-controller":
			args = append(args, "--events-addr="+events, "--storage-path=/data", "--storage-addr=:9090",
				"--storage-adv-addr=source-controller."+FluxNamespace+".svc.cluster.local.")
			volumes += "\n      - {name: data, emptyDir: {}}"
			mounts += "\n        - {name: data, mountPath: /data}"
		case "kustomize-controller":
			args = append(args, "--events-addr="+events, "--no-remote-bases=true")
		case "notification-controller":
			args = append(args, "--events-addr=:9090", "--receiverAddr=:9292")
		}
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      serviceAccountName: %[1]s
      terminationGracePeriodSeconds: 10
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: manager
        image: %[3]s
        imagePullPolicy: Never
        args: [%[4]s]
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        ports:
        - {name: http, containerPort: 9090}
        - {name: http-metrics, containerPort: 8080}
        - {name: healthz, containerPort: 9440}
        readinessProbe: {httpGet: {path: /readyz, port: healthz}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /healthz, port: healthz}}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        %[6]s
      volumes:
      %[5]s
`, c.name, FluxNamespace, fluxImage(c.name, c.version), quoteAll(args), volumes, mounts)
	}
	return b.String()
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, ", ")
}
