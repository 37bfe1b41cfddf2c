package releasegate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// PodWatch holds the pods of one namespace that a selector matches, as the
// API server's watch last reported them. It serves Callers for Flagger's
// pods: they change when Flagger is rolled, and a watch delivers that within
// moments, where a read per question would double the pods an answer reads.
type PodWatch struct {
	namespace string
	selector  labels.Selector
	informer  cache.SharedIndexInformer

	mu      sync.Mutex
	lastErr error
	// broken is set when the watch fails after it had listed once. Until a
	// list or a watch gets through again, what it holds may be long gone.
	broken bool

	stopped chan struct{}
}

// ErrCallersStale is the error FlaggerPods gives while the watch cannot
// list Flagger's pods again: the pods it last saw may no longer be Flagger's,
// and their addresses may be another pod's.
var ErrCallersStale = errors.New("the watch of Flagger's pods cannot list them")

var _ Callers = (*PodWatch)(nil)

// WatchPods starts watching the pods of namespace that selector matches,
// until ctx ends; client-go's messages about the watch go to logger. It
// needs list and watch on pods in that namespace alone.
func (k *Kube) WatchPods(ctx context.Context, namespace string, selector labels.Selector, logger *slog.Logger) *PodWatch {
	pods := k.Core.CoreV1().Pods(namespace)
	return watchPods(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = selector.String()
		return pods.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = selector.String()
		return pods.Watch(ctx, o)
	}, namespace, selector, logger)
}

func watchPods(ctx context.Context, list cache.ListWithContextFunc, watchFrom cache.WatchFuncWithContext,
	namespace string, selector labels.Selector, logger *slog.Logger) *PodWatch {
	w := &PodWatch{namespace: namespace, selector: selector}
	// A list that succeeds is news of the pods as they are: it ends a
	// break, whatever version it is at.
	listed := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, o)
		if err == nil {
			w.mu.Lock()
			w.broken = false
			w.mu.Unlock()
		}
		return obj, err
	}
	// client-go retries a watch the API server refused for the moment
	// (connection refused, 429) on its own, without a word to the handler
	// below, and serves what it last saw meanwhile: that is stale too,
	// until a watch or a list gets through. A watch is asked for only after
	// a list or from the version the last watch reached, so once it gets
	// through it delivers every change since.
	watched := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		wi, err := watchFrom(ctx, o)
		w.mu.Lock()
		w.broken = err != nil
		if err != nil {
			w.lastErr = err
		}
		w.mu.Unlock()
		return wi, err
	}
	informer := cache.NewSharedIndexInformer(listsFirst{&cache.ListWatch{ListWithContextFunc: listed, WatchFuncWithContext: watched}},
		&corev1.Pod{}, 0, cache.Indexers{})
	w.informer = informer
	// The failure is kept for the error FlaggerPods gives until the first
	// list, and logged as client-go logs it; the informer retries on its own.
	// client-go calls it when a list fails or a watch is refused for good
	// (403, say): after the first list, it marks what the watch holds as
	// stale until a list succeeds.
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = err
		if w.informer.HasSynced() {
			w.broken = true
		}
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w.stopped = make(chan struct{})
	go func() {
		defer close(w.stopped)
		informer.RunWithContext(klog.NewContext(ctx, logr.FromSlogHandler(logger.Handler())))
	}()
	return w
}

// Stopped is closed once the watch has stopped, after ctx ended: nothing of
// it logs any more.
func (w *PodWatch) Stopped() <-chan struct{} { return w.stopped }

// FlaggerPods returns the watched pods; an error until the watch has listed
// them once, and ErrCallersStale while it cannot list them again.
func (w *PodWatch) FlaggerPods() ([]release.Pod, error) {
	w.mu.Lock()
	if !w.informer.HasSynced() {
		defer w.mu.Unlock()
		if w.lastErr != nil {
			return nil, fmt.Errorf("the watch of pods %s in %s has not listed them: %w", w.selector, w.namespace, w.lastErr)
		}
		return nil, errors.New("the watch of pods " + w.selector.String() + " in " + w.namespace + " has not listed them yet")
	}
	if w.broken {
		defer w.mu.Unlock()
		return nil, fmt.Errorf("%w (pods %s in %s): %w", ErrCallersStale, w.selector, w.namespace, w.lastErr)
	}
	w.mu.Unlock()
	objs := w.informer.GetStore().List()
	out := make([]release.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, releasepath.PodOf(p))
		}
	}
	return out, nil
}

// listsFirst has the informer list, then watch, rather than stream its list
// through a watch (client-go's WatchList): a list that succeeds is then the
// sign that the watch knows the pods again. Flagger's pods are a handful.
type listsFirst struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector so.
func (listsFirst) IsWatchListSemanticsUnSupported() bool { return true }
