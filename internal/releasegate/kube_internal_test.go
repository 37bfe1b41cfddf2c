package releasegate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/probe"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Canary's phase changed when its Promoted condition last changed status;
// status.lastTransitionTime, which Flagger stamps every tick, never counts.
func TestPhaseChangedAt(t *testing.T) {
	failed := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	ticked := metav1.NewTime(failed.Add(time.Hour))
	canary := func(conds ...flaggerv1.CanaryCondition) *flaggerv1.Canary {
		return &flaggerv1.Canary{Status: flaggerv1.CanaryStatus{LastTransitionTime: ticked, Conditions: conds}}
	}
	for _, c := range []struct {
		name   string
		canary *flaggerv1.Canary
		want   time.Time
	}{
		{"the Promoted condition's time", canary(flaggerv1.CanaryCondition{Type: flaggerv1.PromotedType, LastTransitionTime: metav1.NewTime(failed)}), failed},
		{"no Promoted condition: no time", canary(), time.Time{}},
		{"a Promoted condition without a time: none", canary(flaggerv1.CanaryCondition{Type: flaggerv1.PromotedType}), time.Time{}},
	} {
		if got := PhaseChangedAt(c.canary); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

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
