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

// Apply server-side applies every object of a multi-document YAML or JSON
// stream, as kubectl apply --server-side would, and returns them as applied.
// Objects with a status also get that status written through the status
// subresource, as a controller would write it.
func (cp *ControlPlane) Apply(ctx context.Context, manifests []byte) ([]*unstructured.Unstructured, error) {
	return cp.applyStream(ctx, manifests, false)
}

// applyStream applies each object of manifests in turn; dryRun has the API
// server default, validate and admit each as a real apply and store nothing.
func (cp *ControlPlane) applyStream(ctx context.Context, manifests []byte, dryRun bool) ([]*unstructured.Unstructured, error) {
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
		out, err := applyOne(ctx, dyn, mapper, obj, dryRun)
		if err != nil {
			return applied, err
		}
		applied = append(applied, out)
	}
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	status, hasStatus := obj.Object["status"]
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "testenv", Force: &force}
	verb := "apply"
	if dryRun {
		opts.DryRun, verb = []string{metav1.DryRunAll}, "dry-run apply"
	}
	out, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s/%s: %w", verb, gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	// A dry run stops at the object: its status is a controller's to write.
	if hasStatus && !dryRun {
		statusObj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
			"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
			"status":   status,
		}}
		body, err := statusObj.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts, "status")
		if err != nil {
			return nil, fmt.Errorf("apply the status of %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return out, nil
}
