package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// The sample estate's names, as examples/demo spells them.
const (
	namespace   = "demo-system"
	application = "auth"
	gateNS      = "delivery-system"
	examples    = "examples/demo"
)

// The three revisions of the story: what serves at the start, the release
// that goes through, and the one whose proof is stale.
const (
	servingRevision = "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
	releaseRevision = "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca"
	staleRevision   = "sha256:9cca1f71bf199ab6b7078c03cf586b33d7b6623d7858034ce581e002be295dcb"
)

// teller runs the story against the cluster and the gate, and writes the
// transcript: each question, the gate's answer, and what the cluster shows.
type teller struct {
	out     io.Writer
	root    string
	dir     string
	cp      *testenv.ControlPlane
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	gate    *gateProcess
	members *members
	// kubeconfig is the administrator's, written for kubectl.
	kubeconfig string
	// missed names every step that did not answer as the story expects.
	missed  []string
	chapter int
	// roundWait bounds each wait for something the gate does between
	// questions; flaggerWait each wait for Flagger to move a Canary.
	roundWait, flaggerWait time.Duration
	// seen is what the story has watched Flagger and the gate do so far.
	seen observer
}

func (t *teller) title(format string, args ...any) {
	fmt.Fprintf(t.out, "\n%s\n", fmt.Sprintf(format, args...))
}

// say narrates: what the demo does, as Flux or as someone looking.
func (t *teller) say(format string, args ...any) {
	fmt.Fprintf(t.out, "  %s\n", fmt.Sprintf(format, args...))
}

// shows prints what the cluster or the gate showed, indented under a step.
func (t *teller) shows(format string, args ...any) {
	for _, line := range strings.Split(fmt.Sprintf(format, args...), "\n") {
		fmt.Fprintf(t.out, "      %s\n", line)
	}
}

// showsAny is shows for what may be nothing.
func (t *teller) showsAny(seen string) {
	if seen != "" {
		t.shows("%s", seen)
	}
}

func (t *teller) miss(format string, args ...any) {
	m := fmt.Sprintf(format, args...)
	t.missed = append(t.missed, m)
	fmt.Fprintf(t.out, "      ✗ %s\n", m)
}

// connect gives the teller its clients of the control plane.
func (t *teller) connect(cp *testenv.ControlPlane) error {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	t.cp, t.kube, t.dyn = cp, cp.Kube, dyn
	return nil
}

// writeKubeconfig writes the administrator's kubeconfig, for kubectl.
func (t *teller) writeKubeconfig() error {
	cp := t.cp
	raw, err := cp.Kubeconfig()
	if err != nil {
		return err
	}
	t.kubeconfig = filepath.Join(t.dir, "kubeconfig")
	if err := os.WriteFile(t.kubeconfig, raw, 0o600); err != nil {
		return fmt.Errorf("write the kubeconfig: %w", err)
	}
	t.say("API server %s (kubeconfig %s)", cp.Config.Host, t.kubeconfig)
	return nil
}

// apply applies a file of the project, relative to its root.
func (t *teller) apply(ctx context.Context, file string) error {
	raw, err := os.ReadFile(filepath.Join(t.root, file)) //nolint:gosec // a file of the project the demo names
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return t.applyDocs(ctx, file, raw)
}

// applyDocs applies manifests read from file and says what they held.
func (t *teller) applyDocs(ctx context.Context, file string, raw []byte) error {
	objs, err := t.cp.Apply(ctx, raw)
	if err != nil {
		return fmt.Errorf("apply %s: %w", file, err)
	}
	kinds := map[string]int{}
	var order []string
	for _, o := range objs {
		if kinds[o.GetKind()] == 0 {
			order = append(order, o.GetKind())
		}
		kinds[o.GetKind()]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	t.say("applied %s: %s", file, strings.Join(parts, ", "))
	return nil
}

// setUp applies the platform and the gate's grant.
func (t *teller) setUp(ctx context.Context) error {
	for _, f := range []string{examples + "/platform.yaml", "deploy/release-gate/rbac.yaml"} {
		if err := t.apply(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// await polls check until it reports done or timeout passes, and prints what
// it saw last. A wait that times out is a step that did not answer.
func (t *teller) await(ctx context.Context, what string, timeout time.Duration, check func(ctx context.Context) (string, bool, error)) {
	deadline := time.Now().Add(timeout)
	for {
		t.watch(ctx)
		seen, done, err := check(ctx)
		switch {
		case err != nil:
			t.miss("%s: %v", what, err)
			return
		case done:
			t.showsAny(seen)
			return
		case time.Now().After(deadline) || ctx.Err() != nil:
			t.showsAny(seen)
			t.miss("%s: not within %s", what, timeout)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tag is a revision's short name, as Job names and the gate's reasons use it.
func tag(revision string) string { return release.RevisionTag(revision) }
