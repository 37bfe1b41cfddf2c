package releasehistory

import (
	"context"
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// ScrapeVariables are the variables that say who may scrape /metrics: the
// Release Gate's own three, read by the same rule.
var ScrapeVariables = podcallers.ScrapeVariables

// service names the release record in its refusals of a scrape.
const service = "release record"

// NewScrapers holds the release record's /metrics to the metrics stack's
// pods, as the gate holds its own: the figures name every app, env and
// cluster, which only the metrics stack is to collect from here (a
// dashboard reads the read API). It checks the identity as the gate does and
// answers the pods it names through pods.
func NewScrapers(id podcallers.ScraperIdentity, pods podcallers.PodLister, logger *slog.Logger) (*podcallers.Scrapers, error) {
	return podcallers.NewScrapers(service, id, pods, logger)
}

// ScrapersFrom reads the three variables and lists the scraper's pods
// through the cluster KUBECONFIG or the in-cluster ServiceAccount names.
func ScrapersFrom(getenv func(string) string, logger *slog.Logger) (*podcallers.Scrapers, error) {
	id := podcallers.ScraperIdentityFrom(getenv)
	if _, err := id.Validate(); err != nil {
		return nil, err
	}
	rest, err := kubeclient.Config(getenv)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewScrapers(id, func(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error) {
		list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, err
		}
		out := make([]release.Pod, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, releasepath.PodOf(&list.Items[i]))
		}
		return out, nil
	}, logger)
}
