package releasegate

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
)

type warmerFunc func(ctx context.Context, hosts, paths []string) (probe.Warmup, error)

func (f warmerFunc) Warm(ctx context.Context, hosts, paths []string) (probe.Warmup, error) {
	return f(ctx, hosts, paths)
}

// Two members sharing a host may hand more paths together than one call of
// the warmer takes: every path is still requested, a call's worth at a time.
func TestWarmRequestsEveryPathOfASharedHost(t *testing.T) {
	var paths []string
	for i := range 2 * probe.MaxPaths {
		paths = append(paths, fmt.Sprintf("/p%d", i))
	}
	requested := map[string]bool{}
	tender := &Tender{warmer: warmerFunc(func(_ context.Context, hosts, paths []string) (probe.Warmup, error) {
		if len(paths) > probe.MaxPaths+1 {
			return probe.Warmup{}, fmt.Errorf("%d paths, more than %d", len(paths), probe.MaxPaths+1)
		}
		for _, p := range paths {
			requested[hosts[0]+p] = true
		}
		return probe.Warmup{Requests: len(paths)}, nil
	})}
	got, ok := tender.warm(t.Context(), &Warm{Revision: "r", Targets: []WarmTarget{{Host: "auth.example.com", Paths: paths}}})
	if !ok || !got.Warmed || got.Failed != nil || len(requested) != len(paths) {
		t.Fatalf("warmed %+v (%v), %d of %d paths requested", got, ok, len(requested), len(paths))
	}
}

// An address client-go cannot build a client for stops the gate at start,
// before it serves anything.
func TestNewKubeRefusesAnAddressThatDoesNotParse(t *testing.T) {
	if _, err := NewKube(&rest.Config{Host: "http://a b"}); err == nil {
		t.Fatal("a client was built for an address that does not parse")
	}
}
