package releasepath

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Objects reads a namespace's objects as the release model's views (a
// Deployment, a Canary, a Job, a pod, a ConfigMap), through client-go, one
// request per call and no cache: every answer is made of what the API server
// holds at that moment. The gate reads them here as the path's readers do
// (Kube.Member), so both hold the same objects to the same barrier test.
type Objects struct {
	// Core and Flagger are the clients the reads go through, for a service
	// that reads or writes more of the cluster beside them.
	Core    kubernetes.Interface
	Flagger flaggerclient.Interface
}

// NewObjects connects to the API server cfg names. Built-in kinds travel as
// protobuf, which the API server encodes and client-go decodes several times
// faster than JSON; Flagger's Canary has no protobuf form and stays JSON.
func NewObjects(cfg *rest.Config) (*Objects, error) {
	cfg = rest.CopyConfig(cfg)
	// The gate's load is Flagger's questions, a few per Canary per analysis
	// interval; client-go's default of 5 requests/s would queue them behind
	// each other. The API server's own priority and fairness bounds the gate.
	cfg.QPS, cfg.Burst = -1, 0
	flagger, err := flaggerclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("flagger client: %w", err)
	}
	pb := rest.CopyConfig(cfg)
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(pb)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Objects{Core: kube, Flagger: flagger}, nil
}

// viewOf is the view of each item of a list.
func viewOf[T, V any](items []T, of func(*T) V) []V {
	out := make([]V, 0, len(items))
	for i := range items {
		out = append(out, of(&items[i]))
	}
	return out
}

func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", release.ErrNotFound, err)
	}
	return err
}

// Pods lists the pods selector matches.
func (k *Objects) Pods(ctx context.Context, namespace string, selector labels.Selector) ([]release.Pod, error) {
	list, err := k.Core.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return viewOf(list.Items, PodOf), nil
}

// PodOf is the view of a pod.
func PodOf(p *corev1.Pod) release.Pod {
	out := release.Pod{
		Name:           p.Name,
		Labels:         p.Labels,
		Running:        p.Status.Phase == corev1.PodRunning,
		Terminating:    p.DeletionTimestamp != nil,
		HostNetwork:    p.Spec.HostNetwork,
		ServiceAccount: p.Spec.ServiceAccountName,
	}
	for _, ip := range p.Status.PodIPs {
		out.IPs = append(out.IPs, ip.IP)
	}
	if len(out.IPs) == 0 && p.Status.PodIP != "" {
		out.IPs = []string{p.Status.PodIP}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	// Init containers are the pod's containers too: one that restarts, a
	// sidecar above all, is as much a sign of trouble as an app container.
	for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		out.Restarts += int(c.RestartCount)
	}
	return out
}

// ConfigMap reads one ConfigMap.
func (k *Objects) ConfigMap(ctx context.Context, namespace, name string) (release.ConfigMap, error) {
	cm, err := k.Core.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return release.ConfigMap{}, notFound(err)
	}
	return release.ConfigMap{Name: cm.Name, Labels: cm.Labels, Data: cm.Data, BinaryData: cm.BinaryData}, nil
}

// ConfigMapsIn lists the ConfigMaps of namespace.
func (k *Objects) ConfigMapsIn(ctx context.Context, namespace string) ([]release.ConfigMap, error) {
	list, err := k.Core.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return viewOf(list.Items, func(cm *corev1.ConfigMap) release.ConfigMap {
		return release.ConfigMap{Name: cm.Name, Labels: cm.Labels, Data: cm.Data, BinaryData: cm.BinaryData}
	}), nil
}

// Jobs lists the Jobs selector matches.
func (k *Objects) Jobs(ctx context.Context, namespace string, selector labels.Selector) ([]release.Job, error) {
	list, err := k.Core.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return viewOf(list.Items, JobOf), nil
}

// JobOf is the view of a Job.
func JobOf(j *batchv1.Job) release.Job {
	out := release.Job{Name: j.Name, Identity: j.Labels[release.LabelName]}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			out.Complete = true
		case batchv1.JobFailed:
			out.Failed = true
		default:
		}
	}
	for _, o := range j.OwnerReferences {
		if o.Kind == "CronJob" {
			out.Scheduled = true
		}
	}
	return out
}

// CanariesIn lists the Canaries of namespace.
func (k *Objects) CanariesIn(ctx context.Context, namespace string) ([]release.Canary, error) {
	list, err := k.Flagger.FlaggerV1beta1().Canaries(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return viewOf(list.Items, CanaryOf), nil
}

// CanaryOf is the view of a Flagger Canary, which a service that reads the
// Canary itself holds to the barrier's test (Unchanged) as the gate does.
func CanaryOf(c *flaggerv1.Canary) release.Canary {
	out := release.Canary{
		Name:              c.Name,
		Phase:             c.Status.Phase,
		Iterations:        c.Status.Iterations,
		LastAppliedSpec:   c.Status.LastAppliedSpec,
		LastPromotedSpec:  c.Status.LastPromotedSpec,
		Port:              c.Spec.Service.Port,
		WebhooksWrittenAt: writtenAt(c.ManagedFields, "spec", "analysis", "webhooks"),
	}
	if c.Spec.Analysis != nil {
		for _, w := range c.Spec.Analysis.Webhooks {
			md := map[string]string{}
			if w.Metadata != nil {
				md = *w.Metadata
			}
			out.Webhooks = append(out.Webhooks, md)
		}
	}
	return out
}

// PhaseChangedAt is when Flagger last moved a Canary's Promoted condition
// to the status it has: for a failed Canary, when it failed. The Canary's
// status.lastTransitionTime is no such time, since Flagger rewrites it on
// every tick of a failed Canary. A Canary without the condition has no such
// time: zero, which reads as a failure from before anything was asked.
func PhaseChangedAt(c *flaggerv1.Canary) time.Time {
	for _, cond := range c.Status.Conditions {
		if cond.Type == flaggerv1.PromotedType {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// Deployment reads one Deployment.
func (k *Objects) Deployment(ctx context.Context, namespace, name string) (release.Deployment, error) {
	d, err := k.Core.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return release.Deployment{}, notFound(err)
	}
	return DeploymentOf(d)
}

// DeploymentsIn lists the Deployments of namespace. The API server checks a
// Deployment's selector when it is written, so one that does not parse is
// left out: a copy the gate cannot read reads as absent, which withholds.
func (k *Objects) DeploymentsIn(ctx context.Context, namespace string) ([]release.Deployment, error) {
	list, err := k.Core.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]release.Deployment, 0, len(list.Items))
	for i := range list.Items {
		if d, err := DeploymentOf(&list.Items[i]); err == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// DeploymentOf is the view of a Deployment; an error for one whose selector
// does not parse, which no copy can be found by.
func DeploymentOf(d *appsv1.Deployment) (release.Deployment, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return release.Deployment{}, fmt.Errorf("Deployment %s has a selector that does not parse: %w", d.Name, err)
	}
	return release.Deployment{
		Name:              d.Name,
		Selector:          sel,
		InitContainers:    containersOf(d.Spec.Template.Spec.InitContainers),
		Containers:        containersOf(d.Spec.Template.Spec.Containers),
		TemplateRevision:  d.Spec.Template.Annotations[release.RevisionAnnotation],
		TemplateWrittenAt: writtenAt(d.ManagedFields, "spec", "template"),
	}, nil
}

// writtenAt is the latest time a writer changed the object while owning a
// field at or under path, read from the object's managed fields: the API
// server stamps a writer's entry each time its write changes the object, and
// keeps the stamp when a write changes nothing. Writes through a subresource
// (status, scale) are not the spec's; an entry that owns only a parent of
// path (its "." marker) owns nothing under it. Zero, which holds, when no
// entry says, or when an entry of the object itself has no time or does not
// read: then the latest write cannot be told.
func writtenAt(entries []metav1.ManagedFieldsEntry, path ...any) time.Time {
	under := fieldpath.MakePathOrDie(path...)
	var latest time.Time
	for _, e := range entries {
		if e.Subresource != "" {
			continue
		}
		var owned fieldpath.Set
		if e.Time == nil || e.FieldsV1 == nil || owned.FromJSON(bytes.NewReader(e.FieldsV1.Raw)) != nil {
			return time.Time{}
		}
		owns := false
		owned.Iterate(func(p fieldpath.Path) {
			owns = owns || (len(p) >= len(under) && p[:len(under)].Equals(under))
		})
		if owns && e.Time.After(latest) {
			latest = e.Time.Time
		}
	}
	return latest
}

func containersOf(cs []corev1.Container) []release.Container {
	out := make([]release.Container, 0, len(cs))
	for _, c := range cs {
		cc := release.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args}
		for _, e := range c.Env {
			cc.Env = append(cc.Env, release.EnvVar{Name: e.Name, Value: e.Value, From: envSourceOf(e.ValueFrom)})
		}
		for _, f := range c.EnvFrom {
			s := release.EnvSource{Prefix: f.Prefix}
			switch {
			case f.ConfigMapRef != nil:
				s.Kind, s.Name = "configMap", f.ConfigMapRef.Name
			case f.SecretRef != nil:
				s.Kind, s.Name = "secret", f.SecretRef.Name
			}
			cc.EnvFrom = append(cc.EnvFrom, s)
		}
		out = append(out, cc)
	}
	return out
}

func envSourceOf(v *corev1.EnvVarSource) *release.EnvSource {
	switch {
	case v == nil:
		return nil
	case v.ConfigMapKeyRef != nil:
		return &release.EnvSource{Kind: "configMap", Name: v.ConfigMapKeyRef.Name, Key: v.ConfigMapKeyRef.Key}
	case v.SecretKeyRef != nil:
		return &release.EnvSource{Kind: "secret", Name: v.SecretKeyRef.Name, Key: v.SecretKeyRef.Key}
	case v.FieldRef != nil:
		return &release.EnvSource{Kind: "field", Name: v.FieldRef.FieldPath}
	case v.ResourceFieldRef != nil:
		return &release.EnvSource{Kind: "resource", Name: v.ResourceFieldRef.Resource, Key: v.ResourceFieldRef.ContainerName}
	}
	// A source kind this gate does not know: it compares equal only to itself.
	return &release.EnvSource{Kind: "other", Name: v.String()}
}
