package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	// Kwok tells the story on kwok's cluster, whose pods run nothing, even
	// where the node that runs pods can run.
	Kwok bool
}

// ErrUnexpected is a story in which some step did not answer as expected.
var ErrUnexpected = errors.New("the gate did not answer every step as the story expects")

// startTimeout bounds starting the cluster and building the gate.
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
	if !o.Kwok {
		err := testenv.CanRunNode()
		if err == nil {
			return runOnNode(ctx, o, dir)
		}
		fmt.Fprintf(o.Out, "This machine cannot run the node that runs pods (%v),\nso the story is told on kwok's cluster, whose pods run nothing.\n", err)
	}

	t := &teller{out: o.Out, root: o.Root, dir: dir, roundWait: roundWait, flaggerWait: flaggerWait}
	t.title("Estate in a box: one release through the Release Gate and the real Flagger")
	t.say("Starting kube-apiserver %s, etcd %s, kube-controller-manager, kube-scheduler,", testenv.KubeVersion, testenv.EtcdVersion)
	t.say("kwok %s with one fake node, and Flagger %s under its published grant...", testenv.KwokVersion, testenv.FlaggerVersion)
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// The gate listens at the port deploy-kit's webhook URLs name, on a
	// loopback address of this run's own; Flagger alone resolves the
	// gate's Service name to it.
	gateAddr, err := testenv.FreeLoopback(startCtx, gatePort)
	if err != nil {
		return err
	}
	gateIP, _, _ := net.SplitHostPort(gateAddr)
	c, err := testenv.StartCluster(startCtx, testenv.ClusterOptions{Hosts: map[string]string{gateHost: gateIP}})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := t.connect(c.ControlPlane); err != nil {
		return err
	}
	if err := t.writeKubeconfig(); err != nil {
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
	gate, err := startGate(startCtx, ctx, t, gateAddr)
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
		t.say("Everything stays up; Ctrl-C stops the gate, Flagger and the cluster.")
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
