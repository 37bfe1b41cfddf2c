package releasegate

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Kube reads the cluster through client-go, one request per call and no
// cache: every answer is made of what the API server holds at that moment.
// The namespace's reads are release.Kube's, shared with the Reporter; Kube
// adds the round's lists and writes and the watch that keeps Flagger's pods
// (WatchPods).
type Kube struct{ *release.Kube }

var _ Cluster = (*Kube)(nil)

// NewKube connects to the API server cfg names.
func NewKube(cfg *rest.Config) (*Kube, error) {
	k, err := release.NewKube(cfg)
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
