package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// The record keepers: the ServiceAccounts that write records.
const (
	gateAccount   = "release-gate"
	recordAccount = "release-record"
	sweepAccount  = "release-record-sweep"
)

// guardOf is the base's record guard, its policy and its binding.
func guardOf(t *testing.T) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var policy *admissionv1.ValidatingAdmissionPolicy
	var binding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, obj := range decode(t, "the base", build(t, base)).all {
		switch v := obj.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			policy = v
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			binding = v
		}
	}
	if policy == nil || binding == nil || binding.Spec.PolicyName != policy.Name {
		t.Fatal("the base holds no record guard: a ValidatingAdmissionPolicy and its binding")
	}
	return policy, binding
}

// TestRecordKeepersWriteOnlyTheirOwn installs the base's record guard on a
// real API server, scoped to a namespace of the test's own so the package's
// other tests write as they please, with the gate's, the release record's
// and the sweep's grants in that namespace, and has each ServiceAccount
// write: each creates, changes and deletes (as its grant allows) its own
// records, and the guard refuses every write to the other's, under either
// name or either label, and to any other ConfigMap; an administrator is not
// looked at.
func TestRecordKeepersWriteOnlyTheirOwn(t *testing.T) {
	cp := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	as := map[string]kubernetes.Interface{}
	for account, file := range map[string]string{gateAccount: "release-gate/rbac.yaml", recordAccount: "release-record/rbac.yaml",
		sweepAccount: "release-record-sweep/rbac.yaml"} {
		cfg := cp.Grant(t, file, ns, account, "delivery-system", ns)
		testenv.WaitForGrant(t, cfg, ns)
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		as[account] = kube
	}
	as["admin"] = cp.Kube

	policy, binding := guardOf(t)
	policy.Name, binding.Name, binding.Spec.PolicyName = ns, ns, ns
	binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
	admission := cp.Kube.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})

	// The names and labels the services write their records under.
	gateRecord, recordRecord := release.RecordConfigMap(ns, "auth"), rr.RecordName("docs@2.1.0:prod-eu/prod")
	gateLabels := map[string]string{release.LabelManagedBy: "release-gate"}
	recordLabels := rr.Record{App: "docs", Env: "prod", Cluster: "prod-eu"}.Labels()
	configMap := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: map[string]string{"k": "v"}}
	}
	create := func(account, name string, labels map[string]string) error {
		_, err := as[account].CoreV1().ConfigMaps(ns).Create(ctx, configMap(name, labels), metav1.CreateOptions{})
		return err
	}
	update := func(account, name string, labels map[string]string) error {
		cm, err := cp.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Labels, cm.Data = labels, map[string]string{"k": account}
		_, err = as[account].CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
	patch := func(account, name string) error {
		_, err := as[account].CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"swept":"yes"}}}`), metav1.PatchOptions{})
		return err
	}
	remove := func(account, name string) error {
		return as[account].CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}

	// The guard takes a moment to load: until it refuses the gate a
	// record of the release record's, nothing below would be tested.
	wait.Poll{Every: 100 * time.Millisecond}.Until(t, "the guard refusing the gate a record of the release record's", func() (bool, string) {
		err := create(gateAccount, "release-"+strings.Repeat("ab", 16), recordLabels)
		if err == nil {
			_ = remove("admin", "release-"+strings.Repeat("ab", 16))
		}
		return denied(err), fmt.Sprint(err)
	})

	for _, c := range []struct {
		what    string
		write   func() error
		allowed bool
	}{
		{"the gate creates its record", func() error { return create(gateAccount, gateRecord, gateLabels) }, true},
		{"the release record creates its record", func() error { return create(recordAccount, recordRecord, recordLabels) }, true},
		{"the gate changes its record", func() error { return update(gateAccount, gateRecord, gateLabels) }, true},
		{"the release record changes its record", func() error { return update(recordAccount, recordRecord, recordLabels) }, true},
		{"the sweep patches a record", func() error { return patch(sweepAccount, recordRecord) }, true},

		{"the gate changes the release record's record", func() error { return update(gateAccount, recordRecord, recordLabels) }, false},
		{"the gate takes the release record's record over", func() error { return update(gateAccount, recordRecord, gateLabels) }, false},
		{"the gate creates under the release record's name", func() error { return create(gateAccount, "release-"+strings.Repeat("cd", 16), gateLabels) }, false},
		{"the gate creates under the release record's label", func() error { return create(gateAccount, ns+".web-release-record", recordLabels) }, false},
		{"the gate creates another ConfigMap", func() error { return create(gateAccount, "settings", nil) }, false},
		{"the release record changes the gate's record", func() error { return update(recordAccount, gateRecord, gateLabels) }, false},
		{"the release record takes the gate's record over", func() error { return update(recordAccount, gateRecord, recordLabels) }, false},
		{"the release record creates under the gate's name", func() error { return create(recordAccount, ns+".web-release-record", recordLabels) }, false},
		{"the release record creates under the gate's label", func() error { return create(recordAccount, "release-"+strings.Repeat("ef", 16), gateLabels) }, false},
		{"the release record creates another ConfigMap", func() error { return create(recordAccount, "settings", recordLabels) }, false},
		{"the sweep patches the gate's record", func() error { return patch(sweepAccount, gateRecord) }, false},
		{"the sweep deletes the gate's record", func() error { return remove(sweepAccount, gateRecord) }, false},

		{"the sweep deletes a record", func() error { return remove(sweepAccount, recordRecord) }, true},
		{"an administrator writes anything", func() error { return create("admin", "settings", nil) }, true},
		{"an administrator deletes the gate's record", func() error { return remove("admin", gateRecord) }, true},
	} {
		err := c.write()
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: refused: %v", c.what, err)
		case !c.allowed && !denied(err):
			t.Errorf("%s: not refused by the guard (%v)", c.what, err)
		}
	}
}

// denied says whether err is the record guard's refusal, not RBAC's or
// another.
func denied(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "denied request")
}
