package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ApplyDryRun server-side applies every object of a multi-document YAML or
// JSON stream with the API server's dry run, as kubectl apply --server-side
// --dry-run=server would: each object is defaulted, validated and admitted
// as a real apply would be, and nothing is stored. The namespace of a
// namespaced object must exist; an object of a kind the API server does not
// serve is an error. It returns the objects as the API server would have
// stored them.
func (cp *ControlPlane) ApplyDryRun(ctx context.Context, manifests []byte) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var applied []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return applied, nil
			}
			return applied, fmt.Errorf("decode manifest %d: %w", len(applied)+1, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return applied, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return applied, err
		}
		force := true
		opts := metav1.PatchOptions{FieldManager: "testenv", Force: &force, DryRun: []string{metav1.DryRunAll}}
		out, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
		if err != nil {
			return applied, fmt.Errorf("dry-run apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		applied = append(applied, out)
	}
}
