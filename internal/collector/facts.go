package collector

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/clusterstate"
)

// Labels deploy-kit puts on every object it renders.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelName      = "app.kubernetes.io/name"
	ManagedBy      = "deploy-kit"
	// hostnameKey is the node label a local volume's node affinity pins it by.
	hostnameKey = "kubernetes.io/hostname"
)

// Binding says a bound claim's volume can be mounted on one node alone: an
// item of the snapshot's bindings, its fields the type generated from
// deploy-kit's schema (a type of this package, so it is written as a plain
// pair of strings like Placement).
type Binding clusterstate.ClusterStateBindingsElem

// Placement says a deploy-kit process has a pod scheduled to a node. It is
// not the generated item, whose fields go-jsonschema orders by name (node
// before process): the facts are ordered and compared process first, and the
// snapshot writes process first.
type Placement struct {
	Process string `json:"process" yaml:"process"`
	Node    string `json:"node" yaml:"node"`
}

// Facts are what one capture found, ordered and free of duplicates once
// passed through Normalize.
type Facts struct {
	Bindings   []Binding
	Placements []Placement
}

// Volume is what a capture keeps of a PersistentVolume.
type Volume struct {
	Name string
	// ClaimUID, ClaimNamespace and ClaimName name the claim it is bound to, if any.
	ClaimUID                  string
	ClaimNamespace, ClaimName string
	// Node is the one node it can be mounted on; empty when any of several can.
	Node string
}

// Claim is what a capture keeps of a PersistentVolumeClaim.
type Claim struct {
	UID, Namespace, Name string
	// Volume is the volume it is bound to; empty unless it is Bound.
	Volume string
}

// VolumeOf keeps what a binding needs of pv.
func VolumeOf(pv *corev1.PersistentVolume) Volume {
	v := Volume{Name: pv.Name, Node: OnlyNode(pv.Spec.NodeAffinity)}
	if ref := pv.Spec.ClaimRef; ref != nil {
		v.ClaimUID, v.ClaimNamespace, v.ClaimName = string(ref.UID), ref.Namespace, ref.Name
	}
	return v
}

// ClaimOf keeps what a binding needs of pvc; a claim not Bound keeps no volume.
func ClaimOf(pvc *corev1.PersistentVolumeClaim) Claim {
	c := Claim{UID: string(pvc.UID), Namespace: pvc.Namespace, Name: pvc.Name}
	if pvc.Status.Phase == corev1.ClaimBound {
		c.Volume = pvc.Spec.VolumeName
	}
	return c
}

// OnlyNode is the single node a volume's required node affinity allows under
// kubernetes.io/hostname, or "" when it allows any node or several. Terms are
// ORed, so every term must name nodes by hostname with In and all of them
// together exactly one node; a term that does not constrain the hostname lets
// any node mount the volume.
func OnlyNode(affinity *corev1.VolumeNodeAffinity) string {
	if affinity == nil || affinity.Required == nil || len(affinity.Required.NodeSelectorTerms) == 0 {
		return ""
	}
	node := ""
	for _, term := range affinity.Required.NodeSelectorTerms {
		allowed, constrained := hostnamesOf(term)
		if !constrained || len(allowed) != 1 {
			return ""
		}
		if node != "" && node != allowed[0] {
			return ""
		}
		node = allowed[0]
	}
	return node
}

// hostnamesOf is the set of hostnames a term allows, and whether it limits
// hostnames to a list at all. Several In expressions on the hostname in one
// term are ANDed: their intersection.
func hostnamesOf(term corev1.NodeSelectorTerm) ([]string, bool) {
	var allowed []string
	constrained := false
	for _, expr := range term.MatchExpressions {
		if expr.Key != hostnameKey || expr.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		values := slices.Clone(expr.Values)
		slices.Sort(values)
		values = slices.Compact(values)
		if !constrained {
			allowed, constrained = values, true
			continue
		}
		allowed = slices.DeleteFunc(allowed, func(n string) bool { return !slices.Contains(values, n) })
	}
	return allowed, constrained
}

// BindingsOf joins bound claims with their volumes: a claim bound to a volume
// that names it back and that one node alone can mount binds to that node.
func BindingsOf(volumes []Volume, claims []Claim) []Binding {
	byName := make(map[string]Volume, len(volumes))
	for _, v := range volumes {
		byName[v.Name] = v
	}
	var out []Binding
	for _, c := range claims {
		if c.Volume == "" {
			continue
		}
		v, ok := byName[c.Volume]
		if !ok || v.Node == "" || !v.boundTo(c) {
			continue
		}
		out = append(out, Binding{Claim: c.Name, Node: v.Node})
	}
	return out
}

// boundTo checks the volume's claimRef names c, by uid when it carries one.
func (v Volume) boundTo(c Claim) bool {
	if v.ClaimNamespace != c.Namespace || v.ClaimName != c.Name {
		return false
	}
	return v.ClaimUID == "" || v.ClaimUID == c.UID
}

// PlacementOf is the placement a pod records: a deploy-kit pod with a name,
// scheduled to a node and not finished.
func PlacementOf(pod *corev1.Pod) (Placement, bool) {
	process := pod.Labels[LabelName]
	if pod.Labels[LabelManagedBy] != ManagedBy || process == "" || pod.Spec.NodeName == "" {
		return Placement{}, false
	}
	if phase := pod.Status.Phase; phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		return Placement{}, false
	}
	return Placement{Process: process, Node: pod.Spec.NodeName}, true
}

// Normalize orders the facts (bindings by claim then node, placements by
// process then node) and drops duplicates, so equal facts compare equal and
// encode to the same bytes.
func Normalize(f Facts) Facts {
	b := slices.Clone(f.Bindings)
	slices.SortFunc(b, func(x, y Binding) int { return cmp.Or(cmp.Compare(x.Claim, y.Claim), cmp.Compare(x.Node, y.Node)) })
	p := slices.Clone(f.Placements)
	slices.SortFunc(p, func(x, y Placement) int {
		return cmp.Or(cmp.Compare(x.Process, y.Process), cmp.Compare(x.Node, y.Node))
	})
	if b == nil {
		b = []Binding{}
	}
	if p == nil {
		p = []Placement{}
	}
	return Facts{Bindings: slices.Compact(b), Placements: slices.Compact(p)}
}

// Equal reports whether two normalized fact sets are the same.
func (f Facts) Equal(g Facts) bool {
	return slices.Equal(f.Bindings, g.Bindings) && slices.Equal(f.Placements, g.Placements)
}
