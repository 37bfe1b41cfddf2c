package releasegate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var _ TendCluster = (*Kube)(nil)

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
			out = append(out, CanaryState{Namespace: c.Namespace, Canary: release.CanaryOf(c), Transitioned: release.PhaseChangedAt(c)})
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
			d, err := release.DeploymentOf(&list.Items[i])
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
				Job: release.JobOf(j), Namespace: j.Namespace,
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
