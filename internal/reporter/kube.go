package reporter

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// Cluster is what the Reporter reads from the cluster: the release path's
// units, sources and members (releasepath.Kube reads them). It writes
// nothing.
type Cluster interface {
	// Units lists the Kustomizations named project-<project> in namespace.
	Units(ctx context.Context, namespace string) ([]releasepath.UnitObject, error)
	// Source reads the OCIRepository a unit applies: its pin and whether
	// it could fetch it.
	Source(ctx context.Context, namespace, name string) (releasepath.Source, error)
	// Member reads a Canary and the Deployments it promotes between;
	// HasCanary is false when the Canary is not there.
	Member(ctx context.Context, canary types.NamespacedName) (releasepath.Member, error)
}

var _ Cluster = (*releasepath.Kube)(nil)
