package releasegate

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// Cluster is what the gate reads from the cluster, each read at the moment a
// question is asked. An answer reads each kind at most once: the reads list a
// namespace, and the gate picks the objects it needs out of the lists. Every
// method returns release.ErrNotFound (wrapped) for an object that is not
// there, and any other error for a read that did not happen.
type Cluster interface {
	// Pods lists the pods of namespace that selector matches.
	Pods(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error)
	// ConfigMap reads one ConfigMap.
	ConfigMap(ctx context.Context, namespace, name string) (release.ConfigMap, error)
	// ConfigMapsIn lists the ConfigMaps of namespace.
	ConfigMapsIn(ctx context.Context, namespace string) ([]release.ConfigMap, error)
	// Jobs lists the Jobs of namespace that selector matches.
	Jobs(ctx context.Context, namespace string, selector labels.Selector) ([]release.Job, error)
	// CanariesIn lists the Flagger Canaries of namespace.
	CanariesIn(ctx context.Context, namespace string) ([]release.Canary, error)
	// DeploymentsIn lists the Deployments of namespace.
	DeploymentsIn(ctx context.Context, namespace string) ([]release.Deployment, error)
	// Reachable reports whether the API server answers at all.
	Reachable(ctx context.Context) error
}

// Kube reads the cluster through client-go, one request per call and no
// cache: every answer is made of what the API server holds at that moment.
// The namespace's reads are releasepath.Objects', shared with the Reporter; Kube
// adds the round's lists and writes and the watch that keeps Flagger's pods
// (WatchPods).
type Kube struct{ *releasepath.Objects }

var _ Cluster = (*Kube)(nil)

// NewKube connects to the API server cfg names.
func NewKube(cfg *rest.Config) (*Kube, error) {
	k, err := releasepath.NewObjects(cfg)
	if err != nil {
		return nil, err
	}
	return &Kube{k}, nil
}

// Reachable asks the API server for its version.
func (k *Kube) Reachable(ctx context.Context) error {
	_, err := k.Core.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	return err
}

// copies are the reads that find members' copies: the Deployments of the
// namespace and a list of pods that holds the copies' pods, side by side.
// Each copy's own selector then picks its pods out of that list.
type copies struct {
	deployments *future[[]release.Deployment]
	pods        *future[[]release.Pod]
	// listedBy is the labels the pods were listed by.
	listedBy labels.Set
}

// readCopies lists the namespace's Deployments and the pods carrying
// listedBy.
func (g *Gate) readCopies(ctx context.Context, q release.Question, listedBy labels.Set) copies {
	return copies{
		deployments: g.readDeployments(ctx, q),
		pods: async(func() ([]release.Pod, error) {
			pods, err := g.cluster.Pods(ctx, q.Namespace, labels.SelectorFromSet(listedBy))
			if err != nil {
				return nil, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Application, err)
			}
			return pods, nil
		}),
		listedBy: listedBy,
	}
}

// byInstance lists the asking member's pods by the instance label, which the
// render puts in every selector and on every pod, and which no one can take
// off a pod without orphaning it: a list by it holds every pod the new copy's
// selector matches.
func byInstance(q release.Question) labels.Set { return labels.Set{release.LabelInstance: q.Process} }

// byApplication lists the pods of every member at once, by the part-of label
// the render puts on every pod template. part-of is no selector, so a pod
// relabelled by hand can be missed; only /rollback reads this way, where a
// pod missed can only keep a release where it is.
func byApplication(q release.Question) labels.Set {
	return labels.Set{release.LabelPartOf: q.Application}
}

func (g *Gate) readDeployments(ctx context.Context, q release.Question) *future[[]release.Deployment] {
	return async(func() ([]release.Deployment, error) {
		ds, err := g.cluster.DeploymentsIn(ctx, q.Namespace)
		if err != nil {
			return nil, fmt.Errorf("list the Deployments of %s: %w", q.Namespace, err)
		}
		return ds, nil
	})
}

// newCopy is the asking member's new copy, its Deployment <process>, and
// the pods its selector matches among those listed.
func (c copies) newCopy(q release.Question) (ds []release.Deployment, all, own []release.Pod, target *release.Deployment, err error) {
	if ds, err = c.deployments.get(); err != nil {
		return nil, nil, nil, nil, err
	}
	if all, err = c.pods.get(); err != nil {
		return nil, nil, nil, nil, err
	}
	if target = deploymentNamed(ds, q.Process); target == nil {
		return nil, nil, nil, nil, fmt.Errorf("read the new copy's Deployment %s/%s: %w", q.Namespace, q.Process, release.ErrNotFound)
	}
	return ds, all, selectPods(all, target.Selector), target, nil
}

// newCopyPods is every pod the asking member's new copy's selector matches.
// Where the selector does not itself require the labels the pods were listed
// by (a Deployment deploy-kit did not render), the list may lack some of
// them, and they are listed again by the selector.
func (g *Gate) newCopyPods(ctx context.Context, q release.Question, c copies) ([]release.Pod, error) {
	_, _, own, target, err := c.newCopy(q)
	if err != nil || requires(target.Selector, c.listedBy) {
		return own, err
	}
	own, err = g.cluster.Pods(ctx, q.Namespace, target.Selector)
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s/%s: %w", q.Namespace, q.Process, err)
	}
	return own, nil
}

// requires reports whether every pod sel matches carries set.
func requires(sel labels.Selector, set labels.Set) bool {
	for k, v := range set {
		if got, ok := sel.RequiresExactMatch(k); !ok || got != v {
			return false
		}
	}
	return true
}

// configMapNamed picks name out of a list; release.ErrNotFound when it is not
// there.
func configMapNamed(cms []release.ConfigMap, name string) (release.ConfigMap, error) {
	for _, cm := range cms {
		if cm.Name == name {
			return cm, nil
		}
	}
	return release.ConfigMap{}, fmt.Errorf("ConfigMap %s: %w", name, release.ErrNotFound)
}

func canaryNamed(cs []release.Canary, name string) (release.Canary, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return release.Canary{}, false
}

// deploymentNamed is the Deployment name among ds; nil when it is not there.
func deploymentNamed(ds []release.Deployment, name string) *release.Deployment {
	for i := range ds {
		if ds[i].Name == name {
			return &ds[i]
		}
	}
	return nil
}
