package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// This file is what the demo does to the cluster and reads from it besides
// the Canaries: Flux's apply of a render, and the Deployments, pods and Jobs
// the story looks at.

// documentSeparator splits a YAML stream into its documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// applyRender applies a render as Flux's kustomize-controller does: every
// object but the custom resources first, then the Canaries. between, when
// set, runs after the first apply, while the Canaries still carry the
// revision before.
func (t *teller) applyRender(ctx context.Context, file string, between func()) error {
	raw, err := os.ReadFile(filepath.Join(t.root, file)) //nolint:gosec // a file of the project the demo names
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	var core, custom [][]byte
	for _, doc := range documentSeparator.Split(string(raw), -1) {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return fmt.Errorf("read %s: %w", file, err)
		}
		switch head.Kind {
		case "":
			continue // a comment between documents
		case "Canary":
			custom = append(custom, []byte(doc))
		default:
			core = append(core, []byte(doc))
		}
	}
	sep := []byte("\n---\n")
	if err := t.applyDocs(ctx, file+" but its Canaries", bytes.Join(core, sep)); err != nil {
		return err
	}
	if between != nil {
		between()
	}
	return t.applyDocs(ctx, file+"'s Canaries", bytes.Join(custom, sep))
}

// image is what the Deployment's first container runs, or why it cannot be
// read.
func (t *teller) image(ctx context.Context, deployment string) string {
	d, err := t.kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("(cannot read Deployment %s: %v)", deployment, err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return "(no container)"
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// podsRunning names the pods of the demo's namespace with a container
// running image.
func (t *teller) podsRunning(ctx context.Context, image string) ([]string, error) {
	list, err := t.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the pods: %w", err)
	}
	var names []string
	for _, p := range list.Items {
		for _, c := range p.Spec.Containers {
			if c.Image == image {
				names = append(names, p.Name)
			}
		}
	}
	return names, nil
}

// awaitComplete waits for the Job controller to mark the Job complete; the
// demo's migration runs most of a minute on kwok's node.
func (t *teller) awaitComplete(ctx context.Context, job string) {
	t.await(ctx, "Job "+job+" completes", t.flaggerWait, func(ctx context.Context) (string, bool, error) {
		j, err := t.kube.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return "", false, fmt.Errorf("read Job %s: %w", job, err)
		}
		seen := fmt.Sprintf("Job %s: active %d, succeeded %d", job, j.Status.Active, j.Status.Succeeded)
		return seen, j.Status.CompletionTime != nil, nil
	})
}

// completedAt is when the Job controller marked the Job complete, to the
// second as the API keeps it; zero while it has not.
func (t *teller) completedAt(ctx context.Context, job string) (time.Time, error) {
	j, err := t.kube.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("read Job %s: %w", job, err)
	}
	if j.Status.CompletionTime == nil {
		return time.Time{}, nil
	}
	return j.Status.CompletionTime.Time, nil
}
