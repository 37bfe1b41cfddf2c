package releaserecord

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// OCIRevisionAnnotation is the OCI annotation Flux reads an artifact's
// origin revision from (flux push artifact --revision writes it), and copies
// into the unit's status.lastAppliedOriginRevision once it applies it.
const OCIRevisionAnnotation = "org.opencontainers.image.revision"

// Origin is where a unit's artifacts came from, as Flux carries it.
type Origin struct {
	// Applied is the unit's status.lastAppliedOriginRevision: the origin
	// revision of the artifact at its lastAppliedRevision.
	Applied string
	// ArtifactRevision is the source's status.artifact.revision
	// (<tag>@sha256:<hex>) and ArtifactOrigin its metadata's
	// org.opencontainers.image.revision.
	ArtifactRevision, ArtifactOrigin string
	// SourceFailure is the source's Ready condition when it is False about
	// the spec pinning Pin, said before status.observedGeneration reaches
	// that spec: the source controller moves it only once it stops
	// retrying, so the path's read (releasepath.Kube) sees a first failed fetch late.
	SourceFailure SourceFailure
	// SourceGeneration is the source's ObjectGenerationOf while its spec
	// pins SourcePin: each release moves the pin, so a later release is a
	// later generation of the unit's source.
	SourceGeneration, SourcePin string
}

// SourceFailure is a source's Ready condition about the spec that pins Pin.
type SourceFailure struct {
	Pin string
	releasepath.Condition
}

// Origins reads a unit's Origin; the path's reads do not carry it.
type Origins interface {
	// Origin reads the unit, in namespace, and its source.
	Origin(ctx context.Context, namespace string, unit releasepath.UnitObject) (Origin, error)
}

// GitRevision is the revision of source a unit's release was built from:
// the origin revision of the artifact at the pin, from the unit once it
// applied it, else from the source once it fetched it; "" while neither
// names the pin or the artifact carries none. Flux's form
// <ref>@sha1:<commit> is read as the commit, so it matches what Argo CD
// says of a revision.
func GitRevision(u FluxUnit) string {
	pin := u.Source.Pin
	if pin == "" || pin != u.Rollout.Digest {
		return ""
	}
	var origin string
	switch {
	case releasepath.RevisionDigest(u.Unit.Unit.AppliedRevision) == pin && u.Origin.Applied != "":
		origin = u.Origin.Applied
	case releasepath.RevisionDigest(u.Origin.ArtifactRevision) == pin:
		origin = u.Origin.ArtifactOrigin
	}
	return commitOf(origin)
}

// commitOf reads <ref>@sha1:<commit> or sha1:<commit> as the commit; any
// other revision is kept whole, on one line and within the schema's bound.
func commitOf(revision string) string {
	revision = strings.Join(strings.Fields(revision), " ")
	if i := strings.LastIndex(revision, "@"); i >= 0 && strings.HasPrefix(revision[i+1:], "sha1:") {
		revision = revision[i+1:]
	}
	if c, ok := strings.CutPrefix(revision, "sha1:"); ok && c != "" {
		revision = c
	}
	if len(revision) > 256 {
		return ""
	}
	return revision
}

// KubeOrigins reads the Origin of a unit with uncached gets of the unit and
// its OCIRepository.
type KubeOrigins struct{ client client.Client }

var _ Origins = (*KubeOrigins)(nil)

// NewKubeOrigins connects to the API server cfg names.
func NewKubeOrigins(cfg *rest.Config) (*KubeOrigins, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kustomizev1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(kubeclient.Paced(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &KubeOrigins{client: c}, nil
}

// Origin reads the unit and its source; one that is gone has no Origin.
func (k *KubeOrigins) Origin(ctx context.Context, namespace string, unit releasepath.UnitObject) (Origin, error) {
	var ks kustomizev1.Kustomization
	var repo sourcev1.OCIRepository
	unitName := types.NamespacedName{Namespace: namespace, Name: unit.Name}
	if err := k.client.Get(ctx, unitName, &ks); err != nil && !apierrors.IsNotFound(err) {
		return Origin{}, fmt.Errorf("read Kustomization %s: %w", unitName, err)
	}
	if err := k.client.Get(ctx, unit.Source, &repo); err != nil && !apierrors.IsNotFound(err) {
		return Origin{}, fmt.Errorf("read OCIRepository %s: %w", unit.Source, err)
	}
	return OriginOf(&ks, &repo), nil
}

// OriginOf is what a unit and its source say of their origin.
func OriginOf(ks *kustomizev1.Kustomization, repo *sourcev1.OCIRepository) Origin {
	o := Origin{}
	if ks != nil {
		o.Applied = ks.Status.LastAppliedOriginRevision
	}
	if repo == nil {
		return o
	}
	if repo.Status.Artifact != nil {
		o.ArtifactRevision = repo.Status.Artifact.Revision
		o.ArtifactOrigin = repo.Status.Artifact.Metadata[OCIRevisionAnnotation]
	}
	if repo.Spec.Reference == nil || repo.Spec.Reference.Digest == "" {
		return o
	}
	pin := repo.Spec.Reference.Digest
	o.SourcePin = pin
	o.SourceGeneration = ObjectGenerationOf("OCIRepository", repo.Namespace, repo.Name, string(repo.UID), strconv.FormatInt(repo.Generation, 10))
	// A condition carries the generation it speaks of.
	ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
	if ready != nil && ready.Status == metav1.ConditionFalse && ready.ObservedGeneration == repo.Generation {
		o.SourceFailure = SourceFailure{Pin: pin, Condition: releasepath.Condition{Status: string(ready.Status), Reason: ready.Reason, Message: ready.Message}}
	}
	return o
}
