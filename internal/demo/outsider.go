package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// askAsOutsider sends the gate the question Flagger would send for one of
// process's webhooks, from a pod address that is not Flagger's, and notes an
// answer other than 403: the gate answers Flagger alone.
func (t *teller) askAsOutsider(ctx context.Context, process, webhook string) {
	c, err := t.dyn.Resource(canaries).Namespace(namespace).Get(ctx, process, metav1.GetOptions{})
	if err != nil {
		t.miss("read Canary %s: %v", process, err)
		return
	}
	hook, err := webhookOf(c, webhook)
	if err != nil {
		t.miss("%v", err)
		return
	}
	phase, _, _ := unstructured.NestedString(c.Object, "status", "phase")
	body, err := json.Marshal(map[string]any{"name": process, "namespace": namespace, "phase": phase, "checksum": "", "metadata": hook})
	if err != nil {
		t.miss("encode the question: %v", err)
		return
	}
	t.say("A pod at %s, not Flagger's, asks %s for %s at %s:", outsiderAddress, webhook, process, tag(hook["revision"]))
	status, reason, err := t.gate.call(ctx, http.MethodPost, outsiderAddress, "/"+webhook, body)
	if err != nil {
		t.miss("POST /%s: %v", webhook, err)
		return
	}
	t.shows("→ %d %s", status, reason)
	if status != http.StatusForbidden || !strings.Contains(reason, "Flagger") {
		t.miss("/%s answered a pod that is not Flagger's %d %q, not 403", webhook, status, reason)
	}
}

// webhookOf returns the metadata of the Canary's webhook name.
func webhookOf(c *unstructured.Unstructured, name string) (map[string]string, error) {
	hooks, _, err := unstructured.NestedSlice(c.Object, "spec", "analysis", "webhooks")
	if err != nil {
		return nil, fmt.Errorf("canary %s: %w", c.GetName(), err)
	}
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok || hook["name"] != name {
			continue
		}
		md, _, err := unstructured.NestedStringMap(hook, "metadata")
		if err != nil {
			return nil, fmt.Errorf("canary %s webhook %s: %w", c.GetName(), name, err)
		}
		return md, nil
	}
	return nil, fmt.Errorf("canary %s has no webhook %s", c.GetName(), name)
}
