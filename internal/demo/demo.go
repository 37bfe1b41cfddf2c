// Package demo runs a whole release through the Release Gate on an embedded
// cluster: a real kube-apiserver and etcd, the sample estate under
// examples/demo, and the real release-gate binary. The demo plays Flagger and
// the kubelet step by step and prints every question, the gate's answer and
// its reason, so a newcomer sees the product work without a cluster of their
// own; with Once it is also the end-to-end test.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// Options say how one run goes.
type Options struct {
	// Once ends the run after the story, failing when a step did not answer
	// as the story expects; otherwise everything stays up until ctx ends.
	Once bool
	// Out receives the transcript.
	Out io.Writer
	// Root is the module's folder (where go.mod is); found from the working
	// directory when empty.
	Root string
}

// ErrUnexpected is a story in which some step did not answer as expected.
var ErrUnexpected = errors.New("the gate did not answer every step as the story expects")

// startTimeout bounds starting the control plane and building the gate.
const startTimeout = 5 * time.Minute

// Run starts the cluster and the gate, tells the story and then, unless
// Once, leaves both up until ctx ends.
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Root == "" {
		if o.Root, err = findRoot(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "delivery-demo-")
	if err != nil {
		return fmt.Errorf("make the demo's folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	t := &teller{out: o.Out, root: o.Root, dir: dir, roundWait: roundWait}
	t.title("Estate in a box: one release through the Release Gate")
	t.say("Starting a kube-apiserver %s and etcd %s with Flagger's and Flux's CRDs...", testenv.KubeVersion, testenv.EtcdVersion)
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cp, err := testenv.Start(startCtx)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil && ctx.Err() == nil {
			err = fmt.Errorf("stop the control plane: %w", stopErr)
		}
	}()
	if err := t.connect(cp); err != nil {
		return err
	}
	if err := t.writeKubeconfig(cp); err != nil {
		return err
	}
	members, err := startMembers(ctx)
	if err != nil {
		return err
	}
	defer members.stop()
	t.members = members
	if err := t.setUp(startCtx); err != nil {
		return err
	}
	gate, err := startGate(startCtx, ctx, t, cp)
	if err != nil {
		return err
	}
	defer gate.stop()
	t.gate = gate

	t.tell(ctx, story())
	t.where(o.Once)
	if len(t.missed) > 0 {
		t.title("%d step(s) did not answer as the story expects", len(t.missed))
		for _, m := range t.missed {
			t.say("%s", m)
		}
	}
	if !o.Once {
		t.say("Everything stays up; Ctrl-C stops the gate, the API server and etcd.")
		<-ctx.Done()
		t.say("Stopping.")
	}
	if len(t.missed) > 0 {
		return fmt.Errorf("%w: %s", ErrUnexpected, strings.Join(t.missed, "; "))
	}
	return nil
}

// findRoot walks up from the working directory to the folder holding go.mod,
// so the demo runs from the module root (make demo) and from its package's
// folder (go test) alike.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the module: no go.mod above the working directory; run the demo inside the repository")
		}
		dir = parent
	}
}
