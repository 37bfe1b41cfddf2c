// Package estate is a whole delivery estate on the node that runs pods, as
// a platform team runs it: the real Flux and Flagger as pods, and the
// Release Gate, the release record and the Reporter installed by Flux from
// deploy/'s own manifests and run from their images. The whole-path tests
// and the demo share it.
package estate

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

// GateNamespace is where the product and Flagger run, as deploy-kit names
// it.
const GateNamespace = "delivery-system"

// The release record's cluster and environment on the node.
const (
	RecordCluster     = "node"
	RecordEnvironment = "test"
)

// Estate is the node with the real Flux and Flagger on it and the product
// installed by Flux.
type Estate struct {
	Node *testenv.Node
	Flux *testenv.Flux
	// GitHub is the GitHub the Reporter's pods reach, on the node's bridge:
	// the one service here that cannot run for real.
	GitHub *fakegithub.Server
}

// Options say where the product's manifests are and who hears the steps.
type Options struct {
	// Root is the module's folder, whose deploy/ is installed.
	Root string
	// Dir is a folder of the caller's for the images and the install.
	Dir string
	// Say is told each step in a few words; nil is quiet.
	Say func(string)
}

// Install installs the estate on n, whose kubelet already has the member
// image: Flux and Flagger, then the product through Flux as a platform
// team would (deploy/'s manifests in an overlay that names the images on
// the node, pushed as an artifact, pulled and applied by source- and
// kustomize-controller), and notification-controller's Providers for the
// release record and the Reporter.
func Install(ctx context.Context, n *testenv.Node, o Options) (*Estate, error) {
	say := o.Say
	if say == nil {
		say = func(string) {}
	}
	if o.Root == "" || o.Dir == "" {
		return nil, fmt.Errorf("an estate needs the module's folder and one of its own")
	}
	dir, gateNS := o.Dir, GateNamespace
	var err error
	e := &Estate{Node: n}
	if err := n.ImportProductImages(ctx, filepath.Join(dir, "images"), "release-gate", "release-record", "reporter"); err != nil {
		return nil, err
	}
	if e.GitHub, err = fakegithub.Start(net.JoinHostPort(n.Gateway, "0")); err != nil {
		return nil, err
	}
	n.OnClose(e.GitHub.Close)
	if e.Flux, err = n.StartFlux(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(testenv.FluxNamespace, 3000))
	}
	if err := n.StartFlagger(ctx, gateNS); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(gateNS, 3000))
	}
	// The GitHub App the Reporter acts as, as a platform team hands it the
	// secret reporter-github-app.
	if _, err := n.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: reporter-github-app, namespace: %s}
stringData:
  app-id: %q
  installation-id: %q
  private-key: %q
`, gateNS, fmt.Sprint(e.GitHub.AppID), fmt.Sprint(e.GitHub.InstallationID), e.GitHub.PrivateKeyPEM))); err != nil {
		return nil, err
	}
	say("installing the Release Gate, the release record and the Reporter through Flux")
	install := filepath.Join(dir, "delivery")
	if err := productOverlay(o.Root, install, e.GitHub.URL()); err != nil {
		return nil, err
	}
	a, err := e.Flux.Push(ctx, install, "delivery", "0.0.0-node", "https://github.com/JorisJonkers-dev/delivery", "main@sha1:"+strings.Repeat("0", 40))
	if err != nil {
		return nil, err
	}
	if err := e.Unit(ctx, "delivery", a); err != nil {
		return nil, err
	}
	if err := e.Applied(ctx, "delivery", a.Digest); err != nil {
		return nil, err
	}
	for _, service := range []string{"release-gate", "release-record", "reporter"} {
		if err := n.WaitAvailable(ctx, gateNS, service); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(gateNS, 3000))
		}
	}
	// notification-controller prompts the release record and the Reporter
	// on every event of a unit or a source, as a platform team wires them.
	say("wiring notification-controller to the release record and the Reporter")
	for _, service := range []string{"release-record", "reporter"} {
		if _, err := n.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata: {name: %[3]s, namespace: %[1]s}
spec:
  type: generic
  address: http://%[3]s.%[2]s.svc.cluster.local:8080/flux
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata: {name: %[3]s, namespace: %[1]s}
spec:
  providerRef: {name: %[3]s}
  eventSeverity: info
  eventSources:
    - {kind: Kustomization, name: "*"}
    - {kind: OCIRepository, name: "*"}
`, testenv.FluxNamespace, gateNS, service))); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// productOverlay lays out the install a platform team keeps: deploy/'s
// namespace, release-gate, release-record and reporter folders as they
// are, and an overlay naming the images the node has, the cluster and
// environment, GitHub's address and a short look interval.
func productOverlay(root, dir, github string) error {
	for _, part := range []string{"namespace", "release-gate", "release-record", "reporter"} {
		src := filepath.Join(root, "deploy", part)
		if err := copyFolder(src, filepath.Join(dir, part)); err != nil {
			return err
		}
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources: [namespace, release-gate, release-record, reporter]
images:
  - name: ghcr.io/jorisjonkers-dev/delivery/release-gate
    newName: %[2]s
    newTag: %[4]s
  - name: ghcr.io/jorisjonkers-dev/delivery/release-record
    newName: %[3]s
    newTag: %[4]s
  - name: ghcr.io/jorisjonkers-dev/delivery/reporter
    newName: %[7]s
    newTag: %[4]s
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: reporter, namespace: %[1]s}
      spec:
        template:
          spec:
            containers:
              - name: reporter
                env:
                  - {name: GITHUB_API_URL, value: %[8]q}
                  - {name: INTERVAL, value: 5s}
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: release-record, namespace: %[1]s}
      spec:
        template:
          spec:
            containers:
              - name: release-record
                env:
                  - {name: CLUSTER_NAME, value: %[5]s}
                  - {name: ENVIRONMENT, value: %[6]s}
                  - {name: INTERVAL, value: 5s}
`, GateNamespace, strings.TrimSuffix(testenv.ProductImage("release-gate"), ":"+testenv.ProductTag),
		strings.TrimSuffix(testenv.ProductImage("release-record"), ":"+testenv.ProductTag), testenv.ProductTag, RecordCluster, RecordEnvironment,
		strings.TrimSuffix(testenv.ProductImage("reporter"), ":"+testenv.ProductTag), github)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600)
}

// copyFolder copies the YAML files of src into dst.
func copyFolder(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		if !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		raw, err := os.ReadFile(path) //nolint:gosec // the repository's own manifests
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o600)
	})
}

// Unit points a Project's OCIRepository and Kustomization, both
// project-<project>, at an artifact, pinned by digest as deploy-kit's pin
// files are, the release named on the unit as the Reporter reads it; a
// second call moves the pin.
func (e *Estate) Unit(ctx context.Context, project string, a testenv.Artifact) error {
	// The product's own unit looks again only hourly, so that no reconcile
	// undoes a test scaling the gate to nothing.
	interval := "10m"
	if project == "delivery" {
		interval = "1h"
	}
	_, err := e.Node.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: project-%[1]s, namespace: %[2]s}
spec:
  interval: %[9]s
  url: %[3]s
  insecure: true
  ref: {digest: %[4]s}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: project-%[1]s
  namespace: %[2]s
  annotations: {%[5]s: example-org/%[1]s, %[6]s: %[7]q, %[8]s: %[4]q}
spec:
  interval: %[9]s
  prune: true
  wait: true
  timeout: 3m
  path: ./
  sourceRef: {kind: OCIRepository, name: project-%[1]s}
`, project, testenv.FluxNamespace, a.URL(e.Flux), a.Digest,
		releasepath.AnnotationRepository, releasepath.AnnotationVersion, a.Tag, releasepath.AnnotationDigest, interval)))
	return err
}

// Applied waits until Flux's unit of project says it applied revision.
func (e *Estate) Applied(ctx context.Context, project, revision string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	last := ""
	for {
		var k kustomizev1.Kustomization
		if err := e.Node.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + project}, &k); err == nil {
			ready := apimeta.FindStatusCondition(k.Status.Conditions, meta.ReadyCondition)
			if ready != nil && ready.Status == metav1.ConditionTrue && k.Status.LastAppliedRevision == revision {
				return nil
			}
			if ready != nil {
				last = ready.Reason + ": " + ready.Message
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the unit of %s never applied %s (%s)\n%s", project, revision, last, e.Node.ContainerLogs(testenv.FluxNamespace, 3000))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
