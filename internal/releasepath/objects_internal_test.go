package releasepath

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

func TestWrittenAt(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 12, 1, 12, 0, s, 0, time.UTC)} }
	entry := func(manager, subresource, fields string, when *metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: subresource, Time: when, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	const template = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{}}}}}`
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    *metav1.Time
	}{
		{"one writer of the template", []metav1.ManagedFieldsEntry{entry("flux", "", template, at(1))}, at(1)},
		{"the latest of several writers of the template",
			[]metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("kubectl-edit", "", template, at(5)), entry("old", "", template, at(3))}, at(5)},
		{"a writer of other fields is not the template's",
			[]metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("flagger", "", `{"f:spec":{"f:replicas":{}}}`, at(9))}, at(1)},
		{"a write through a subresource is not the spec's",
			[]metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("kcm", "status", `{"f:status":{}}`, at(9)), entry("hpa", "scale", `{"f:spec":{"f:template":{}}}`, at(9))}, at(1)},
		{"owning only the spec node owns nothing under it",
			[]metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("creator", "", `{"f:spec":{".":{},"f:replicas":{}}}`, at(9))}, at(1)},
		{"owning the template node itself is owning it",
			[]metav1.ManagedFieldsEntry{entry("flux", "", `{"f:spec":{"f:template":{".":{}}}}`, at(4))}, at(4)},
		{"no writer of the template says nothing", []metav1.ManagedFieldsEntry{entry("flagger", "", `{"f:spec":{"f:replicas":{}}}`, at(9))}, nil},
		{"an entry with no time cannot be told", []metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("x", "", `{"f:metadata":{}}`, nil)}, nil},
		{"an entry that does not read cannot be told", []metav1.ManagedFieldsEntry{entry("flux", "", template, at(1)), entry("x", "", `{"f:spec":`, at(2))}, nil},
		{"no managed fields at all", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := writtenAt(c.entries, "spec", "template")
			if c.want == nil {
				if !got.IsZero() {
					t.Fatalf("written at %s, want no time", got)
				}
				return
			}
			if !got.Equal(c.want.Time) {
				t.Fatalf("written at %s, want %s", got, c.want.Time)
			}
		})
	}
}
