package deploy_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/JorisJonkers-dev/delivery/internal/reporter"
)

// nonRoot is the uid and gid every image runs as (distroless's nonroot).
const nonRoot = 65532

// livenessPath is each service's liveness endpoint: the Collector and the
// Reporter and the release record are restarted when they stop succeeding, the gate when it stops
// living.
var livenessPath = map[string]string{"release-gate": "/healthz", "collector": "/fresh", "reporter": "/fresh", "release-record": "/fresh"}

// TestEveryContainerIsHardened holds every container of the base, the
// overlay and the job templates to the restricted posture: not root but uid
// 65532, a read-only root filesystem, no privilege escalation, no
// capability, the runtime's default seccomp profile, and requests and a
// memory limit at least the request.
func TestEveryContainerIsHardened(t *testing.T) {
	sets := builds(t)
	for _, file := range templates {
		sets[file] = decode(t, file, readTemplate(t, file))
	}
	for set, o := range sets {
		for _, w := range o.workloads() {
			if len(w.pod.InitContainers) != 0 {
				t.Errorf("%s: %s has init containers, which this test does not read", set, w)
			}
			if w.pod.HostNetwork || w.pod.HostPID || w.pod.HostIPC {
				t.Errorf("%s: %s shares a host namespace", set, w)
			}
			for _, c := range w.pod.Containers {
				for _, problem := range hardening(w.pod.SecurityContext, c) {
					t.Errorf("%s: %s container %s: %s", set, w, c.Name, problem)
				}
				for _, problem := range sized(c.Resources) {
					t.Errorf("%s: %s container %s: %s", set, w, c.Name, problem)
				}
			}
		}
	}
}

// hardening says what of the restricted posture a container lacks, reading
// each field where Kubernetes does: the container's own, else the pod's.
func hardening(pod *corev1.PodSecurityContext, c corev1.Container) []string {
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	var problems []string
	nonRootSet := first(sc.RunAsNonRoot, pod.RunAsNonRoot)
	if nonRootSet == nil || !*nonRootSet {
		problems = append(problems, "runAsNonRoot is not true")
	}
	if uid := first(sc.RunAsUser, pod.RunAsUser); uid == nil || *uid != nonRoot {
		problems = append(problems, fmt.Sprintf("runAsUser is not %d", nonRoot))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		problems = append(problems, "readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		problems = append(problems, "allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		problems = append(problems, "privileged")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		problems = append(problems, "capabilities do not drop ALL and add nothing")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		problems = append(problems, "seccompProfile is not RuntimeDefault")
	}
	return problems
}

func first[T any](own, inherited *T) *T {
	if own != nil {
		return own
	}
	return inherited
}

// sized says what a container's resources lack: a CPU and a memory
// request, and a memory limit no lower than the request.
func sized(r corev1.ResourceRequirements) []string {
	var problems []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Requests[name]; !ok || q.IsZero() {
			problems = append(problems, "no "+string(name)+" request")
		}
		if q, ok := r.Limits[name]; !ok || q.IsZero() {
			problems = append(problems, "no "+string(name)+" limit")
		}
	}
	if limit, request := r.Limits[corev1.ResourceMemory], r.Requests[corev1.ResourceMemory]; limit.Cmp(request) < 0 {
		problems = append(problems, "a memory limit under its request")
	}
	return problems
}

// TestDeploymentsProbeTheirEndpoints holds each Deployment's probes to its
// guide: startup on /healthz, liveness on /healthz (the gate) or /fresh (the
// Collector and the Reporter), readiness on /readyz, every one on the port
// the service serves on (its ADDR) and its Service targets.
func TestDeploymentsProbeTheirEndpoints(t *testing.T) {
	for set, o := range builds(t) {
		for _, s := range services {
			d := o.deployment(t, s)
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("%s: Deployment %s runs %d containers, not one", set, s, len(d.Spec.Template.Spec.Containers))
			}
			c := d.Spec.Template.Spec.Containers[0]
			port := servedPort(t, c)
			for _, p := range []struct {
				kind, path string
				probe      *corev1.Probe
			}{
				{"startup", "/healthz", c.StartupProbe},
				{"liveness", livenessPath[s], c.LivenessProbe},
				{"readiness", "/readyz", c.ReadinessProbe},
			} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: %s has no HTTP %s probe", set, s, p.kind)
					continue
				}
				if p.probe.HTTPGet.Path != p.path {
					t.Errorf("%s: %s's %s probe asks %s, not %s", set, s, p.kind, p.probe.HTTPGet.Path, p.path)
				}
				if got := resolvePort(t, c, p.probe.HTTPGet.Port); got != port {
					t.Errorf("%s: %s's %s probe asks port %d, the service serves on %d", set, s, p.kind, got, port)
				}
			}
			svc := service(t, o, s)
			if len(svc.Spec.Ports) != 1 || resolvePort(t, c, svc.Spec.Ports[0].TargetPort) != port {
				t.Errorf("%s: Service %s does not target port %d", set, s, port)
			}
			for k, v := range svc.Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("%s: Service %s selects %s=%s, which %s's pods lack", set, s, k, v, s)
				}
			}
		}
	}
}

// servedPort is the port ADDR names, which must be the container's one port.
func servedPort(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	addr, ok := env(c)["ADDR"]
	if !ok {
		t.Fatalf("container %s sets no ADDR", c.Name)
	}
	_, port, err := net.SplitHostPort(addr.Value)
	if err != nil {
		t.Fatalf("container %s: ADDR %q: %v", c.Name, addr.Value, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != int32(n) {
		t.Fatalf("container %s serves on %d but declares ports %v", c.Name, n, c.Ports)
	}
	return int32(n)
}

// resolvePort reads a port given by number or by the container's name for it.
func resolvePort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, p.StrVal)
	return 0
}

func service(t *testing.T, o objects, name string) *corev1.Service {
	t.Helper()
	for _, s := range o.services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

// TestReleaseGateReplicasAndAddress holds the gate to two replicas spread
// over the nodes with a PodDisruptionBudget keeping one, each named on its
// Lease by its pod's name, never none through a rollout, its
// Service keeping a caller on one replica (the notes of what the members
// asked live in the replica asked), and to the address deploy-kit's Canary
// webhooks and the Reporter name it by.
func TestReleaseGateReplicasAndAddress(t *testing.T) {
	for set, o := range builds(t) {
		d := o.deployment(t, "release-gate")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s: the gate runs %v replicas, not two", set, d.Spec.Replicas)
		}
		if spread := d.Spec.Template.Spec.TopologySpreadConstraints; len(spread) != 1 || spread[0].TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("%s: the gate's replicas are not spread over the nodes: %+v", set, spread)
		}
		if pdb := o.pdb(t, "release-gate"); pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
			pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "release-gate" {
			t.Errorf("%s: no PodDisruptionBudget keeps one gate: %+v", set, pdb.Spec)
		}
		if r := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
			r == nil || r.MaxUnavailable == nil || r.MaxUnavailable.IntValue() != 0 {
			t.Errorf("%s: a rollout of the gate may leave Flagger no gate to ask", set)
		}
		if name := env(d.Spec.Template.Spec.Containers[0])["POD_NAME"]; name.ValueFrom == nil ||
			name.ValueFrom.FieldRef == nil || name.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("%s: the gate's POD_NAME is not its pod's name, so two replicas could share a name on the Lease", set)
		}
		svc := service(t, o, "release-gate")
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			t.Errorf("%s: the gate's Service spreads one caller's questions over the replicas", set)
		}
		url := fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)
		if worked := "http://release-gate.delivery-system.svc.cluster.local:8080"; url != worked || reporter.DefaultGateURL != worked {
			t.Errorf("%s: the gate's Service answers at %s, not where deploy-kit's webhooks and the Reporter's default name it", set, url)
		}
		if got := env(o.deployment(t, "reporter").Spec.Template.Spec.Containers[0])["GATE_URL"].Value; got != url {
			t.Errorf("%s: the Reporter's GATE_URL %s is not the gate's Service %s", set, got, url)
		}
	}
}
