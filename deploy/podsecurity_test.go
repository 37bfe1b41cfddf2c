package deploy_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// podSecurityModes are the Pod Security admission's three modes, each of
// which the namespace sets to restricted.
var podSecurityModes = []string{"enforce", "audit", "warn"}

// TestNamespaceEnforcesRestricted holds the namespace the base makes to the
// restricted Pod Security Standard in every mode, at the latest version (no
// version label pins an older one).
func TestNamespaceEnforcesRestricted(t *testing.T) {
	for dir, o := range builds(t) {
		if len(o.namespaces) != 1 {
			t.Fatalf("%s makes %d namespaces, want delivery-system", dir, len(o.namespaces))
		}
		labels := o.namespaces[0].Labels
		for _, mode := range podSecurityModes {
			if got := labels["pod-security.kubernetes.io/"+mode]; got != "restricted" {
				t.Errorf("%s: %s is %q, want restricted", dir, mode, got)
			}
			if v, ok := labels["pod-security.kubernetes.io/"+mode+"-version"]; ok {
				t.Errorf("%s: %s is pinned to %s", dir, mode, v)
			}
		}
	}
}

// TestEveryPodMeetsRestricted creates, as a server-side dry run, a pod of
// every Deployment's, Job's and CronJob's template in the base, the overlay
// and the job templates, in a namespace labelled as deploy/namespace labels
// delivery-system: the API server's own Pod Security admission admits each
// one, so the enforce label refuses none of them. A pod that breaks
// restricted is refused in the same namespace, which keeps the test honest.
func TestEveryPodMeetsRestricted(t *testing.T) {
	cp := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := decode(t, "the base", build(t, base))
	ns := cp.Namespace(t)
	namespace, err := cp.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(namespace.Labels, o.namespaces[0].Labels)
	if _, err := cp.Kube.CoreV1().Namespaces().Update(ctx, namespace, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	admit := func(name string, spec corev1.PodSpec) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
		_, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	sets := builds(t)
	for _, file := range templates {
		sets[file] = decode(t, file, readTemplate(t, file))
	}
	pods := 0
	for set, o := range sets {
		for _, w := range o.workloads() {
			pods++
			if err := admit(strings.ToLower(w.kind)+"-"+w.name, w.pod); err != nil {
				t.Errorf("%s: %s does not meet restricted: %v", set, w, err)
			}
		}
	}
	if pods < len(services)+len(templates) {
		t.Errorf("only %d pod templates were checked", pods)
	}

	gate := o.deployment(t, "release-gate").Spec.Template.Spec
	for what, breaks := range map[string]func(*corev1.PodSpec){
		"privilege escalation allowed": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
		},
		"a capability kept": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Capabilities.Drop = nil },
		"no seccomp profile": func(p *corev1.PodSpec) {
			p.SecurityContext.SeccompProfile = nil
		},
		"root allowed": func(p *corev1.PodSpec) { p.SecurityContext.RunAsNonRoot = nil },
		"a host path": func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
	} {
		spec := *gate.DeepCopy()
		breaks(&spec)
		if err := admit("broken", spec); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("%s: admitted (%v)", what, err)
		}
	}
}
