package releasegate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// ErrConflict is a write refused because the object changed since it was
// read: a Job put in place of the one read, or a record written meanwhile.
var ErrConflict = errors.New("changed since read")

// InputsObject is one inputs ConfigMap found by the round's list.
type InputsObject struct {
	Namespace   string
	Application string
	release.ConfigMap
}

// StoredRecord is a record ConfigMap in the gate's namespace.
type StoredRecord struct {
	Name            string
	ResourceVersion string
	Data            map[string]string
}

// CanaryState is a Canary found by a cluster-wide list.
type CanaryState struct {
	Namespace string
	release.Canary
	Transitioned time.Time
}

// NamespacedDeployment is a Deployment found by a cluster-wide list.
type NamespacedDeployment struct {
	Namespace string
	release.Deployment
}

// ReconcileCluster is what a round reads and writes. Each read lists one kind
// across the cluster, so a round costs a few lists, not a read per
// Application; the writes are the records and the suspend field of the Jobs
// the gate starts.
type ReconcileCluster interface {
	// GatedInputs lists every ConfigMap named <application>-release-gate
	// labelled as the render labels it, in every namespace.
	GatedInputs(ctx context.Context) ([]InputsObject, error)
	// Records lists the ConfigMaps of the gate's namespace.
	Records(ctx context.Context, namespace string) ([]StoredRecord, error)
	// Canaries lists the Canaries labelled part of an Application.
	Canaries(ctx context.Context) ([]CanaryState, error)
	// Deployments lists every Deployment, primaries included.
	Deployments(ctx context.Context) ([]NamespacedDeployment, error)
	// ConfigMapsIn lists the ConfigMaps of namespace.
	ConfigMapsIn(ctx context.Context, namespace string) ([]release.ConfigMap, error)
	// MigrationJobs lists the Jobs the render wrote.
	MigrationJobs(ctx context.Context) ([]MigrationJob, error)
	// Pods lists the pods of namespace that selector matches.
	Pods(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error)
	// CreateRecord creates a record; ErrConflict when one is there.
	CreateRecord(ctx context.Context, namespace, name string, data map[string]string) error
	// UpdateRecord writes a record over the version read; ErrConflict when
	// it changed since.
	UpdateRecord(ctx context.Context, namespace, name, resourceVersion string, data map[string]string) error
	// StartJob unsuspends the Job read at j's version; ErrConflict when the
	// Job there is no longer that one.
	StartJob(ctx context.Context, j JobStart) error
}

// snapshot is one round's lists, joined in memory by namespace and name.
type snapshot struct {
	inputs      []InputsObject
	records     map[string]StoredRecord
	canaries    map[[2]string]CanaryState
	deployments map[[2]string]release.Deployment
	// configs are the ConfigMaps of the namespaces whose Deployments a
	// round compares, by namespace and name.
	configs map[string]map[string]release.ConfigMap
	jobs    map[[2]string][]MigrationJob
	// pods are the pods of the namespaces an undo counted new copies in
	// this round, listed once per namespace.
	pods map[string][]release.Pod
}

// read lists what every round needs, the lists side by side; Deployments
// are listed later, only when needed.
func read(ctx context.Context, c ReconcileCluster, namespace string, withJobs bool) (*snapshot, error) {
	inputs := async(func() ([]InputsObject, error) { return c.GatedInputs(ctx) })
	records := async(func() ([]StoredRecord, error) { return c.Records(ctx, namespace) })
	canaries := async(func() ([]CanaryState, error) { return c.Canaries(ctx) })
	jobs := async(func() ([]MigrationJob, error) {
		if !withJobs {
			return nil, nil
		}
		return c.MigrationJobs(ctx)
	})
	s := &snapshot{
		records: map[string]StoredRecord{}, canaries: map[[2]string]CanaryState{},
		deployments: map[[2]string]release.Deployment{}, configs: map[string]map[string]release.ConfigMap{}, pods: map[string][]release.Pod{},
		jobs: map[[2]string][]MigrationJob{},
	}
	var err error
	if s.inputs, err = inputs.get(); err != nil {
		return nil, fmt.Errorf("list the inputs ConfigMaps: %w", err)
	}
	rs, err := records.get()
	if err != nil {
		return nil, fmt.Errorf("list the records in %s: %w", namespace, err)
	}
	for _, r := range rs {
		s.records[r.Name] = r
	}
	cs, err := canaries.get()
	if err != nil {
		return nil, fmt.Errorf("list the Canaries: %w", err)
	}
	for _, c := range cs {
		s.canaries[[2]string{c.Namespace, c.Name}] = c
	}
	js, err := jobs.get()
	if err != nil {
		return nil, fmt.Errorf("list the Jobs: %w", err)
	}
	for _, j := range js {
		k := [2]string{j.Namespace, j.Application}
		s.jobs[k] = append(s.jobs[k], j)
	}
	slices.SortFunc(s.inputs, func(a, b InputsObject) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Application, b.Application))
	})
	return s, nil
}

// listsAtOnce bounds the namespaces' lists (ConfigMaps, pods) a round makes
// side by side.
const listsAtOnce = 8

// perNamespace runs list for each namespace, a few side by side, and
// returns what each list got and why each that failed did.
func perNamespace[T any](namespaces []string, list func(namespace string) (T, error)) (map[string]T, map[string]error) {
	var mu sync.Mutex
	got, failed := map[string]T{}, map[string]error{}
	slots := make(chan struct{}, listsAtOnce)
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			v, err := list(ns)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[ns] = err
				return
			}
			got[ns] = v
		})
	}
	wg.Wait()
	return got, failed
}

// readDeployments lists every Deployment into the snapshot.
func (s *snapshot) readDeployments(ctx context.Context, c ReconcileCluster) error {
	ds, err := c.Deployments(ctx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		s.deployments[[2]string{d.Namespace, d.Name}] = d.Deployment
	}
	return nil
}

// readConfigs lists the ConfigMaps of each namespace, a few side by side,
// into the snapshot, and returns the lists that failed.
func (s *snapshot) readConfigs(ctx context.Context, c ReconcileCluster, namespaces []string) map[string]error {
	got, failed := perNamespace(namespaces, func(ns string) ([]release.ConfigMap, error) { return c.ConfigMapsIn(ctx, ns) })
	for ns, cms := range got {
		s.configs[ns] = release.ConfigsByName(cms)
	}
	unread := make(map[string]error, len(failed))
	for ns, err := range failed {
		unread[ns] = fmt.Errorf("list the ConfigMaps of %s: %w", ns, err)
	}
	return unread
}

// readPods lists the pods of each namespace not listed yet this round, a
// few side by side, into the snapshot, and returns the lists that failed.
// No label narrows a list: a pod of a new copy without the part-of label
// would go uncounted, and an undo must not run while a new copy has a pod.
func (s *snapshot) readPods(ctx context.Context, c ReconcileCluster, namespaces []string) map[string]error {
	var unlisted []string
	for _, ns := range namespaces {
		if _, listed := s.pods[ns]; !listed {
			unlisted = append(unlisted, ns)
		}
	}
	got, failed := perNamespace(unlisted, func(ns string) ([]release.Pod, error) { return c.Pods(ctx, ns, labels.Everything()) })
	for ns, pods := range got {
		s.pods[ns] = pods
	}
	return failed
}

// countNewCopies counts each member's new copy among the pods the snapshot
// holds of its namespace, by its Deployment's selector.
func (s *snapshot) countNewCopies(v *ApplicationView) error {
	pods := s.pods[v.Namespace]
	v.NewCopyPods = map[string]int{}
	for _, m := range v.Members {
		if m.Target == nil {
			return fmt.Errorf("member %s has no Deployment to find its new copy by", m.Process)
		}
		v.NewCopyPods[m.Process] = len(selectPods(pods, m.Target.Selector))
	}
	return nil
}

// view joins what the snapshot holds of one Application.
func (s *snapshot) view(namespace string, o InputsObject, now time.Time) ApplicationView {
	v := ApplicationView{Namespace: o.Namespace, Application: o.Application, Now: now}
	v.Inputs, v.InputsErr = release.CheckInputs(o.Application, o.ConfigMap)
	if stored, ok := s.records[release.RecordConfigMap(o.Namespace, o.Application)]; ok {
		r, err := release.DecodeRecord(o.Namespace, o.Application, stored.Data)
		if err != nil {
			v.RecordErr = fmt.Errorf("%s/%s: %w", namespace, stored.Name, err)
		} else {
			v.Record = &r
		}
	}
	if v.Inputs == nil {
		return v
	}
	for _, m := range v.Inputs.Members {
		mv := MemberView{MemberState: release.MemberState{Process: m.Process}}
		if c, ok := s.canaries[[2]string{o.Namespace, m.Process}]; ok {
			mv.Canary, mv.HasCanary, mv.Transitioned = c.Canary, true, c.Transitioned
		}
		if d, ok := s.deployments[[2]string{o.Namespace, m.Process}]; ok {
			mv.Target = &d
		}
		if d, ok := s.deployments[[2]string{o.Namespace, m.Process + release.PrimarySuffix}]; ok {
			mv.Primary = &d
		}
		if configs, ok := s.configs[o.Namespace]; ok && mv.Target != nil && mv.Primary != nil {
			mv.MovedConfigs = release.MovedConfigs(*mv.Target, *mv.Primary, configs)
		}
		v.Members = append(v.Members, mv)
	}
	v.Jobs = s.jobs[[2]string{o.Namespace, o.Application}]
	return v
}

func (t *Reconciler) writeRecord(ctx context.Context, s *snapshot, v ApplicationView, p Plan) error {
	name := release.RecordConfigMap(v.Namespace, v.Application)
	data := release.EncodeRecord(p.Record)
	var err error
	if p.Create {
		err = t.cluster.CreateRecord(ctx, t.namespace, name, data)
	} else {
		err = t.cluster.UpdateRecord(ctx, t.namespace, name, s.records[name].ResourceVersion, data)
	}
	if err != nil {
		return fmt.Errorf("write record %s/%s: %w", t.namespace, name, err)
	}
	return nil
}

var _ ReconcileCluster = (*Kube)(nil)

// listPage is how many objects one list request returns; a round pages
// through more. It is large because the API server's cost is in encoding
// the objects, not in the page count, and every page is one more round trip
// within the round.
const listPage = 2000

// Selectors of the round's lists: the render's fixed labels, so the API
// server filters and the gate reads only what the render wrote.
var (
	renderedSelector = release.LabelManagedBy + "=" + release.ManagedBy + "," + release.LabelPartOf
	partOfSelector   = release.LabelPartOf
)

// recordLabels mark a record ConfigMap as the gate's own.
var recordLabels = map[string]string{
	release.LabelName:      "release-record",
	release.LabelPartOf:    "release-gate",
	release.LabelManagedBy: "release-gate",
}

func conflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// pages runs list until the API server says there is no more.
func pages(ctx context.Context, list func(ctx context.Context, opts metav1.ListOptions) (string, error), selector string) error {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	for {
		next, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}

// GatedInputs lists the inputs ConfigMaps in every namespace.
func (k *Kube) GatedInputs(ctx context.Context) ([]InputsObject, error) {
	var out []InputsObject
	err := pages(ctx, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := k.Core.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			cm := &list.Items[i]
			app, ok := strings.CutSuffix(cm.Name, "-release-gate")
			if !ok || app == "" {
				continue
			}
			out = append(out, InputsObject{Namespace: cm.Namespace, Application: app, ConfigMap: release.ConfigMap{Labels: cm.Labels, Data: cm.Data}})
		}
		return list.Continue, nil
	}, renderedSelector)
	return out, err
}

// Records lists the ConfigMaps of the gate's namespace named as records.
func (k *Kube) Records(ctx context.Context, namespace string) ([]StoredRecord, error) {
	var out []StoredRecord
	err := pages(ctx, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := k.Core.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			cm := &list.Items[i]
			if strings.HasSuffix(cm.Name, release.RecordSuffix) {
				out = append(out, StoredRecord{Name: cm.Name, ResourceVersion: cm.ResourceVersion, Data: cm.Data})
			}
		}
		return list.Continue, nil
	}, "")
	return out, err
}

// Canaries lists the Canaries labelled part of an Application.
func (k *Kube) Canaries(ctx context.Context) ([]CanaryState, error) {
	var out []CanaryState
	err := pages(ctx, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := k.Flagger.FlaggerV1beta1().Canaries("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			c := &list.Items[i]
			out = append(out, CanaryState{Namespace: c.Namespace, Canary: releasepath.CanaryOf(c), Transitioned: releasepath.PhaseChangedAt(c)})
		}
		return list.Continue, nil
	}, partOfSelector)
	return out, err
}

// Deployments lists every Deployment. A primary carries none of its
// target's labels unless Flagger was started with -include-label-prefix, so
// no label finds both copies; the round picks them out by name.
func (k *Kube) Deployments(ctx context.Context) ([]NamespacedDeployment, error) {
	var out []NamespacedDeployment
	err := pages(ctx, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := k.Core.AppsV1().Deployments("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			d, err := releasepath.DeploymentOf(&list.Items[i])
			if err != nil {
				// One Deployment whose selector does not parse is left out;
				// the member it belongs to then reads as having none.
				continue
			}
			out = append(out, NamespacedDeployment{Namespace: list.Items[i].Namespace, Deployment: d})
		}
		return list.Continue, nil
	}, "")
	return out, err
}

// MigrationJobs lists the Jobs the render wrote, in every namespace.
func (k *Kube) MigrationJobs(ctx context.Context) ([]MigrationJob, error) {
	var out []MigrationJob
	err := pages(ctx, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		list, err := k.Core.BatchV1().Jobs("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			j := &list.Items[i]
			out = append(out, MigrationJob{
				Job: releasepath.JobOf(j), Namespace: j.Namespace,
				Application: j.Labels[release.LabelPartOf], ManagedBy: j.Labels[release.LabelManagedBy],
				ResourceVersion: j.ResourceVersion, UID: string(j.UID),
				Suspended: j.Spec.Suspend != nil && *j.Spec.Suspend,
			})
		}
		return list.Continue, nil
	}, renderedSelector)
	return out, err
}

// CreateRecord creates a record ConfigMap.
func (k *Kube) CreateRecord(ctx context.Context, namespace, name string, data map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: recordLabels},
		Data:       data,
	}
	_, err := k.Core.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	return conflict(err)
}

// UpdateRecord writes a record over the version read.
func (k *Kube) UpdateRecord(ctx context.Context, namespace, name, resourceVersion string, data map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: recordLabels, ResourceVersion: resourceVersion},
		Data:       data,
	}
	_, err := k.Core.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
	return conflict(err)
}

// startPatch unsuspends a Job. It names the uid and resourceVersion read, so
// the API server refuses it for a Job replaced or changed since.
type startPatch struct {
	Metadata struct {
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Suspend bool `json:"suspend"`
	} `json:"spec"`
}

// StartJob unsuspends the Job read at j's version.
func (k *Kube) StartJob(ctx context.Context, j JobStart) error {
	var p startPatch
	p.Metadata.UID, p.Metadata.ResourceVersion = j.UID, j.ResourceVersion
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = k.Core.BatchV1().Jobs(j.Namespace).Patch(ctx, j.Name, types.MergePatchType, body, metav1.PatchOptions{})
	return conflict(err)
}
