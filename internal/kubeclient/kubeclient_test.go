package kubeclient_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: estate
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: gate
  user: {token: test-token}
contexts:
- name: estate
  context: {cluster: estate, user: gate}
current-context: estate
`

func TestConfigReadsKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeclient.Config(func(k string) string { return map[string]string{"KUBECONFIG": path}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "test-token" {
		t.Fatalf("config = %s %q", cfg.Host, cfg.BearerToken)
	}
}

func TestConfigNamesAMissingKubeconfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	_, err := kubeclient.Config(func(k string) string { return map[string]string{"KUBECONFIG": missing}[k] })
	if err == nil || !strings.HasPrefix(err.Error(), "KUBECONFIG") {
		t.Fatalf("Config = %v, want an error naming KUBECONFIG", err)
	}
}

// Inside a pod too, a KUBECONFIG naming no file stops: it never falls back
// to the pod's own ServiceAccount.
func TestConfigNamesAMissingKubeconfigInACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	missing := filepath.Join(t.TempDir(), "typo")
	_, err := kubeclient.Config(func(k string) string { return map[string]string{"KUBECONFIG": missing}[k] })
	if err == nil || !strings.HasPrefix(err.Error(), "KUBECONFIG") || !strings.Contains(err.Error(), "typo") {
		t.Fatalf("Config = %v, want an error naming KUBECONFIG and its file", err)
	}
}

// Outside a pod and with no KUBECONFIG, the home folder's config is read; an
// empty home has none.
func TestConfigOutsideAClusterWithNothingToRead(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := kubeclient.Config(func(string) string { return "" }); err == nil {
		t.Fatal("Config found a cluster with nothing to read")
	}
}

// TestClusterConfigInCluster: inside a cluster, without KUBECONFIG, a service
// takes its ServiceAccount's config; with the token not mounted it stops
// rather than fall back to a file.
func TestClusterConfigInCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	if _, err := kubeclient.Config(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "in-cluster") {
		t.Fatalf("in a cluster without a token: %v", err)
	}
}

// TestLogAsJSON: client-go's log lines come out as JSON lines.
func TestLogAsJSON(t *testing.T) {
	var out bytes.Buffer
	kubeclient.LogAsJSON(&out)
	t.Cleanup(klog.ClearLogger)
	klog.ErrorS(errors.New("watch closed"), "Failed to watch", "reflector", "pods")
	klog.Flush()
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", out.String(), err)
	}
	if line["msg"] != "Failed to watch" || line["err"] != "watch closed" || line["reflector"] != "pods" {
		t.Fatalf("the line lost what klog said: %v", line)
	}
}

// A configuration with no pace reads at the services' own; one with a pace
// keeps it; the caller's configuration is never changed.
func TestPaced(t *testing.T) {
	unset := &rest.Config{Host: "https://127.0.0.1:6443"}
	if got := kubeclient.Paced(unset); got.QPS != kubeclient.BurstQPS || got.Burst != kubeclient.Burst || got.Host != unset.Host {
		t.Errorf("Paced(unset) = %v/%d", got.QPS, got.Burst)
	}
	if unset.QPS != 0 || unset.Burst != 0 {
		t.Error("Paced changed the caller's configuration")
	}
	if got := kubeclient.Paced(&rest.Config{QPS: -1}); got.QPS != -1 || got.Burst != 0 {
		t.Errorf("Paced(unlimited) = %v/%d, want it kept", got.QPS, got.Burst)
	}
}
