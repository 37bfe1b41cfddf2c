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

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// Variables are the variables Config reads, for a service's --help.
var Variables = []settings.Variable{
	{Name: "KUBECONFIG", Default: settings.Unset, Meaning: "kubeconfig file(s) to reach the cluster; unset, the in-cluster ServiceAccount, else ~/.kube/config, as kubectl does"},
}

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

// BurstQPS and Burst are the pace a service reads the cluster at when its
// configuration sets none: client-go's default of 5 requests a second, with a burst of
// 10, would stretch one pass over thousands of objects past its interval.
// The API server's priority and fairness still bounds it.
const (
	BurstQPS = 50
	Burst    = 100
)

// Paced is a copy of cfg that reads at BurstQPS when cfg sets no pace of
// its own.
func Paced(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = BurstQPS, Burst
	}
	return cfg
}
