package releasehistory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// SweepCluster is what a sweep asks of the cluster the records live in.
type SweepCluster interface {
	// List reads every record. On a failed page it returns the entries read
	// before it with the error: enough to say a stall, too few to delete by.
	List(ctx context.Context) ([]Entry, error)
	// Alert raises the ReleaseStalled Event on the record and remembers the
	// state on it. raised names the Event when this call created it, "" when
	// a sweep before had. ErrMoved when the record moved since it was listed
	// (the Event may be raised even so; the label is not written).
	Alert(ctx context.Context, s Stall) (raised string, err error)
	// Delete deletes the record as it was listed; ErrMoved when it moved or
	// is gone since.
	Delete(ctx context.Context, d Deletion) error
}

// ErrMoved marks a record the release record wrote, or someone deleted,
// between the sweep's list and its write: the sweep leaves it to the next
// run, which decides again on what it then holds.
var ErrMoved = errors.New("the record moved since it was listed")

// listPage is how many records one list request reads: 10,000 records are
// 20 requests, none of them a large answer.
const listPage = 500

// KubeSweep is the SweepCluster of the ConfigMaps the release record keeps
// in one namespace.
type KubeSweep struct {
	kube      kubernetes.Interface
	namespace string
}

var _ SweepCluster = (*KubeSweep)(nil)

// NewKubeSweep sweeps the records in namespace of the cluster cfg names.
func NewKubeSweep(cfg *rest.Config, namespace string) (*KubeSweep, error) {
	kube, err := kubernetes.NewForConfig(kubeclient.Paced(cfg))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &KubeSweep{kube: kube, namespace: namespace}, nil
}

var managedBy = labels.SelectorFromSet(labels.Set{rr.LabelManagedBy: rr.ManagedBy}).String()

// List reads the ConfigMaps labelled managed-by=release-record, a page at
// a time.
func (k *KubeSweep) List(ctx context.Context) ([]Entry, error) {
	var out []Entry
	cont := ""
	for {
		list, err := k.kube.CoreV1().ConfigMaps(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: managedBy, Limit: listPage, Continue: cont})
		if err != nil {
			return out, fmt.Errorf("list the records in %s: %w", k.namespace, err)
		}
		for i := range list.Items {
			out = append(out, EntryOf(&list.Items[i]))
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// EntryOf reads one record's ConfigMap. One with no state key at all was
// written before records had a state: legacy, judged by its creation time.
// Any other that does not decode is unreadable, with the reason.
func EntryOf(cm *corev1.ConfigMap) Entry {
	e := Entry{Name: cm.Name, Version: cm.ResourceVersion, UID: string(cm.UID), Created: cm.CreationTimestamp.Time,
		StallAlerted: cm.Labels[LabelStallAlerted]}
	if _, ok := cm.Data["state"]; !ok {
		e.Legacy = true
		return e
	}
	rec, err := rr.DecodeRecord(cm.Name, cm.Data)
	if err != nil {
		e.Unreadable = err.Error()
		return e
	}
	e.Record = rec
	return e
}

// StallEventName is the name of the Event a stall is said as: the record's,
// and a hash of its release, the state and since when, so raising it again
// finds it there, and a stall of the next state is another Event.
func StallEventName(s Stall) string {
	sum := sha256.Sum256([]byte(s.ReleaseID + "\x00" + string(s.State) + "\x00" + s.Since.UTC().Format(time.RFC3339)))
	return s.Name + "." + hex.EncodeToString(sum[:8])
}

// Alert creates the Event first and labels the record after, so a failure
// between the two leaves the stall unsaid on the record, and the next sweep
// finds the Event there rather than saying it twice.
func (k *KubeSweep) Alert(ctx context.Context, s Stall) (string, error) {
	name := StallEventName(s)
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: k.namespace, Name: s.Name,
			UID: types.UID(s.UID), ResourceVersion: s.Version},
		Reason: StalledReason, Type: corev1.EventTypeWarning,
		Message: fmt.Sprintf("%s: %s with no fact since %s", s.ReleaseID, s.State, s.Since.UTC().Format(time.RFC3339)),
		Source:  corev1.EventSource{Component: "release-record-sweep"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	raised := name
	_, err := k.kube.CoreV1().Events(k.namespace).Create(ctx, ev, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		raised = ""
	case err != nil:
		return "", fmt.Errorf("raise the stall event of %s: %w", s.ReleaseID, err)
	}
	// A merge patch carrying the resourceVersion read is applied only over
	// that version: the API server answers a conflict for any other.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": s.Version, "labels": map[string]string{LabelStallAlerted: string(s.State)}}})
	if err != nil {
		return raised, err
	}
	_, err = k.kube.CoreV1().ConfigMaps(k.namespace).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return raised, fmt.Errorf("%w: %s/%s", ErrMoved, k.namespace, s.Name)
	case err != nil:
		return raised, fmt.Errorf("label the stalled record %s/%s: %w", k.namespace, s.Name, err)
	}
	return raised, nil
}

// Delete deletes the record under a precondition on its uid and
// resourceVersion as listed, so a record written since is kept.
func (k *KubeSweep) Delete(ctx context.Context, d Deletion) error {
	pre := &metav1.Preconditions{}
	if d.UID != "" {
		uid := types.UID(d.UID)
		pre.UID = &uid
	}
	if d.Version != "" {
		pre.ResourceVersion = &d.Version
	}
	err := k.kube.CoreV1().ConfigMaps(k.namespace).Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: pre})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %s/%s", ErrMoved, k.namespace, d.Name)
	case err != nil:
		return fmt.Errorf("delete the record %s/%s: %w", k.namespace, d.Name, err)
	}
	return nil
}
