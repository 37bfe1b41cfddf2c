package estate

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/publish"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// FirstVersion is the release of the product the estate installs.
const FirstVersion = "v0.1.0-node.1"

// Services are the product's Deployments an install brings up.
var Services = []string{"release-gate", "release-record", "reporter", "collector"}

// EstateRepository is the Estate repository the Collector commits to.
const EstateRepository = "example-org/estate"

// ReleaseKey is the cosign key pair the estate's releases are signed
// with, as a release's maintainers keep theirs.
type ReleaseKey struct {
	Private, Public []byte
	Password        []byte
}

// NewReleaseKey makes a cosign key pair, as cosign generate-key-pair does.
func NewReleaseKey() (ReleaseKey, error) {
	password := []byte("release")
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return ReleaseKey{}, err
	}
	return ReleaseKey{Private: kb.PrivateBytes, Public: kb.PublicBytes, Password: password}, nil
}

// Publish releases the product at version to the estate's registry as
// make release does, every image for both platforms, signed with the
// estate's key.
func (e *Estate) Publish(ctx context.Context, version string) (publish.Published, error) {
	signer, err := publish.NewKeySigner(e.Key.Private, e.Key.Password)
	if err != nil {
		return publish.Published{}, err
	}
	ca, err := os.ReadFile(ociimage.CACertificates)
	if err != nil {
		return publish.Published{}, err
	}
	dir, err := os.MkdirTemp(e.dir, "release-")
	if err != nil {
		return publish.Published{}, err
	}
	started := time.Now()
	out, err := publish.Publish(ctx, publish.Plan{
		Version: version, Registry: e.Flux.Registry + "/delivery", Insecure: true,
		Root: e.root, Dir: dir, Targets: ociimage.Targets(), Platforms: ociimage.ReleasePlatforms,
		CACerts: ca, Signer: signer, Progress: func(step string) { e.say("release " + version + ": " + step) },
	})
	if err != nil {
		return publish.Published{}, fmt.Errorf("release %s: %w", version, err)
	}
	e.say(fmt.Sprintf("released %s in %s", version, time.Since(started).Round(time.Second)))
	return out, nil
}

// ManifestsURL is the OCIRepository url of the releases' manifests.
func (e *Estate) ManifestsURL() string {
	return "oci://" + e.Flux.Registry + "/delivery/" + publish.ManifestsRepository
}

// installUnit points Flux at a release of the product as docs/install.md
// tells a platform team to: an OCIRepository pinned to the artifact's
// digest from the release's digests file that also verifies its cosign
// signature against the release's public key, and a Kustomization of it
// whose patches say what this estate differs in (the cluster and
// environment, GitHub's address, the Estate repository, short intervals).
// The pin is what keeps an artifact a registry's attacker pushed under the
// release's tag out: source-controller's verify alone takes a signature
// copied from the release to another artifact (TestFluxRefuses...).
func (e *Estate) installUnit(ctx context.Context, release publish.Published) error {
	_, err := e.Node.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: delivery-release-key, namespace: %[1]s}
stringData:
  cosign.pub: %[2]q
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: delivery, namespace: %[1]s}
spec:
  interval: 1h
  url: %[3]s
  insecure: true
  ref: {digest: %[4]s}
  verify:
    provider: cosign
    secretRef: {name: delivery-release-key}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: delivery, namespace: %[1]s}
spec:
  # Hourly, so that no reconcile undoes a test scaling the gate to nothing.
  interval: 1h
  prune: true
  wait: true
  timeout: 5m
  path: ./
  sourceRef: {kind: OCIRepository, name: delivery}
  patches:
    - patch: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: delivery-cluster, namespace: %[5]s}
        data: {CLUSTER_NAME: %[6]s, ENVIRONMENT: %[7]s}
    - patch: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: reporter, namespace: %[5]s}
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
        metadata: {name: release-record, namespace: %[5]s}
        spec:
          template:
            spec:
              containers:
                - name: release-record
                  env:
                    - {name: INTERVAL, value: 5s}
    - patch: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: collector, namespace: %[5]s}
        spec:
          template:
            spec:
              containers:
                - name: collector
                  env:
                    - {name: GITHUB_API_URL, value: %[8]q}
                    - {name: ESTATE_REPOSITORY, value: %[9]s}
`, testenv.FluxNamespace, string(e.Key.Public), e.ManifestsURL(), release.Manifests.Ref.DigestStr(), GateNamespace, RecordCluster, RecordEnvironment,
		e.GitHub.URL(), EstateRepository)))
	return err
}

// Installed waits until Flux applied the release's artifact and every
// service runs the release's own image, Available.
func (e *Estate) Installed(ctx context.Context, release publish.Published) error {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	digest := release.Manifests.Ref.DigestStr()
	images := map[string]string{}
	for _, img := range release.Images {
		images[img.Name] = img.Ref.String()
	}
	var last string
	for {
		var k kustomizev1.Kustomization
		if err := e.Node.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "delivery"}, &k); err != nil {
			last = err.Error()
		} else if ready := apimeta.FindStatusCondition(k.Status.Conditions, meta.ReadyCondition); ready == nil || ready.Status != metav1.ConditionTrue || !strings.HasSuffix(k.Status.LastAppliedRevision, digest) {
			last = fmt.Sprintf("the Kustomization has applied %q, not %s", k.Status.LastAppliedRevision, digest)
			if ready != nil {
				last += " (" + ready.Reason + ": " + ready.Message + ")"
			}
		} else if waiting := e.notRolled(ctx, images); waiting != "" {
			last = waiting
		} else {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("release %s never came up: %s\n%s\n%s", release.Version, last,
				e.Node.ContainerLogs(testenv.FluxNamespace, 3000), e.Node.ContainerLogs(GateNamespace, 3000))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// notRolled names the first service whose Deployment does not yet run
// its image from images, by digest, on every replica, Available; "" when
// all do.
func (e *Estate) notRolled(ctx context.Context, images map[string]string) string {
	for _, name := range Services {
		var d appsv1.Deployment
		if err := e.Node.Client.Get(ctx, client.ObjectKey{Namespace: GateNamespace, Name: name}, &d); err != nil {
			return name + ": " + err.Error()
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != images[name] {
			return fmt.Sprintf("%s names %s, not %s", name, got, images[name])
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want || d.Status.Replicas != want {
			return fmt.Sprintf("%s has %d of %d replicas updated and %d available", name, d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas)
		}
	}
	return ""
}

// Upgrade moves the install to release: the OCIRepository's pin to the
// next release's digest, as a platform team upgrades, then waits until
// every service runs it.
func (e *Estate) Upgrade(ctx context.Context, release publish.Published) error {
	var repo sourcev1.OCIRepository
	if err := e.Node.Client.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "delivery"}, &repo); err != nil {
		return err
	}
	patch := client.MergeFrom(repo.DeepCopy())
	repo.Spec.Reference = &sourcev1.OCIRepositoryRef{Digest: release.Manifests.Ref.DigestStr()}
	if repo.Annotations == nil {
		repo.Annotations = map[string]string{}
	}
	// Flux looks again at once rather than at its next interval, as
	// flux reconcile source oci does.
	repo.Annotations[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	if err := e.Node.Client.Patch(ctx, &repo, patch); err != nil {
		return err
	}
	return e.Installed(ctx, release)
}
