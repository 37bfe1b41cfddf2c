package releasegate

import (
	"testing"
	"time"

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
