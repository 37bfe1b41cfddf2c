package collector

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
)

// DefaultPageSize is how many objects one list request asks for.
const DefaultPageSize = 500

// Kube is the Inventory of a live cluster: PersistentVolumes, claims and
// deploy-kit's pods, listed cluster-wide in pages.
type Kube struct {
	Client   kubernetes.Interface
	PageSize int64
}

// NewKube connects with cfg, asking for protobuf, which lists of thousands of
// pods decode several times faster than JSON.
func NewKube(cfg *rest.Config) (*Kube, error) {
	cfg = kubeclient.Paced(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a Kubernetes client: %w", err)
	}
	return &Kube{Client: client, PageSize: DefaultPageSize}, nil
}

// deployKitPods selects the pods a placement can come from; the phase and
// node are filtered by the API server too, so finished pods are not sent.
var (
	deployKitPods = labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy}).String()
	placedPods    = fields.AndSelectors(
		fields.OneTermNotEqualSelector("spec.nodeName", ""),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
	).String()
)

// Facts lists the cluster and keeps only what bindings and placements need,
// page by page, so a large cluster is never held in memory whole.
func (k *Kube) Facts(ctx context.Context) (Facts, error) {
	var (
		volumes []Volume
		claims  []Claim
		facts   Facts
	)
	err := k.each(ctx, metav1.ListOptions{}, func(opts metav1.ListOptions) (runtime.Object, error) {
		return k.Client.CoreV1().PersistentVolumes().List(ctx, opts)
	}, func(obj runtime.Object) {
		volumes = append(volumes, VolumeOf(obj.(*corev1.PersistentVolume)))
	}, func() { volumes = nil })
	if err != nil {
		return Facts{}, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	err = k.each(ctx, metav1.ListOptions{}, func(opts metav1.ListOptions) (runtime.Object, error) {
		return k.Client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	}, func(obj runtime.Object) {
		if c := ClaimOf(obj.(*corev1.PersistentVolumeClaim)); c.Volume != "" {
			claims = append(claims, c)
		}
	}, func() { claims = nil })
	if err != nil {
		return Facts{}, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	err = k.each(ctx, metav1.ListOptions{LabelSelector: deployKitPods, FieldSelector: placedPods}, func(opts metav1.ListOptions) (runtime.Object, error) {
		return k.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	}, func(obj runtime.Object) {
		if p, ok := PlacementOf(obj.(*corev1.Pod)); ok {
			facts.Placements = append(facts.Placements, p)
		}
	}, func() { facts.Placements = nil })
	if err != nil {
		return Facts{}, fmt.Errorf("list pods: %w", err)
	}
	facts.Bindings = BindingsOf(volumes, claims)
	return Normalize(facts), nil
}

// each pages through a list with Limit/Continue, handing each item to keep.
// client-go's pager hands items page by page and, unlike its List, gives up
// when a continue token expires (an etcd compaction mid-way, 410): the list
// is then made once more from its start, after reset has dropped what keep
// was handed.
func (k *Kube) each(ctx context.Context, opts metav1.ListOptions, list func(metav1.ListOptions) (runtime.Object, error), keep func(runtime.Object), reset func()) error {
	p := pager.New(pager.SimplePageFunc(list))
	p.PageSize = k.PageSize
	if p.PageSize <= 0 {
		p.PageSize = DefaultPageSize
	}
	walk := func() error {
		return p.EachListItem(ctx, opts, func(obj runtime.Object) error {
			keep(obj)
			return nil
		})
	}
	err := walk()
	if apierrors.IsResourceExpired(err) {
		reset()
		err = walk()
	}
	return err
}
