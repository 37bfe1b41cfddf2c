package deploy_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// namespaceLabel is the label the API server gives every namespace, its name.
const namespaceLabel = "kubernetes.io/metadata.name"

// peer is who a NetworkPolicy rule admits, as one string: the namespace
// ("*" for any) and the pods' selector ("*" for all).
type peer string

func peerOf(t *testing.T, policyNamespace string, p networkingv1.NetworkPolicyPeer) peer {
	t.Helper()
	if p.IPBlock != nil {
		return peer("ipBlock " + p.IPBlock.CIDR)
	}
	ns := policyNamespace
	if p.NamespaceSelector != nil {
		switch sel := p.NamespaceSelector; {
		case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0:
			ns = "*"
		case len(sel.MatchLabels) == 1 && sel.MatchLabels[namespaceLabel] != "" && len(sel.MatchExpressions) == 0:
			ns = sel.MatchLabels[namespaceLabel]
		default:
			t.Fatalf("a namespace selector other than by name: %v", sel)
		}
	}
	pods := "*"
	if p.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Empty() {
			pods = sel.String()
		}
	}
	return peer(ns + " " + pods)
}

// peerFor is the peer a service's own variables name: a namespace and a
// label selector.
func peerFor(t *testing.T, namespace, selector string) peer {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatalf("selector %q: %v", selector, err)
	}
	return peer(namespace + " " + sel.String())
}

// policyFor is the one NetworkPolicy that selects a Deployment's pods.
func policyFor(t *testing.T, o objects, d *appsv1.Deployment) *networkingv1.NetworkPolicy {
	t.Helper()
	var found []*networkingv1.NetworkPolicy
	for _, p := range o.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if p.Namespace == d.Namespace && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d NetworkPolicies select %s's pods, not one", len(found), d.Name)
	}
	p := found[0]
	if !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy %s does not hold both ingress and egress", p.Name)
	}
	return p
}

// value is what a variable of a container says, its pod's namespace for one
// taken from there.
func value(d *appsv1.Deployment, name string) string {
	e := env(d.Spec.Template.Spec.Containers[0])[name]
	if fieldRefNamespace(e) {
		return d.Namespace
	}
	return e.Value
}

// TestNetworkPoliciesAdmitTheGuidesCallers holds each service's
// NetworkPolicy to the callers its guide names, found by the same
// namespace and selector the services' own variables give: the gate admits
// Flagger's pods (FLAGGER_NAMESPACE, FLAGGER_SELECTOR), the metrics stack's
// (METRICS_SCRAPER_NAMESPACE, METRICS_SCRAPER_SELECTOR), the Reporter and
// a dashboard; the Reporter admits Flux's notification-controller in
// FLUX_NAMESPACE; the release record admits it too, Flagger's pods (its
// event webhook), the metrics stack (its own METRICS_SCRAPER_NAMESPACE,
// METRICS_SCRAPER_SELECTOR) and a dashboard; the Collector admits no one. Each admits on its served
// port alone, and reaches the cluster's DNS, the API server and what its
// guide says it calls.
func TestNetworkPoliciesAdmitTheGuidesCallers(t *testing.T) {
	for set, o := range builds(t) {
		gate, col, rep := o.deployment(t, "release-gate"), o.deployment(t, "collector"), o.deployment(t, "reporter")
		rec := o.deployment(t, "release-record")
		want := map[*appsv1.Deployment][]peer{
			gate: {
				peerFor(t, value(gate, "FLAGGER_NAMESPACE"), value(gate, "FLAGGER_SELECTOR")),
				peerFor(t, value(gate, "METRICS_SCRAPER_NAMESPACE"), value(gate, "METRICS_SCRAPER_SELECTOR")),
				peerFor(t, rep.Namespace, "app.kubernetes.io/instance="+rep.Spec.Template.Labels["app.kubernetes.io/instance"]),
				peerFor(t, "*", "delivery.jorisjonkers.dev/reads-releases=true"),
			},
			col: nil,
			rep: {peerFor(t, value(rep, "FLUX_NAMESPACE"), "app=notification-controller")},
			rec: {
				peerFor(t, value(rec, "FLUX_NAMESPACE"), "app=notification-controller"),
				peerFor(t, value(gate, "FLAGGER_NAMESPACE"), value(gate, "FLAGGER_SELECTOR")),
				peerFor(t, value(rec, "METRICS_SCRAPER_NAMESPACE"), value(rec, "METRICS_SCRAPER_SELECTOR")),
				peerFor(t, "*", "delivery.jorisjonkers.dev/reads-releases=true"),
			},
		}
		// The release record's /metrics answers the gate's callers.
		for _, name := range []string{"METRICS_SCRAPER_NAMESPACE", "METRICS_SCRAPER_SELECTOR", "METRICS_SCRAPER_SERVICE_ACCOUNT"} {
			if value(rec, name) != value(gate, name) {
				t.Errorf("%s: the release record's %s is %q, the gate's %q", set, name, value(rec, name), value(gate, name))
			}
		}
		for d, callers := range want {
			p := policyFor(t, o, d)
			c := d.Spec.Template.Spec.Containers[0]
			port := servedPort(t, c)
			var got []peer
			for _, rule := range p.Spec.Ingress {
				if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || resolvePort(t, c, *rule.Ports[0].Port) != port {
					t.Errorf("%s: NetworkPolicy %s admits on %v, not on %s's port %d alone", set, p.Name, rule.Ports, d.Name, port)
				}
				for _, from := range rule.From {
					got = append(got, peerOf(t, p.Namespace, from))
				}
			}
			if !sameSet(peerStrings(got), peerStrings(callers)) {
				t.Errorf("%s: NetworkPolicy %s admits %q, the guide's callers are %q", set, p.Name, got, callers)
			}
			egress := egressPeers(t, p)
			for _, need := range []string{"kube-system k8s-app=kube-dns 53/UDP", "ipBlock 0.0.0.0/0 443/TCP", "ipBlock 0.0.0.0/0 6443/TCP"} {
				if !slices.Contains(egress, need) {
					t.Errorf("%s: NetworkPolicy %s lets %s reach no %s", set, p.Name, d.Name, need)
				}
			}
		}
		gatePort := servedPort(t, gate.Spec.Template.Spec.Containers[0])
		toGate := fmt.Sprintf("%s app.kubernetes.io/instance=release-gate %d/TCP", gate.Namespace, gatePort)
		for _, d := range []*appsv1.Deployment{rep, rec} {
			if !slices.Contains(egressPeers(t, policyFor(t, o, d)), toGate) {
				t.Errorf("%s: %s may not reach the gate's /releases (%s)", set, d.Name, toGate)
			}
		}
		if !slices.Contains(egressPeers(t, policyFor(t, o, gate)), "* * any") {
			t.Errorf("%s: the gate may not reach the members' Canary services for its own traffic", set)
		}
	}
}

// egressPeers lists each destination a policy's egress admits with each of
// its ports, "any" for a rule that names none.
func egressPeers(t *testing.T, p *networkingv1.NetworkPolicy) []string {
	t.Helper()
	var out []string
	for _, rule := range p.Spec.Egress {
		for _, to := range rule.To {
			dest := string(peerOf(t, p.Namespace, to))
			if len(rule.Ports) == 0 {
				out = append(out, dest+" any")
			}
			for _, port := range rule.Ports {
				proto := corev1.ProtocolTCP
				if port.Protocol != nil {
					proto = *port.Protocol
				}
				out = append(out, fmt.Sprintf("%s %s/%s", dest, port.Port.String(), proto))
			}
		}
	}
	return out
}

func peerStrings(ps []peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// TestNamespacesAgree holds the objects that must share a namespace to it:
// each Deployment runs under a ServiceAccount of its own namespace, every
// binding names a ServiceAccount the build holds, the gate's records and
// Lease Roles live in its GATE_NAMESPACE and its Flagger pods' Role in its
// FLAGGER_NAMESPACE.
func TestNamespacesAgree(t *testing.T) {
	for set, o := range builds(t) {
		account := func(ns, name string) bool {
			return slices.ContainsFunc(o.accounts, func(a *corev1.ServiceAccount) bool { return a.Namespace == ns && a.Name == name })
		}
		for _, d := range o.deployments {
			if !account(d.Namespace, d.Spec.Template.Spec.ServiceAccountName) {
				t.Errorf("%s: %s runs as ServiceAccount %s, which %s lacks", set, d.Name, d.Spec.Template.Spec.ServiceAccountName, d.Namespace)
			}
		}
		for _, b := range o.clusterBinds {
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && !account(s.Namespace, s.Name) {
					t.Errorf("%s: ClusterRoleBinding %s binds %s/%s, which the build does not hold", set, b.Name, s.Namespace, s.Name)
				}
			}
		}
		for _, b := range o.roleBinds {
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && !account(s.Namespace, s.Name) {
					t.Errorf("%s: RoleBinding %s/%s binds %s/%s, which the build does not hold", set, b.Namespace, b.Name, s.Namespace, s.Name)
				}
			}
		}
		gate := o.deployment(t, "release-gate")
		for role, variable := range map[string]string{
			"release-gate-records":      "GATE_NAMESPACE",
			"release-gate-lease":        "GATE_NAMESPACE",
			"release-gate-flagger-pods": "FLAGGER_NAMESPACE",
		} {
			ns := value(gate, variable)
			for _, r := range o.roles {
				if r.Name == role && r.Namespace != ns {
					t.Errorf("%s: Role %s is in %s, the gate's %s is %s", set, role, r.Namespace, variable, ns)
				}
			}
			if !slices.ContainsFunc(o.roleBinds, func(b *rbacv1.RoleBinding) bool { return b.Name == role && b.Namespace == ns }) {
				t.Errorf("%s: no RoleBinding %s in the gate's %s, %s", set, role, variable, ns)
			}
		}
	}
}
