// Package deploy_test holds the manifests a Flux user applies to what the
// services read and what the API server admits: the Kustomize base in this
// folder, its example overlay, the job templates and the Project Intent.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The folders a Flux Kustomization points at.
const (
	base    = "."
	overlay = "overlays/example"
)

// The services the base deploys, each a folder of its own.
var services = []string{"release-gate", "collector", "reporter", "release-record"}

// templates are the jobs' manifests, one file per job; none is part of the
// base.
var templates = []string{
	"vault-policy/job.yaml",
	"postgres-catalog/job.yaml",
	"garage-catalog/job.yaml",
	"backup/files.yaml",
	"backup/postgres.yaml",
	"backup/rabbitmq.yaml",
}

// build runs kustomize build over dir and returns the YAML stream.
func build(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return out
}

// objects is a decoded manifest stream.
type objects struct {
	all          []runtime.Object
	deployments  []*appsv1.Deployment
	jobs         []*batchv1.Job
	cronJobs     []*batchv1.CronJob
	services     []*corev1.Service
	accounts     []*corev1.ServiceAccount
	policies     []*networkingv1.NetworkPolicy
	clusterRoles []*rbacv1.ClusterRole
	clusterBinds []*rbacv1.ClusterRoleBinding
	roles        []*rbacv1.Role
	roleBinds    []*rbacv1.RoleBinding
	budgets      []*policyv1.PodDisruptionBudget
	configMaps   []*corev1.ConfigMap
	namespaces   []*corev1.Namespace
}

// file adds obj to the list of its kind; a kind no test reads is in all alone.
func (o *objects) file(obj runtime.Object) {
	for _, add := range []func(runtime.Object) bool{
		adder(&o.deployments), adder(&o.jobs), adder(&o.cronJobs), adder(&o.services), adder(&o.accounts),
		adder(&o.policies), adder(&o.clusterRoles), adder(&o.clusterBinds), adder(&o.roles), adder(&o.roleBinds),
		adder(&o.budgets), adder(&o.configMaps), adder(&o.namespaces),
	} {
		if add(obj) {
			return
		}
	}
}

// adder adds an object of kind T to list, and says whether obj was one.
func adder[T runtime.Object](list *[]T) func(runtime.Object) bool {
	return func(obj runtime.Object) bool {
		v, ok := obj.(T)
		if ok {
			*list = append(*list, v)
		}
		return ok
	}
}

var decoder = serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decode reads every document of a YAML stream as the typed object of its
// kind; a field the kind does not have fails the test.
func decode(t *testing.T, what string, stream []byte) objects {
	t.Helper()
	var o objects
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		o.all = append(o.all, obj)
		o.file(obj)
	}
	return o
}

// stripComments drops whole-line comments, so a document of comments alone
// reads as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// readTemplate reads one job template.
func readTemplate(t *testing.T, file string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// builds are the base and the overlay, built and decoded once per test.
func builds(t *testing.T) map[string]objects {
	t.Helper()
	return map[string]objects{base: decode(t, "the base", build(t, base)), overlay: decode(t, "the overlay", build(t, overlay))}
}

// workload is one pod template and what runs it.
type workload struct {
	kind, namespace, name string
	labels                map[string]string
	pod                   corev1.PodSpec
}

func (w workload) String() string { return fmt.Sprintf("%s %s/%s", w.kind, w.namespace, w.name) }

// workloads are every Deployment's, Job's and CronJob's pod template.
func (o objects) workloads() []workload {
	var ws []workload
	for _, d := range o.deployments {
		ws = append(ws, workload{"Deployment", d.Namespace, d.Name, d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	for _, j := range o.jobs {
		ws = append(ws, workload{"Job", j.Namespace, j.Name, j.Spec.Template.Labels, j.Spec.Template.Spec})
	}
	for _, c := range o.cronJobs {
		ws = append(ws, workload{"CronJob", c.Namespace, c.Name, c.Spec.JobTemplate.Spec.Template.Labels, c.Spec.JobTemplate.Spec.Template.Spec})
	}
	return ws
}

func (o objects) pdb(t *testing.T, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	for _, b := range o.budgets {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no PodDisruptionBudget %s", name)
	return nil
}

func (o objects) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range o.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// TestBaseAndOverlayBuild builds the base and the example overlay with
// Kustomize, as Flux's kustomize-controller does, and holds each to what it
// must hold: every service's ServiceAccount, grant, Deployment, Service and
// NetworkPolicy, the rbac.yaml files as they are, and in the overlay the
// pinned images and the patched variables.
func TestBaseAndOverlayBuild(t *testing.T) {
	for dir, o := range builds(t) {
		for _, s := range services {
			if !slices.ContainsFunc(o.accounts, func(a *corev1.ServiceAccount) bool { return a.Name == s }) {
				t.Errorf("%s: no ServiceAccount %s", dir, s)
			}
			if !slices.ContainsFunc(o.clusterRoles, func(r *rbacv1.ClusterRole) bool { return r.Name == "delivery-system-"+s }) {
				t.Errorf("%s: no ClusterRole delivery-system-%s", dir, s)
			}
			if !slices.ContainsFunc(o.services, func(v *corev1.Service) bool { return v.Name == s }) {
				t.Errorf("%s: no Service %s", dir, s)
			}
			if !slices.ContainsFunc(o.policies, func(p *networkingv1.NetworkPolicy) bool { return p.Name == s }) {
				t.Errorf("%s: no NetworkPolicy %s", dir, s)
			}
			o.deployment(t, s)
		}
		// The sweep runs beside the records, in the base (sweep_test.go);
		// every other job is a template.
		if len(o.jobs) != 0 || slices.ContainsFunc(o.cronJobs, func(c *batchv1.CronJob) bool { return c.Name != sweep }) {
			t.Errorf("%s holds a job: the jobs are templates, run beside what they apply", dir)
		}
	}

	// The grants are included as the files hold them, so the services run
	// under exactly what their tests ran under.
	o := decode(t, "the base", build(t, base))
	for _, s := range services {
		rbac := decode(t, s+"/rbac.yaml", readTemplate(t, s+"/rbac.yaml"))
		for _, want := range rbac.all {
			if !slices.ContainsFunc(o.all, func(got runtime.Object) bool { return equalObjects(t, got, want) }) {
				t.Errorf("the base changed or lacks %s of %s/rbac.yaml", describe(want), s)
			}
		}
	}

	ov := decode(t, "the overlay", build(t, overlay))
	var baseObjects, overlayObjects []string
	for _, obj := range o.all {
		baseObjects = append(baseObjects, describe(obj)+" "+namespaceOf(obj))
	}
	for _, obj := range ov.all {
		overlayObjects = append(overlayObjects, describe(obj)+" "+namespaceOf(obj))
	}
	if !sameSet(baseObjects, overlayObjects) {
		t.Errorf("the overlay holds %v, the base %v: an overlay names every folder of the base", sorted(overlayObjects), sorted(baseObjects))
	}
	for _, d := range ov.deployments {
		image := d.Spec.Template.Spec.Containers[0].Image
		if !strings.Contains(image, ":v") {
			t.Errorf("the overlay leaves %s's image %s unpinned", d.Name, image)
		}
	}
	if image := ov.deployment(t, "release-gate").Spec.Template.Spec.Containers[0].Image; !strings.Contains(image, "@sha256:") {
		t.Errorf("the overlay's release-gate image %s carries no digest", image)
	}
	collector := env(ov.deployment(t, "collector").Spec.Template.Spec.Containers[0])
	if collector["ESTATE_REPOSITORY"].Value != "example-org/estate" {
		t.Errorf("the overlay's collector: ESTATE_REPOSITORY %q", collector["ESTATE_REPOSITORY"].Value)
	}
	if len(collector) != len(env(o.deployment(t, "collector").Spec.Template.Spec.Containers[0])) {
		t.Error("the overlay's patch added or dropped a variable of the collector instead of changing one")
	}
	if cm := ov.clusterConfig(t); cm.Data["CLUSTER_NAME"] != "staging" || cm.Data["ENVIRONMENT"] != "staging" {
		t.Errorf("the overlay's cluster ConfigMap %s says %v, want staging and staging", cm.Name, cm.Data)
	}
	for _, obj := range ov.all {
		if ns := namespaceOf(obj); ns != "" && ns != "delivery-system" {
			t.Errorf("the overlay puts %s in %s", describe(obj), ns)
		}
	}
}

// env is a container's variables by name.
func env(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func namespaceOf(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetNamespace() string }); ok {
		return m.GetNamespace()
	}
	return ""
}

func describe(obj runtime.Object) string {
	kind := fmt.Sprintf("%T", obj)
	if m, ok := obj.(interface{ GetName() string }); ok {
		name := m.GetName()
		// The generated cluster ConfigMap's name ends in a hash of its values,
		// which an overlay changes.
		if _, ok := obj.(*corev1.ConfigMap); ok && strings.HasPrefix(name, clusterConfigName+"-") {
			name = clusterConfigName
		}
		return strings.TrimPrefix(kind, "*") + " " + name
	}
	return kind
}

// equalObjects compares two decoded objects as their canonical JSON.
func equalObjects(t *testing.T, a, b runtime.Object) bool {
	t.Helper()
	ja, err := runtime.Encode(canonicalJSON, a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := runtime.Encode(canonicalJSON, b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

var canonicalJSON = serializer.NewCodecFactory(clientgoscheme.Scheme).LegacyCodec(
	appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion, corev1.SchemeGroupVersion,
	networkingv1.SchemeGroupVersion, rbacv1.SchemeGroupVersion, policyv1.SchemeGroupVersion)
