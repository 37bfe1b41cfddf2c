// Package kubeclient finds the cluster a service runs against, the one way
// every in-cluster service of this module does.
package kubeclient

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Config finds the cluster as kubectl does: the files KUBECONFIG names, else
// the pod's own ServiceAccount, else ~/.kube/config.
func Config(getenv func(string) string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig := getenv("KUBECONFIG"); kubeconfig != "" {
		// client-go skips files that are not there and, inside a pod, would
		// quietly fall back to the pod's own ServiceAccount: a KUBECONFIG
		// naming no file is a mistake to stop on.
		rules.Precedence = filepath.SplitList(kubeconfig)
		if !slices.ContainsFunc(rules.Precedence, func(path string) bool { _, err := os.Stat(path); return err == nil }) {
			return nil, fmt.Errorf("KUBECONFIG: no file of %q exists", kubeconfig)
		}
	} else {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("KUBECONFIG: no Kubernetes configuration: %w", err)
	}
	return cfg, nil
}

// LogAsJSON sends client-go's own log lines (a request cut short, a watch
// retried) to w as JSON lines, as the services write theirs, instead of
// klog's text on standard error. klog's logger is the process's, and
// informers read it while they run, so a service's main calls this once,
// before anything of client-go starts.
func LogAsJSON(w io.Writer) {
	klog.SetSlogLogger(slog.New(slog.NewJSONHandler(w, nil)))
}
