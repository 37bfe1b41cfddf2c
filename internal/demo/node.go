package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/estate"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

// The two releases the node's story delivers: what serves at the start,
// and a release with a migration proven against it.
var (
	nodeServing = estate.Release{Version: "1.0.0", Revision: servingRevision}
	nodeRelease = estate.Release{Version: "2.0.0", Revision: releaseRevision, TestedAgainst: servingRevision}
)

// nodeStartTimeout bounds starting the node and installing the estate on a
// warm machine (images built, the node Ready, Flux's and the product's pods
// Available); a cold build of the images takes part of it.
const nodeStartTimeout = 15 * time.Minute

// runOnNode starts the node that runs pods, installs the estate on it as a
// platform team does, and tells one release from the real objects and logs.
func runOnNode(ctx context.Context, o Options, dir string) error {
	fmt.Fprintf(o.Out, "\nEstate on a node: one release through the real Flux, the real Flagger and the product's own pods\n")
	say := func(s string) { fmt.Fprintf(o.Out, "  %s\n", s) }
	startCtx, cancel := context.WithTimeout(ctx, nodeStartTimeout)
	defer cancel()
	member, err := testenv.BuildMemberImage(startCtx, dir)
	if err != nil {
		return err
	}
	n, err := testenv.StartNode(startCtx, testenv.NodeOptions{Images: []string{member}, Say: say})
	if err != nil {
		return err
	}
	defer n.Close()
	e, err := estate.Install(startCtx, n, estate.Options{Root: o.Root, Dir: dir, Say: say})
	if err != nil {
		return err
	}
	ns := "auth"
	if _, err := n.Apply(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")); err != nil {
		return err
	}
	err = TellOnNode(ctx, o.Out, e, ns, filepath.Join(dir, "renders"))
	if !o.Once {
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if raw, kerr := n.Kubeconfig(); kerr == nil && os.WriteFile(kubeconfig, raw, 0o600) == nil {
			fmt.Fprintf(o.Out, "\nEverything stays up (KUBECONFIG=%s); Ctrl-C stops the node.\n", kubeconfig)
		}
		<-ctx.Done()
		fmt.Fprintln(o.Out, "Stopping.")
	}
	return err
}

// TellOnNode delivers the auth Application's first release, then tells its
// second as it happens: Flux pulling and applying it, the gate's round
// starting the migration, Flagger analysing both members, the gate's
// answers, the Reporter's GitHub statuses and the release record's events,
// each read from the estate's real objects and its services' logs. It
// returns ErrUnexpected when the release does not come to serve.
func TellOnNode(ctx context.Context, out io.Writer, e *estate.Estate, ns, dir string) error {
	w := &nodeWatch{out: out, e: e, ns: ns, seen: map[string]bool{}, phases: map[string]string{}, statuses: map[int64]bool{}}
	store, err := rr.NewKubeStore(e.Node.Config, estate.GateNamespace)
	if err != nil {
		return err
	}
	w.store = store
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	w.title("1. What serves: auth " + nodeServing.Version)
	if _, err := w.deliver(ctx, nodeServing, dir); err != nil {
		return err
	}
	if !w.until(ctx, 5*time.Minute, func() bool { return w.serving(ctx) == nodeServing.Revision }) {
		return fmt.Errorf("%w: auth %s never came to serve", ErrUnexpected, nodeServing.Version)
	}
	w.title("2. Flux applies auth " + nodeRelease.Version + ": a migration, a new auth-api and a new auth-ui")
	start := time.Now()
	w.start = start
	deployment, err := w.deliver(ctx, nodeRelease, dir)
	if err != nil {
		return err
	}
	w.deployment = deployment
	// The story ends when every part has said its piece: the gate serves
	// the release, the Reporter says success and the release record says
	// healthy, which may come a look of its own after the other two.
	done := w.until(ctx, 8*time.Minute, func() bool {
		return w.serving(ctx) == nodeRelease.Revision && w.reported(fakegithub.Status{State: "success"}) &&
			w.record == string(rr.StateHealthy)
	})
	w.title("3. Where it ended")
	for _, m := range estate.Members {
		fmt.Fprintf(out, "  %s: %s\n", m.Process, w.phases[m.Process])
	}
	if !done {
		return fmt.Errorf("%w: auth %s did not come to serve with its GitHub Deployment a success and its record healthy", ErrUnexpected, nodeRelease.Version)
	}
	fmt.Fprintf(out, "  auth %s serves, %s after it was pushed; its GitHub Deployment says success, its record healthy.\n", nodeRelease.Version, time.Since(start).Round(time.Second))
	return nil
}

// nodeWatch prints what the estate shows about the story's release, each
// line once, as it first appears.
type nodeWatch struct {
	out        io.Writer
	e          *estate.Estate
	ns         string
	start      time.Time
	deployment int64
	version    string
	seen       map[string]bool
	phases     map[string]string
	statuses   map[int64]bool
	applied    string
	record     string
	// store reads the release record's records, made once.
	store *rr.KubeStore
}

func (w *nodeWatch) title(s string) { fmt.Fprintf(w.out, "\n%s\n", s) }

// line prints what a source says, once, with the time since the release was
// pushed.
func (w *nodeWatch) line(source, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if w.seen[source+s] {
		return
	}
	w.seen[source+s] = true
	at := ""
	if !w.start.IsZero() {
		at = fmt.Sprintf("%5.0fs ", time.Since(w.start).Seconds())
	}
	fmt.Fprintf(w.out, "  %s%-16s %s\n", at, "["+source+"]", s)
}

// deliver pushes r's render with the real flux CLI, creates its GitHub
// Deployment as the workflow does and moves the Project's pin.
func (w *nodeWatch) deliver(ctx context.Context, r estate.Release, dir string) (int64, error) {
	// A new release's record starts its own states, printed from its first.
	w.version, w.record = r.Version, ""
	folder := filepath.Join(dir, r.Version)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(folder, "auth.yaml"), []byte(r.Render(w.ns)), 0o600); err != nil {
		return 0, err
	}
	art, err := w.e.Flux.Push(ctx, folder, w.ns+"/auth", r.Version, "https://github.com/example-org/auth", "main@sha1:"+r.Commit())
	if err != nil {
		return 0, err
	}
	w.line("flux", "pushed %s as oci://%s/%s:%s", r.Version, w.e.Flux.Registry, art.Repository, art.Tag)
	id := w.e.GitHub.AddDeployment("example-org/"+w.ns, fakegithub.NewDeployment{Ref: art.Tag, Environment: estate.RecordEnvironment,
		Payload: json.RawMessage(fmt.Sprintf(`{"project":%q,"version":%q}`, w.ns, art.Tag))})
	w.line("workflow", "GitHub Deployment %d made; the pin moved to %s", id, short(art.Digest))
	return id, w.e.Unit(ctx, w.ns, art)
}

// until looks at everything once a second, printing what is new, until
// done holds or deadline passes.
func (w *nodeWatch) until(ctx context.Context, deadline time.Duration, done func() bool) bool {
	end := time.Now().Add(deadline)
	for {
		w.look(ctx)
		if done() {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// look reads each source once.
func (w *nodeWatch) look(ctx context.Context) {
	c := w.e.Node.Client
	var k kustomizev1.Kustomization
	if err := c.Get(ctx, client.ObjectKey{Namespace: testenv.FluxNamespace, Name: "project-" + w.ns}, &k); err == nil && k.Status.LastAppliedRevision != w.applied {
		w.applied = k.Status.LastAppliedRevision
		w.line("flux", "kustomize-controller applied %s", short(w.applied))
	}
	for _, m := range estate.Members {
		var cn flaggerv1.Canary
		if err := c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: m.Process}, &cn); err != nil {
			continue
		}
		phase := string(cn.Status.Phase)
		if cn.Status.Phase == flaggerv1.CanaryPhaseProgressing && cn.Spec.Analysis != nil {
			phase = fmt.Sprintf("%s, iteration %d of %d", phase, cn.Status.Iterations, cn.Spec.Analysis.Iterations)
		}
		if phase != w.phases[m.Process] {
			w.phases[m.Process] = phase
			w.line("flagger", "%s %s", m.Process, phase)
		}
	}
	w.migration(ctx)
	w.answers()
	w.reported(fakegithub.Status{})
	w.recorded(ctx)
}

// migration says when the gate's round started the release's migration and
// when it completed.
func (w *nodeWatch) migration(ctx context.Context) {
	if w.version != nodeRelease.Version {
		return
	}
	name := "auth-migration-" + nodeRelease.Tag()
	j, err := w.e.Node.Kube.BatchV1().Jobs(w.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err != nil {
		return
	}
	switch {
	case j.Status.CompletionTime != nil:
		w.line("migration", "Job %s completed", name)
	case j.Spec.Suspend != nil && !*j.Spec.Suspend:
		w.line("migration", "the gate's round started Job %s", name)
	default:
		w.line("migration", "Job %s written suspended, for the gate to start", name)
	}
}

// answers prints the gate's answers about the story's Application, from
// its pods' logs.
func (w *nodeWatch) answers() {
	for _, raw := range strings.Split(w.e.Node.PodLogs(estate.GateNamespace, "release-gate"), "\n") {
		var l struct{ Msg, Webhook, Namespace, Process, Revision, Reason, Cause string }
		if json.Unmarshal([]byte(raw), &l) != nil || l.Namespace != w.ns || l.Webhook == "" {
			continue
		}
		switch l.Msg {
		case "yes", "not yet", "cannot answer":
			why := strings.TrimSpace(l.Reason + " " + l.Cause)
			w.line("gate", "%-11s %s at %s: %s — %s", l.Webhook, l.Process, release.RevisionTag(l.Revision), l.Msg, why)
		}
	}
}

// reported prints the Reporter's new statuses on the release's GitHub
// Deployment and says whether one has want's state.
func (w *nodeWatch) reported(want fakegithub.Status) bool {
	if w.deployment == 0 {
		return false
	}
	found := false
	for _, st := range w.e.GitHub.Statuses("example-org/"+w.ns, w.deployment) {
		if !w.statuses[st.ID] {
			w.statuses[st.ID] = true
			w.line("reporter", "%s: %s", st.State, st.Description)
		}
		found = found || (want.State != "" && st.State == want.State)
	}
	return found
}

// recorded prints the release record's state of the release and the events
// it keeps as sent.
func (w *nodeWatch) recorded(ctx context.Context) {
	if w.store == nil {
		return
	}
	s, err := w.store.Get(ctx, w.ns+"@"+w.version+":"+estate.RecordCluster+"/"+estate.RecordEnvironment)
	if err != nil {
		return
	}
	if state := string(s.Record.State); state != "" && state != w.record {
		w.record = state
		w.line("release record", "%s %s", w.version, state)
	}
	for _, ev := range s.Record.EmittedShadow {
		w.line("release record", "%s event %s", w.version, ev)
	}
}

// serving is the revision the gate's record says serves.
func (w *nodeWatch) serving(ctx context.Context) string {
	cm, err := w.e.Node.Kube.CoreV1().ConfigMaps(estate.GateNamespace).Get(ctx, release.RecordConfigMap(w.ns, "auth"), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	r, err := release.DecodeRecord(w.ns, "auth", cm.Data)
	if err != nil {
		return ""
	}
	if r.Serving != "" {
		w.line("gate", "its record says %s serves", release.RevisionTag(r.Serving))
	}
	return r.Serving
}

// short is a digest's first twelve hex digits.
func short(digest string) string { return release.RevisionTag(digest) }
