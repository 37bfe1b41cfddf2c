package releasepath

import (
	"context"
	"errors"
	"fmt"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
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
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Kube reads Flux's and Flagger's objects through controller-runtime's
// uncached client and Deployments through the release model's reader, the
// Release Gate's too, so every service holds the same objects to the same
// barrier test. It writes nothing.
type Kube struct {
	client client.Client
	views  *Objects
}

// NewKube connects to the API server cfg names.
func NewKube(cfg *rest.Config) (*Kube, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kustomizev1.AddToScheme, sourcev1.AddToScheme, flaggerv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(kubeclient.Paced(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	views, err := NewObjects(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{client: c, views: views}, nil
}

// Units lists the namespace's Kustomizations in pages of 500.
func (k *Kube) Units(ctx context.Context, namespace string) ([]UnitObject, error) {
	var out []UnitObject
	cont := ""
	for {
		var list kustomizev1.KustomizationList
		if err := k.client.List(ctx, &list, client.InNamespace(namespace), client.Limit(500), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list Kustomizations in %s: %w", namespace, err)
		}
		for i := range list.Items {
			if u, ok := unitOf(&list.Items[i]); ok {
				out = append(out, u)
			}
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

func unitOf(ks *kustomizev1.Kustomization) (UnitObject, bool) {
	project, ok := strings.CutPrefix(ks.Name, UnitPrefix)
	if !ok || project == "" {
		return UnitObject{}, false
	}
	u := UnitObject{
		Name: ks.Name, Project: project, Annotations: ks.Annotations,
		SourceKind: ks.Spec.SourceRef.Kind,
		Source:     types.NamespacedName{Namespace: ks.Spec.SourceRef.Namespace, Name: ks.Spec.SourceRef.Name},
		Unit:       Unit{AppliedRevision: ks.Status.LastAppliedRevision, AttemptedRevision: ks.Status.LastAttemptedRevision},
	}
	if u.Source.Namespace == "" {
		u.Source.Namespace = ks.Namespace
	}
	u.Unit.Ready = readyOf(ks.Status.Conditions)
	if ks.Status.Inventory != nil {
		for _, e := range ks.Status.Inventory.Entries {
			if c, ok := InventoryCanary(e.ID); ok {
				u.Canaries = append(u.Canaries, c)
			}
		}
	}
	return u, true
}

// readyOf is a Flux object's Ready condition; empty when it has none.
func readyOf(conditions []metav1.Condition) Condition {
	c := apimeta.FindStatusCondition(conditions, meta.ReadyCondition)
	if c == nil {
		return Condition{}
	}
	return Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// Source reads an OCIRepository: its pin and whether it could fetch it.
func (k *Kube) Source(ctx context.Context, namespace, name string) (Source, error) {
	var repo sourcev1.OCIRepository
	if err := k.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &repo); err != nil {
		if apierrors.IsNotFound(err) {
			return Source{}, fmt.Errorf("read OCIRepository %s/%s: %w", namespace, name, ErrNotFound)
		}
		return Source{}, fmt.Errorf("read OCIRepository %s/%s: %w", namespace, name, err)
	}
	if repo.Spec.Reference == nil || repo.Spec.Reference.Digest == "" {
		return Source{}, fmt.Errorf("the OCIRepository %s/%s is not pinned to a digest (spec.ref.digest): %w", namespace, name, ErrNotFound)
	}
	src := Source{Pin: repo.Spec.Reference.Digest}
	// source-controller moves status.observedGeneration only past a
	// generation it fetched (or gave up on for good): a failed pull, a
	// registry's 500, leaves it on the spec before, while the Ready
	// condition saying why is stamped with the generation it speaks of.
	ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
	if repo.Status.ObservedGeneration == repo.Generation || (ready != nil && ready.ObservedGeneration == repo.Generation) {
		src.Ready = readyOf(repo.Status.Conditions)
	}
	return src, nil
}

// Member reads a Canary, then its target Deployment and the primary.
func (k *Kube) Member(ctx context.Context, name types.NamespacedName) (Member, error) {
	m := Member{Namespace: name.Namespace, State: release.MemberState{Process: name.Name}}
	var c flaggerv1.Canary
	if err := k.client.Get(ctx, name, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return m, nil
		}
		return Member{}, fmt.Errorf("read Canary %s: %w", name, err)
	}
	m.State.HasCanary = true
	m.State.Canary = CanaryOf(&c)
	m.ChangedAt = PhaseChangedAt(&c)
	if c.Spec.Analysis != nil {
		m.Iterations = c.Spec.Analysis.Iterations
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == flaggerv1.PromotedType {
			m.Message = cond.Message
		}
	}
	target := c.Spec.TargetRef.Name
	for _, d := range []struct {
		name string
		into **release.Deployment
	}{{target, &m.State.Target}, {target + "-primary", &m.State.Primary}} {
		dep, err := k.views.Deployment(ctx, name.Namespace, d.name)
		switch {
		case errors.Is(err, release.ErrNotFound):
		case err != nil:
			return Member{}, fmt.Errorf("read Deployment %s/%s: %w", name.Namespace, d.name, err)
		default:
			*d.into = &dep
		}
	}
	return m, nil
}
