package deploy_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// sweep names the release record's sweep: its CronJob, ServiceAccount,
// Role and NetworkPolicy, and its folder.
const sweep = "release-record-sweep"

func (o objects) cronJob(t *testing.T, name string) *batchv1.CronJob {
	t.Helper()
	for _, c := range o.cronJobs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no CronJob %s", name)
	return nil
}

// TestSweepRunsEveryTenMinutes holds the sweep's CronJob to its guide: every
// ten minutes, never two at once, a run ended before the next is due, the
// release record's image with the one argument sweep, under its own
// ServiceAccount, the records' namespace where its Role is.
func TestSweepRunsEveryTenMinutes(t *testing.T) {
	for set, o := range builds(t) {
		c := o.cronJob(t, sweep)
		if c.Spec.Schedule != "*/10 * * * *" {
			t.Errorf("%s: the sweep runs at %q, not every ten minutes", set, c.Spec.Schedule)
		}
		if c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: two sweeps may run at once (%q)", set, c.Spec.ConcurrencyPolicy)
		}
		job := c.Spec.JobTemplate.Spec
		if d := job.ActiveDeadlineSeconds; d == nil || *d >= 600 {
			t.Errorf("%s: a stuck sweep may outlive its interval (activeDeadlineSeconds %v)", set, d)
		}
		pod := job.Template.Spec
		if pod.ServiceAccountName != sweep || !slices.ContainsFunc(o.accounts, func(a *corev1.ServiceAccount) bool {
			return a.Name == sweep && a.Namespace == c.Namespace
		}) {
			t.Errorf("%s: the sweep runs as %q, not its own ServiceAccount in %s", set, pod.ServiceAccountName, c.Namespace)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: the sweep runs %d containers, not one", set, len(pod.Containers))
		}
		ctr := pod.Containers[0]
		if imageName(ctr.Image) != "release-record" || !slices.Equal(ctr.Args, []string{"sweep"}) || len(ctr.Command) != 0 {
			t.Errorf("%s: the sweep runs %s %v %v, not the release record's image with the argument sweep", set, ctr.Image, ctr.Command, ctr.Args)
		}
		if set == overlay && !strings.Contains(ctr.Image, ":v") {
			t.Errorf("the overlay leaves the sweep's image %s unpinned", ctr.Image)
		}
		records := env(ctr)["RECORD_NAMESPACE"].Value
		if !slices.ContainsFunc(o.roles, func(r *rbacv1.Role) bool { return r.Name == sweep && r.Namespace == records }) ||
			!slices.ContainsFunc(o.roleBinds, func(b *rbacv1.RoleBinding) bool { return b.Name == sweep && b.Namespace == records }) {
			t.Errorf("%s: the sweep's Role and RoleBinding are not in its RECORD_NAMESPACE %q", set, records)
		}
	}
}

// TestSweepHasItsLeastGrant holds the sweep's grant to what it does: list,
// patch (the stall label) and delete ConfigMaps, create Events, in the
// records' namespace alone; nothing cluster-wide, and the base carries
// rbac.yaml as the tests ran under it.
func TestSweepHasItsLeastGrant(t *testing.T) {
	rbac := decode(t, sweep+"/rbac.yaml", readTemplate(t, sweep+"/rbac.yaml"))
	var rules []string
	for _, r := range rbac.roles {
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				rules = append(rules, strings.Join(rule.APIGroups, ",")+"/"+res+": "+strings.Join(sorted(rule.Verbs), ","))
			}
			if len(rule.ResourceNames) != 0 || len(rule.NonResourceURLs) != 0 {
				t.Errorf("a rule this test does not read: %+v", rule)
			}
		}
	}
	if want := []string{"/configmaps: delete,list,patch", "/events: create"}; !slices.Equal(sorted(rules), want) || len(rbac.roles) != 1 {
		t.Errorf("the sweep's grant is %v, not %v", rules, want)
	}
	if len(rbac.clusterRoles)+len(rbac.clusterBinds) != 0 {
		t.Error("the sweep is granted something cluster-wide")
	}
	o := decode(t, "the base", build(t, base))
	for _, want := range rbac.all {
		if !slices.ContainsFunc(o.all, func(got runtime.Object) bool { return equalObjects(t, got, want) }) {
			t.Errorf("the base changed or lacks %s of %s/rbac.yaml", describe(want), sweep)
		}
	}
	for _, b := range o.clusterBinds {
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sweep {
				t.Errorf("ClusterRoleBinding %s grants the sweep something cluster-wide", b.Name)
			}
		}
	}
}

// TestSweepReachesTheAPIServerAlone: one NetworkPolicy selects the sweep's
// pods, admits no one, and lets it reach the cluster's DNS and the API
// server, nothing else.
func TestSweepReachesTheAPIServerAlone(t *testing.T) {
	for set, o := range builds(t) {
		c := o.cronJob(t, sweep)
		var found []*networkingv1.NetworkPolicy
		for _, p := range o.policies {
			sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if p.Namespace == c.Namespace && sel.Matches(labels.Set(c.Spec.JobTemplate.Spec.Template.Labels)) {
				found = append(found, p)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s: %d NetworkPolicies select the sweep's pods, not one", set, len(found))
		}
		p := found[0]
		if !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("%s: NetworkPolicy %s does not hold both ingress and egress", set, p.Name)
		}
		if len(p.Spec.Ingress) != 0 {
			t.Errorf("%s: NetworkPolicy %s admits callers; no one calls the sweep", set, p.Name)
		}
		want := []string{"kube-system k8s-app=kube-dns 53/UDP", "kube-system k8s-app=kube-dns 53/TCP",
			"ipBlock 0.0.0.0/0 443/TCP", "ipBlock 0.0.0.0/0 6443/TCP", "ipBlock ::/0 443/TCP", "ipBlock ::/0 6443/TCP"}
		if got := egressPeers(t, p); !sameSet(got, want) {
			t.Errorf("%s: the sweep may reach %v, not the DNS and the API server alone (%v)", set, got, want)
		}
	}
}
