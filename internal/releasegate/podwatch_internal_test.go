package releasegate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// Once the watch of Flagger's pods cannot list them again after its first
// list (its Role taken away, say), the pods it holds admit no one: their
// addresses may be other pods' by now. Here the watch itself never fails: it
// ends as an expired one does, and the list client-go makes next is refused.
// A list that succeeds again restores it.
func TestAWatchThatCannotListAgainAdmitsNoOne(t *testing.T) {
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	ctx := t.Context()
	flaggerPod := func(name string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "flagger"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "flagger", Image: "flagger"}}},
		}
		if _, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	flaggerPod("flagger-0")
	sel := labels.SelectorFromSet(labels.Set{"app": "flagger"})
	pods := cp.Kube.CoreV1().Pods(ns)
	var listRefused atomic.Bool
	watches := make(chan *watch.FakeWatcher, 10)
	w := watchPods(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if listRefused.Load() {
			return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("the Role to list is gone"))
		}
		o.LabelSelector = sel.String()
		return pods.List(ctx, o)
	}, func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		fw := watch.NewFake()
		watches <- fw
		return fw, nil
	}, ns, sel, nil)

	wait.For(t, "the first list", func() bool {
		got, err := w.FlaggerPods()
		return err == nil && len(got) == 1
	})
	listRefused.Store(true)
	// The watch ends as one whose version expired: client-go lists again.
	(<-watches).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
	wait.For(t, "the watch read as stale once its list is refused", func() bool {
		_, err := w.FlaggerPods()
		return errors.Is(err, ErrCallersStale) && strings.Contains(err.Error(), "the Role to list is gone")
	})
	// A list that succeeds ends it, though nothing in the cluster moved.
	listRefused.Store(false)
	wait.For(t, "the watch listing the pods again", func() bool {
		got, err := w.FlaggerPods()
		return err == nil && len(got) == 1
	})
}

// A watch the API server refuses for the moment (connection refused, 429)
// client-go retries without telling anyone; the pods seen before admit no
// one meanwhile, and do again once a watch gets through.
func TestAWatchRetryingAfterARefusalAdmitsNoOne(t *testing.T) {
	cp := testenv.Shared(t)
	ns := cp.Namespace(t)
	ctx := t.Context()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "flagger-0", Namespace: ns, Labels: map[string]string{"app": "flagger"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "flagger", Image: "flagger"}}},
	}
	if _, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "flagger"})
	pods := cp.Kube.CoreV1().Pods(ns)
	var refused atomic.Bool
	refused.Store(true)
	w := watchPods(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = sel.String()
		return pods.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if refused.Load() {
			return nil, fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)
		}
		o.LabelSelector = sel.String()
		return pods.Watch(ctx, o)
	}, ns, sel, nil)

	wait.For(t, "the watch read as stale while it cannot watch", func() bool {
		_, err := w.FlaggerPods()
		return errors.Is(err, ErrCallersStale) && w.informer.HasSynced()
	})
	refused.Store(false)
	wait.For(t, "the watch admitting Flagger's pod again", func() bool {
		got, err := w.FlaggerPods()
		return err == nil && len(got) == 1
	})
}
