package testenv

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ApplyDryRun server-side applies every object of a multi-document YAML or
// JSON stream with the API server's dry run, as kubectl apply --server-side
// --dry-run=server would: each object is defaulted, validated and admitted
// as a real apply would be, and nothing is stored. The namespace of a
// namespaced object must exist; an object of a kind the API server does not
// serve is an error. It returns the objects as the API server would have
// stored them.
func (cp *ControlPlane) ApplyDryRun(ctx context.Context, manifests []byte) ([]*unstructured.Unstructured, error) {
	return cp.applyStream(ctx, manifests, true)
}
