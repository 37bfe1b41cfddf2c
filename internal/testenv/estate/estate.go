// Package estate is a whole delivery estate on the node that runs pods, as
// a platform team runs it: the real Flux and Flagger as pods, and the
// Release Gate, the release record and the Reporter installed by Flux from
// deploy/'s own manifests and run from their images. The whole-path tests
// and the demo share it.
package estate

import (
	"context"
	"fmt"
	"net"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/publish"
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
// installed by Flux from a signed release.
type Estate struct {
	Node *testenv.Node
	Flux *testenv.Flux
	// GitHub is the GitHub the Reporter's and the Collector's pods reach,
	// on the node's bridge: the one service here that cannot run for real.
	GitHub *fakegithub.Server
	// Key signs the estate's releases of the product; Flux verifies each
	// against its public half.
	Key ReleaseKey
	// Release is the release of the product the estate installed.
	Release publish.Published

	root, dir string
	say       func(string)
}

// Options say where the product's module is and who hears the steps.
type Options struct {
	// Root is the module's folder, which is released.
	Root string
	// Dir is a folder of the caller's for the releases.
	Dir string
	// Say is told each step in a few words; nil is quiet.
	Say func(string)
}

// Install installs the estate on n: Flux and Flagger, then the product as
// a platform team installs a release of it. make release's own code
// publishes FirstVersion to a registry on the node's bridge, every image
// for both platforms and signed; source-controller pulls the manifests'
// artifact, verifying its signature; kustomize-controller applies it; the
// kubelet pulls every service's image by digest from that registry. Then
// notification-controller's Providers for the release record and the
// Reporter.
func Install(ctx context.Context, n *testenv.Node, o Options) (*Estate, error) {
	say := o.Say
	if say == nil {
		say = func(string) {}
	}
	if o.Root == "" || o.Dir == "" {
		return nil, fmt.Errorf("an estate needs the module's folder and one of its own")
	}
	gateNS := GateNamespace
	var err error
	e := &Estate{Node: n, root: o.Root, dir: o.Dir, say: say}
	if e.Key, err = NewReleaseKey(); err != nil {
		return nil, err
	}
	if e.GitHub, err = fakegithub.Start(net.JoinHostPort(n.Gateway, "0")); err != nil {
		return nil, err
	}
	n.OnClose(e.GitHub.Close)
	e.GitHub.AddRepository(EstateRepository)
	if e.Flux, err = n.StartFlux(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(testenv.FluxNamespace, 3000))
	}
	if err := n.TrustRegistry(e.Flux.Registry); err != nil {
		return nil, err
	}
	if err := n.StartFlagger(ctx, gateNS); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, n.ContainerLogs(gateNS, 3000))
	}
	// The GitHub Apps the Reporter and the Collector act as, as a platform
	// team hands them the secrets the install names.
	for _, secret := range []string{"reporter-github-app", "collector-github-app"} {
		if _, err := n.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
stringData:
  app-id: %q
  installation-id: %q
  private-key: %q
`, secret, gateNS, fmt.Sprint(e.GitHub.AppID), fmt.Sprint(e.GitHub.InstallationID), e.GitHub.PrivateKeyPEM))); err != nil {
			return nil, err
		}
	}
	say("releasing the product " + FirstVersion)
	if e.Release, err = e.Publish(ctx, FirstVersion); err != nil {
		return nil, err
	}
	say("installing the release through Flux, its signature verified")
	started := time.Now()
	if err := e.installUnit(ctx, e.Release); err != nil {
		return nil, err
	}
	if err := e.Installed(ctx, e.Release); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("installed %s: artifact verified and applied, every service Available from its signed image, in %s",
		FirstVersion, time.Since(started).Round(time.Second)))
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

// Unit points a Project's OCIRepository and Kustomization, both
// project-<project>, at an artifact, pinned by digest as deploy-kit's pin
// files are, the release named on the unit as the Reporter reads it; a
// second call moves the pin.
func (e *Estate) Unit(ctx context.Context, project string, a testenv.Artifact) error {
	interval := "10m"
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
