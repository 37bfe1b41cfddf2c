package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// monitoring is the folder of the ServiceMonitors: not part of the base,
// which applies where the Prometheus Operator's CRDs are not.
const monitoring = "monitoring"

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// these manifests use; a field outside it fails the test, as a misspelt
// one would be dropped by the API server.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// serviceMonitors decodes the monitoring folder's build strictly.
func serviceMonitors(t *testing.T) []serviceMonitor {
	t.Helper()
	var out []serviceMonitor
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(build(t, monitoring))))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var m serviceMonitor
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", monitoring, err)
		}
		out = append(out, m)
	}
}

// TestEveryMetricsServiceHasAServiceMonitor holds deploy/monitoring to the
// services that serve /metrics (those that say who scrapes them,
// METRICS_SCRAPER_NAMESPACE): one ServiceMonitor each, in its namespace,
// selecting its Service alone and scraping /metrics on the Service's port
// that reaches the port the container serves. The base holds none, so it
// still applies on a cluster without the operator.
func TestEveryMetricsServiceHasAServiceMonitor(t *testing.T) {
	o := decode(t, "the base", build(t, base))
	if bytes.Contains(build(t, base), []byte("monitoring.coreos.com")) {
		t.Error("the base holds a Prometheus Operator object: it would not apply where the operator's CRDs are not")
	}
	monitors := map[string]serviceMonitor{}
	for _, m := range serviceMonitors(t) {
		if m.APIVersion != "monitoring.coreos.com/v1" || m.Kind != "ServiceMonitor" {
			t.Errorf("%s/%s is %s %s, want a monitoring.coreos.com/v1 ServiceMonitor", m.Metadata.Namespace, m.Metadata.Name, m.APIVersion, m.Kind)
		}
		monitors[m.Metadata.Name] = m
	}
	var served []string
	for _, d := range o.deployments {
		c := d.Spec.Template.Spec.Containers[0]
		if _, ok := env(c)["METRICS_SCRAPER_NAMESPACE"]; !ok {
			continue
		}
		served = append(served, d.Name)
		m, ok := monitors[d.Name]
		if !ok {
			t.Errorf("%s serves /metrics but has no ServiceMonitor", d.Name)
			continue
		}
		if m.Metadata.Namespace != d.Namespace {
			t.Errorf("ServiceMonitor %s is in %s, its service in %s", m.Metadata.Name, m.Metadata.Namespace, d.Namespace)
		}
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Errorf("ServiceMonitor %s: selector %v (%v)", m.Metadata.Name, m.Spec.Selector, err)
			continue
		}
		var selected []*corev1.Service
		for _, s := range o.services {
			if s.Namespace == m.Metadata.Namespace && sel.Matches(labels.Set(s.Labels)) {
				selected = append(selected, s)
			}
		}
		if len(selected) != 1 || selected[0].Name != d.Name {
			t.Errorf("ServiceMonitor %s selects %d Services, want %s alone", m.Metadata.Name, len(selected), d.Name)
			continue
		}
		if len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor %s scrapes %+v, want /metrics once", m.Metadata.Name, m.Spec.Endpoints)
			continue
		}
		reaches := false
		for _, p := range selected[0].Spec.Ports {
			reaches = reaches || (p.Name == m.Spec.Endpoints[0].Port && resolvePort(t, c, p.TargetPort) == servedPort(t, c))
		}
		if !reaches {
			t.Errorf("ServiceMonitor %s scrapes port %q, which is not the Service's port to %d", m.Metadata.Name, m.Spec.Endpoints[0].Port, servedPort(t, c))
		}
	}
	if len(served) < 2 || len(monitors) != len(served) {
		t.Errorf("ServiceMonitors %v for the services that serve /metrics %v", strings.Join(sorted(slices.Collect(maps.Keys(monitors))), ", "), served)
	}
}
