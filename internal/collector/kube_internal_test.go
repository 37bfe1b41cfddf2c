package collector

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A continue token that expires mid-way (an etcd compaction, 410) restarts
// the list from its start: every item is kept once, none twice.
func TestEachListsAgainWhenAContinueTokenExpires(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	expired := false
	list := func(opts metav1.ListOptions) (runtime.Object, error) {
		start := 0
		if opts.Continue != "" {
			if !expired {
				expired = true
				return nil, apierrors.NewResourceExpired("the continue token expired")
			}
			start = int(opts.Continue[0] - '0')
		}
		end := min(start+int(opts.Limit), len(names))
		out := &corev1.PodList{}
		for _, n := range names[start:end] {
			out.Items = append(out.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		if end < len(names) {
			out.Continue = string(rune('0' + end))
		}
		return out, nil
	}
	var kept []string
	k := &Kube{PageSize: 2}
	err := k.each(context.Background(), metav1.ListOptions{}, list,
		func(obj runtime.Object) { kept = append(kept, obj.(*corev1.Pod).Name) }, func() { kept = nil })
	if err != nil || !expired || !slices.Equal(kept, names) {
		t.Fatalf("kept %v (expired %v): %v", kept, expired, err)
	}
}
