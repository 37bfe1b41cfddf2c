package collector

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func hostIn(nodes ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: hostnameKey, Operator: corev1.NodeSelectorOpIn, Values: nodes}
}

func affinity(terms ...[]corev1.NodeSelectorRequirement) *corev1.VolumeNodeAffinity {
	a := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{}}
	for _, t := range terms {
		a.Required.NodeSelectorTerms = append(a.Required.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
	}
	return a
}

func TestOnlyNode(t *testing.T) {
	zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}
	cases := []struct {
		name     string
		affinity *corev1.VolumeNodeAffinity
		want     string
	}{
		{"In with one node binds to it", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a")}), "node-a"},
		{"In with several nodes binds to nothing", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a", "node-b")}), ""},
		{"the same node twice is one node", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a", "node-a")}), "node-a"},
		{"other keys only bind to nothing", affinity([]corev1.NodeSelectorRequirement{zone}), ""},
		{"the hostname beside another key still names one node", affinity([]corev1.NodeSelectorRequirement{zone, hostIn("node-a")}), "node-a"},
		{"no affinity binds to nothing", nil, ""},
		{"no required selector binds to nothing", &corev1.VolumeNodeAffinity{}, ""},
		{"no terms binds to nothing", affinity(), ""},
		{"NotIn is not one node", affinity([]corev1.NodeSelectorRequirement{{Key: hostnameKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-a"}}}), ""},
		{"Exists is not one node", affinity([]corev1.NodeSelectorRequirement{{Key: hostnameKey, Operator: corev1.NodeSelectorOpExists}}), ""},
		{"two terms naming the same node", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a")}, []corev1.NodeSelectorRequirement{hostIn("node-a")}), "node-a"},
		{"two terms naming two nodes", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a")}, []corev1.NodeSelectorRequirement{hostIn("node-b")}), ""},
		{"a term without the hostname opens it to any node", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a")}, []corev1.NodeSelectorRequirement{zone}), ""},
		{"two In expressions in one term intersect to one node", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a", "node-b"), hostIn("node-b", "node-c")}), "node-b"},
		{"two In expressions in one term with nothing in common", affinity([]corev1.NodeSelectorRequirement{hostIn("node-a"), hostIn("node-b")}), ""},
		{"In with no values", affinity([]corev1.NodeSelectorRequirement{hostIn()}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := OnlyNode(tc.affinity); got != tc.want {
				t.Fatalf("OnlyNode = %q, want %q", got, tc.want)
			}
		})
	}
}

func pv(name, claimNS, claimName, claimUID string, a *corev1.VolumeNodeAffinity) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: a}}
	if claimName != "" {
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimNS, Name: claimName, UID: typesUID(claimUID)}
	}
	return v
}

func pvc(ns, name, uid, volume string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: typesUID(uid)},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

func TestBindingsOf(t *testing.T) {
	local := func(n string) *corev1.VolumeNodeAffinity {
		return affinity([]corev1.NodeSelectorRequirement{hostIn(n)})
	}
	volumes := []Volume{
		VolumeOf(pv("pv-data", "app-system", "data", "u1", local("node-a"))),
		VolumeOf(pv("pv-shared", "app-system", "shared", "u2", nil)),
		VolumeOf(pv("pv-other", "app-system", "someone-else", "u9", local("node-b"))),
		VolumeOf(pv("pv-reused", "app-system", "reused", "old-uid", local("node-c"))),
		VolumeOf(pv("pv-nouid", "app-system", "nouid", "", local("node-d"))),
		VolumeOf(pv("pv-free", "", "", "", local("node-e"))),
	}
	claims := []Claim{
		ClaimOf(pvc("app-system", "data", "u1", "pv-data", corev1.ClaimBound)),
		ClaimOf(pvc("app-system", "shared", "u2", "pv-shared", corev1.ClaimBound)),
		ClaimOf(pvc("app-system", "wants-other", "u3", "pv-other", corev1.ClaimBound)),
		ClaimOf(pvc("app-system", "reused", "new-uid", "pv-reused", corev1.ClaimBound)),
		ClaimOf(pvc("app-system", "nouid", "u5", "pv-nouid", corev1.ClaimBound)),
		ClaimOf(pvc("app-system", "pending", "u6", "pv-free", corev1.ClaimPending)),
		ClaimOf(pvc("app-system", "lost", "u7", "pv-gone", corev1.ClaimBound)),
	}
	got := BindingsOf(volumes, claims)
	want := []Binding{{Claim: "data", Node: "node-a"}, {Claim: "nouid", Node: "node-d"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("bindings %v, want %v", got, want)
	}
}

func TestPlacementOf(t *testing.T) {
	pod := func(labels map[string]string, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	ours := map[string]string{LabelManagedBy: ManagedBy, LabelName: "api"}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a running pod is placed", pod(ours, "node-a", corev1.PodRunning), true},
		{"a pending pod scheduled to a node is placed", pod(ours, "node-a", corev1.PodPending), true},
		{"a pod in unknown phase is still placed", pod(ours, "node-a", corev1.PodUnknown), true},
		{"a pod with no phase yet is placed", pod(ours, "node-a", ""), true},
		{"a succeeded pod is finished", pod(ours, "node-a", corev1.PodSucceeded), false},
		{"a failed pod is finished", pod(ours, "node-a", corev1.PodFailed), false},
		{"an unscheduled pod is on no node", pod(ours, "", corev1.PodPending), false},
		{"a pod deploy-kit did not render", pod(map[string]string{LabelManagedBy: "helm", LabelName: "api"}, "node-a", corev1.PodRunning), false},
		{"a deploy-kit pod without a name", pod(map[string]string{LabelManagedBy: ManagedBy}, "node-a", corev1.PodRunning), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := PlacementOf(tc.pod)
			if ok != tc.want || (ok && p != (Placement{Process: "api", Node: "node-a"})) {
				t.Fatalf("PlacementOf = %v, %v", p, ok)
			}
		})
	}
}

func TestNormalizeOrdersAndDeduplicates(t *testing.T) {
	f := Normalize(Facts{
		Bindings:   []Binding{{"b", "n2"}, {"a", "n1"}, {"b", "n1"}, {"a", "n1"}},
		Placements: []Placement{{"web", "n2"}, {"api", "n1"}, {"web", "n1"}, {"web", "n2"}},
	})
	want := Facts{
		Bindings:   []Binding{{"a", "n1"}, {"b", "n1"}, {"b", "n2"}},
		Placements: []Placement{{"api", "n1"}, {"web", "n1"}, {"web", "n2"}},
	}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("Normalize = %v", f)
	}
	empty := Normalize(Facts{})
	if empty.Bindings == nil || empty.Placements == nil || !empty.Equal(Facts{Bindings: []Binding{}, Placements: []Placement{}}) {
		t.Fatalf("empty facts normalize to %#v", empty)
	}
	if f.Equal(empty) {
		t.Fatal("different facts compare equal")
	}
}
