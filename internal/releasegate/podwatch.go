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
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
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
}

var _ Callers = (*PodWatch)(nil)

// WatchPods starts watching the pods of namespace that selector matches,
// until ctx ends; client-go's messages about the watch go to logger. It
// needs list and watch on pods in that namespace alone.
func (k *Kube) WatchPods(ctx context.Context, namespace string, selector labels.Selector, logger *slog.Logger) *PodWatch {
	informer := coreinformers.NewFilteredPodInformer(k.kube, namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector.String() })
	w := &PodWatch{namespace: namespace, selector: selector, informer: informer}
	// The failure is kept for the error FlaggerPods gives until the first
	// list, and logged as client-go logs it; the informer retries on its own.
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	go informer.RunWithContext(klog.NewContext(ctx, logr.FromSlogHandler(logger.Handler())))
	return w
}

// FlaggerPods returns the watched pods; an error until the watch has listed
// them once.
func (w *PodWatch) FlaggerPods() ([]Pod, error) {
	if !w.informer.HasSynced() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.lastErr != nil {
			return nil, fmt.Errorf("the watch of pods %s in %s has not listed them: %w", w.selector, w.namespace, w.lastErr)
		}
		return nil, errors.New("the watch of pods " + w.selector.String() + " in " + w.namespace + " has not listed them yet")
	}
	objs := w.informer.GetStore().List()
	out := make([]Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, podOf(p))
		}
	}
	return out, nil
}
