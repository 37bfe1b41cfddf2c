package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FlaggerImage is the image of the cached Flagger binary on the node.
var FlaggerImage = "localhost/delivery-node/flagger:" + strings.TrimPrefix(FlaggerVersion, "v")

// StartFlagger runs the real Flagger as a pod in namespace, under the grant
// its module publishes (account.yaml), from an image of the cached binary,
// and waits until it is Available. Its labels are deploy-kit's, which the
// Release Gate's caller rule reads; Flagger's own Deployment probes with
// wget, which an image with no shell lacks, so the probes here ask its
// /healthz directly.
func (n *Node) StartFlagger(ctx context.Context, namespace string) error {
	assets, err := AssetsDir()
	if err != nil {
		return err
	}
	bin := filepath.Join(assets, "flagger")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no flagger in %s: build it with %s", assets, ClusterBuildCommand)
	}
	archive, err := BinaryImage(bin, "flagger", FlaggerImage, filepath.Join(n.dir, "flagger.tar"))
	if err != nil {
		return err
	}
	if err := n.ImportImage(ctx, archive); err != nil {
		return err
	}
	dir, err := moduleDir(ctx, "github.com/fluxcd/flagger@"+FlaggerVersion)
	if err != nil {
		return err
	}
	account, err := os.ReadFile(filepath.Join(dir, "artifacts/flagger/account.yaml")) //nolint:gosec // a module file
	if err != nil {
		return fmt.Errorf("read Flagger's grant: %w", err)
	}
	ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n", namespace)
	grant := bytes.ReplaceAll(account, []byte("namespace: default"), []byte("namespace: "+namespace))
	if _, err := n.Apply(ctx, append([]byte(ns), grant...)); err != nil {
		return fmt.Errorf("apply Flagger's grant: %w", err)
	}
	deployment := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: flagger
  namespace: %[1]s
  labels: {app.kubernetes.io/name: flagger, app.kubernetes.io/instance: flagger}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app.kubernetes.io/name: flagger, app.kubernetes.io/instance: flagger}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: flagger, app.kubernetes.io/instance: flagger}
    spec:
      serviceAccountName: flagger
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: flagger
        image: %[2]s
        imagePullPolicy: Never
        args: [-log-level=info, -mesh-provider=kubernetes, -metrics-server=http://127.0.0.1:9, -enable-leader-election=false]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /healthz, port: http}}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
`, namespace, FlaggerImage)
	if _, err := n.Apply(ctx, []byte(deployment)); err != nil {
		return fmt.Errorf("apply Flagger: %w", err)
	}
	return n.WaitAvailable(ctx, namespace, "flagger")
}
