package releasegate

import (
	"errors"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

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

// FlaggerIdentity says which pods are Flagger: the only callers the gate answers.
type FlaggerIdentity struct {
	Namespace      string
	Selector       string
	ServiceAccount string
}

// Validate checks the identity names Flagger's pods precisely and returns its
// selector: a selector that matches every pod would let any pod in
// Flagger's namespace ask.
func (f FlaggerIdentity) Validate() (labels.Selector, error) {
	sel, err := labels.Parse(f.Selector)
	if err != nil {
		return nil, fmt.Errorf("FLAGGER_SELECTOR %q: %w", f.Selector, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("FLAGGER_SELECTOR %q selects every pod", f.Selector)
	}
	if f.Namespace == "" || f.ServiceAccount == "" {
		return nil, errors.New("FLAGGER_NAMESPACE and FLAGGER_SERVICE_ACCOUNT must name Flagger's pods")
	}
	return sel, nil
}

// IsFlagger reports whether addr, a connection's source address, belongs to a
// pod of Flagger among pods (the pods of Flagger's namespace its selector
// matches), by the rule every caller known by its pod is held to
// (podcallers.Admits), the metrics stack's on /metrics too.
func IsFlagger(addr netip.Addr, pods []release.Pod, serviceAccount string) bool {
	return podcallers.Admits(addr, pods, serviceAccount)
}
