package releaserecord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/JorisJonkers-dev/delivery/internal/kubeclient"
)

// KubeStore keeps the records as ConfigMaps in one namespace.
type KubeStore struct {
	kube      kubernetes.Interface
	namespace string
}

var _ Store = (*KubeStore)(nil)

// NewKubeStore keeps the records in namespace of the cluster cfg names.
func NewKubeStore(cfg *rest.Config, namespace string) (*KubeStore, error) {
	kube, err := kubernetes.NewForConfig(kubeclient.Paced(cfg))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &KubeStore{kube: kube, namespace: namespace}, nil
}

// Get reads the ConfigMap release-<hash>. One there that the service does
// not manage, or whose data does not decode, is unreadable: never written.
func (k *KubeStore) Get(ctx context.Context, releaseID string) (Stored, error) {
	name := RecordName(releaseID)
	cm, err := k.kube.CoreV1().ConfigMaps(k.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Stored{}, nil
	}
	if err != nil {
		return Stored{}, fmt.Errorf("read the record %s/%s: %w", k.namespace, name, err)
	}
	return storedOf(cm)
}

func storedOf(cm *corev1.ConfigMap) (Stored, error) {
	if cm.Labels[LabelManagedBy] != ManagedBy {
		return Stored{}, fmt.Errorf("%w: %s/%s is not labelled %s=%s", ErrUnreadable, cm.Namespace, cm.Name, LabelManagedBy, ManagedBy)
	}
	rec, err := DecodeRecord(cm.Name, cm.Data)
	if err != nil {
		return Stored{}, fmt.Errorf("%s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return Stored{Record: rec, Version: cm.ResourceVersion}, nil
}

// List reads one service's records by their labels, in pages of 500.
func (k *KubeStore) List(ctx context.Context, app, env, cluster string) ([]Stored, error) {
	selector := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelApp: app, LabelEnv: env, LabelCluster: cluster}).String()
	var out []Stored
	cont := ""
	for {
		list, err := k.kube.CoreV1().ConfigMaps(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list the records of %s in %s/%s: %w", app, cluster, env, err)
		}
		for i := range list.Items {
			if s, err := storedOf(&list.Items[i]); err == nil {
				out = append(out, s)
			}
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// Put creates the ConfigMap, or updates it at the version read.
func (k *KubeStore) Put(ctx context.Context, s Stored) (Stored, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.Record.Name(), Namespace: k.namespace, Labels: s.Record.Labels(), ResourceVersion: s.Version},
		Data:       s.Record.Data(),
	}
	var err error
	if s.Version == "" {
		cm, err = k.kube.CoreV1().ConfigMaps(k.namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm, err = k.kube.CoreV1().ConfigMaps(k.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
		return Stored{}, fmt.Errorf("%w: %s/%s", ErrConflict, k.namespace, s.Record.Name())
	case err != nil:
		return Stored{}, fmt.Errorf("write the record %s/%s: %w", k.namespace, s.Record.Name(), err)
	}
	return Stored{Record: s.Record, Version: cm.ResourceVersion}, nil
}

// DriftReason is the reason of the Kubernetes Event a drift is said as.
const DriftReason = "ReleaseDrift"

// Drift writes a Warning Event about the record. Its name is a hash of the
// record, the version that recorded the drift and the drift, so saying it
// again finds it there and the drift is said once.
func (k *KubeStore) Drift(ctx context.Context, s Stored, d Drift) error {
	sum := sha256.Sum256([]byte(s.Record.ReleaseID + "\x00" + s.Version + "\x00" + d.Message))
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: s.Record.Name() + "." + hex.EncodeToString(sum[:8]), Namespace: k.namespace, Labels: s.Record.Labels()},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: k.namespace, Name: s.Record.Name(),
			ResourceVersion: s.Version},
		Reason: DriftReason, Message: s.Record.ReleaseID + ": " + d.Message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "release-record"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_, err := k.kube.CoreV1().Events(k.namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("write the drift event of %s: %w", s.Record.ReleaseID, err)
	}
	return nil
}
