package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// This file plays the parts of the cluster the demo has no controller for:
// Flagger (it asks the gate, moves its Canaries' status and promotes) and
// the kubelet and Job controller (pods become ready, Jobs complete).

var canaries = schema.GroupVersionResource{Group: "flagger.app", Version: "v1beta1", Resource: "canaries"}

// ask plays Flagger calling one of process's webhooks: it reads the Canary,
// sends the gate Flagger's payload with that webhook's metadata, prints the
// question and the answer, and notes a status other than want.
func (t *teller) ask(ctx context.Context, process, webhook string, want int, wantReason string) {
	t.askFrom(ctx, flaggerAddress, process, webhook, want, wantReason)
}

// askFrom is ask from the pod address from, Flagger's or another's.
func (t *teller) askFrom(ctx context.Context, from, process, webhook string, want int, wantReason string) {
	c, err := t.dyn.Resource(canaries).Namespace(namespace).Get(ctx, process, metav1.GetOptions{})
	if err != nil {
		t.miss("read Canary %s: %v", process, err)
		return
	}
	hook, typ, err := webhookOf(c, webhook)
	if err != nil {
		t.miss("%v", err)
		return
	}
	phase, _, _ := unstructured.NestedString(c.Object, "status", "phase")
	body, err := json.Marshal(map[string]any{
		"name": process, "namespace": namespace, "phase": phase, "checksum": c.GetResourceVersion(), "metadata": hook,
	})
	if err != nil {
		t.miss("encode the payload: %v", err)
		return
	}
	who := "Flagger"
	if from != flaggerAddress {
		who = "a pod at " + from
	}
	t.say("%s asks %-11s (%s) for %s at %s", who, webhook, typ, process, tag(hook["revision"]))
	t.answer(ctx, from, "/"+webhook, body, want, wantReason)
}

// answer posts body to path from the address from and prints the answer.
func (t *teller) answer(ctx context.Context, from, path string, body []byte, want int, wantReason string) {
	status, reason, err := t.gate.call(ctx, http.MethodPost, from, path, body)
	if err != nil {
		t.miss("POST %s: %v", path, err)
		return
	}
	t.shows("→ %d %s", status, reason)
	if status != want || !strings.Contains(reason, wantReason) {
		t.miss("%s answered %d %q where the story expects %d %q", path, status, reason, want, wantReason)
	}
}

// webhookOf returns the metadata and type of the Canary's webhook name.
func webhookOf(c *unstructured.Unstructured, name string) (map[string]string, string, error) {
	hooks, _, err := unstructured.NestedSlice(c.Object, "spec", "analysis", "webhooks")
	if err != nil {
		return nil, "", fmt.Errorf("canary %s: %w", c.GetName(), err)
	}
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok || hook["name"] != name {
			continue
		}
		md, _, err := unstructured.NestedStringMap(hook, "metadata")
		if err != nil {
			return nil, "", fmt.Errorf("canary %s webhook %s: %w", c.GetName(), name, err)
		}
		typ, _ := hook["type"].(string)
		return md, typ, nil
	}
	return nil, "", fmt.Errorf("canary %s has no webhook %s", c.GetName(), name)
}

// canaryStatus plays Flagger writing its record on a Canary. fields are
// status fields; a new phase gets a new lastTransitionTime.
func (t *teller) canaryStatus(ctx context.Context, process string, fields map[string]any) error {
	if _, ok := fields["phase"]; ok {
		fields["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
	}
	patch, err := json.Marshal(map[string]any{"status": fields})
	if err != nil {
		return err
	}
	_, err = t.dyn.Resource(canaries).Namespace(namespace).Patch(ctx, process, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("write Canary %s's status: %w", process, err)
	}
	return nil
}

// specHash is Flagger's digest of a Deployment's pod template: what it
// records as lastAppliedSpec when it starts a release of it.
func (t *teller) specHash(ctx context.Context, name string) (string, error) {
	d, err := t.kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read Deployment %s: %w", name, err)
	}
	raw, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return "", err
	}
	h := fnv.New32a()
	_, _ = h.Write(raw)
	return fmt.Sprintf("%x", h.Sum32()), nil
}

// analyse plays Flagger starting the analysis of process's new copy.
func (t *teller) analyse(ctx context.Context, process string) error {
	spec, err := t.specHash(ctx, process)
	if err != nil {
		return err
	}
	t.say("Flagger starts analysing %s: phase Progressing, lastAppliedSpec %s", process, spec)
	return t.canaryStatus(ctx, process, map[string]any{"phase": "Progressing", "iterations": 0, "failedChecks": 0, "lastAppliedSpec": spec})
}

// promote plays Flagger promoting process: the primary takes the new copy's
// containers, the record says so, and the new copy is scaled to zero.
func (t *teller) promote(ctx context.Context, process string) error {
	if err := t.canaryStatus(ctx, process, map[string]any{"phase": "Promoting"}); err != nil {
		return err
	}
	target, err := t.kube.AppsV1().Deployments(namespace).Get(ctx, process, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Deployment %s: %w", process, err)
	}
	primary, err := t.kube.AppsV1().Deployments(namespace).Get(ctx, process+"-primary", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Deployment %s-primary: %w", process, err)
	}
	primary.Spec.Template.Spec.Containers = target.Spec.Template.Spec.Containers
	if _, err := t.kube.AppsV1().Deployments(namespace).Update(ctx, primary, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("promote %s-primary: %w", process, err)
	}
	c, err := t.dyn.Resource(canaries).Namespace(namespace).Get(ctx, process, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Canary %s: %w", process, err)
	}
	applied, _, _ := unstructured.NestedString(c.Object, "status", "lastAppliedSpec")
	if err := t.canaryStatus(ctx, process, map[string]any{"phase": "Succeeded", "iterations": 0, "failedChecks": 0, "lastPromotedSpec": applied}); err != nil {
		return err
	}
	t.say("Flagger promotes %s: %s-primary runs the new containers, phase Succeeded, lastPromotedSpec %s", process, process, applied)
	return t.scaleDown(ctx, process)
}

// startPods plays the kubelet starting n pods of process's new copy, ready
// or not yet.
func (t *teller) startPods(ctx context.Context, process string, n int) error {
	d, err := t.kube.AppsV1().Deployments(namespace).Get(ctx, process, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Deployment %s: %w", process, err)
	}
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%s-%d", process, tag(releaseRevision)[:6], i),
				Namespace: namespace,
				Labels:    d.Spec.Template.Labels,
			},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		created, err := t.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("start pod %s: %w", pod.Name, err)
		}
		ip := fmt.Sprintf("10.42.1.%d", 10+i)
		created.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		}
		for _, c := range created.Spec.Containers {
			created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			})
		}
		if _, err := t.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("write pod %s's status: %w", pod.Name, err)
		}
	}
	t.say("the kubelet starts %s of %s's new copy; not ready yet", pods(n), process)
	return nil
}

// readyPods plays the kubelet marking every pod of process's new copy ready.
func (t *teller) readyPods(ctx context.Context, process string) error {
	list, err := t.newCopy(ctx, process)
	if err != nil {
		return err
	}
	for i := range list {
		p := &list[i]
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		for j := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[j].Ready = true
		}
		if _, err := t.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("write pod %s's status: %w", p.Name, err)
		}
	}
	t.say("the kubelet reports the %s of %s's new copy ready", pods(len(list)), process)
	return nil
}

// scaleDown plays the Deployment controller removing the new copy's pods
// once Flagger scaled it to zero.
func (t *teller) scaleDown(ctx context.Context, process string) error {
	pods, err := t.newCopy(ctx, process)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if err := t.kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
			return fmt.Errorf("remove pod %s: %w", p.Name, err)
		}
	}
	return nil
}

func (t *teller) newCopy(ctx context.Context, process string) ([]corev1.Pod, error) {
	list, err := t.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + process})
	if err != nil {
		return nil, fmt.Errorf("list %s's pods: %w", process, err)
	}
	return list.Items, nil
}

// completeJob plays the Job controller: the Job's pod ran and succeeded.
func (t *teller) completeJob(ctx context.Context, name string) error {
	j, err := t.kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Job %s: %w", name, err)
	}
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-40 * time.Second))
	j.Status = batchv1.JobStatus{
		StartTime: &start, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		},
	}
	if _, err := t.kube.BatchV1().Jobs(namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("complete Job %s: %w", name, err)
	}
	t.say("the Job controller reports %s complete", name)
	return nil
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}
