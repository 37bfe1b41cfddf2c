package releaserecord

import (
	"context"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// Pushed is a source that posts its facts to the service: Argo Rollouts'
// and Argo CD's notifications. Each implementation decodes its own body; the
// rules every pushed fact meets (the token, the cluster, the namespace, the
// generation, the release id) are the handler's.
type Pushed interface {
	// Name is the source as answers and logs name it.
	Name() string
	// Route is its POST route, ending in {cluster}.
	Route() string
	// Decode reads one body; an error is a body of another shape.
	Decode(raw []byte) (Claim, error)
}

// Claim is what a pushed body says, before the service's rules.
type Claim struct {
	// Namespace is the object's; one outside the allowed pattern is ignored.
	Namespace string
	// ReleaseID is the release the fact is about; "" when the body names
	// none.
	ReleaseID string
	// App and Env name the service a fact without a release id is about.
	App, Env string
	// Revision picks, among that service's releases in flight, the one at it.
	Revision string
	// Generation and ObservedGeneration differ when the object's controller
	// has not seen its spec yet; both "" when the source has none.
	Generation, ObservedGeneration string
	Fact                           Fact
	// Ignore, when set, says why the body asks nothing.
	Ignore string
}

// Observed is a source the service looks at rather than hears from: each
// pass reads what the cluster shows as facts, in the order to take them.
// Events about it are prompts to look again, never evidence.
type Observed interface {
	// Name is the source as logs name it.
	Name() string
	// Observe reads the cluster once.
	Observe(ctx context.Context) ([]Fact, error)
}

// Holds is the Release Gate's word on a release of this product's path: whether
// it holds the release its Canaries carry, and why. The Flux look asks it
// for each unit whose source pins its release, and says the answer as a
// PhaseHeld fact.
type Holds interface {
	// Name is the source as logs name it.
	Name() string
	// Held reads what the gate holds of the Application the members'
	// Canaries carry. known is false when the gate's word cannot be read
	// (no Application named, its record unreadable): no fact is said then.
	Held(ctx context.Context, members []releasepath.Member) (reason string, known bool, err error)
}
