package releasegate

import (
	"context"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"k8s.io/apimachinery/pkg/labels"
)

// Cluster is what the gate reads from the cluster, each read at the moment a
// question is asked. An answer reads each kind at most once: the reads list a
// namespace, and the gate picks the objects it needs out of the lists. Every
// method returns ErrNotFound (wrapped) for an object that is not there, and
// any other error for a read that did not happen.
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

// Callers tells the gate which pods are Flagger's. It is kept by a watch
// rather than read per question: the caller is checked on every request,
// before anything else, and a watch answers that from what the API server
// last reported without a read of its own, so a refused caller costs the
// cluster nothing and an answer reads pods once, for the member's copy.
type Callers interface {
	// FlaggerPods returns the pods of Flagger's namespace its selector
	// matches, or an error while the watch has not listed them yet.
	FlaggerPods() ([]release.Pod, error)
}
