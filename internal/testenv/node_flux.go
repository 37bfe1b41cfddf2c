package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Versions of Flux as scripts/test-binaries.sh builds it: v2.9.3's set.
const (
	FluxVersion                   = "v2.9.3"
	SourceControllerVersion       = "v1.9.3"
	KustomizeControllerVersion    = "v1.9.4"
	NotificationControllerVersion = "v1.9.2"
)

// FluxBuildCommand builds the Flux controllers and CLI; every failure to
// find them names it.
const FluxBuildCommand = "scripts/test-binaries.sh flux (make test runs it)"

// FluxNamespace is where the controllers run, as flux install puts them.
const FluxNamespace = "flux-system"

// fluxControllers are the controllers the node runs, each with its module's
// version: their CRDs are read from the same modules.
var fluxControllers = []struct{ name, version string }{
	{"source-controller", SourceControllerVersion},
	{"kustomize-controller", KustomizeControllerVersion},
	{"notification-controller", NotificationControllerVersion},
}

// Flux is the real Flux on a Node: source-, kustomize- and
// notification-controller running as pods in flux-system from images of
// their own binaries, and an OCI registry on the node's gateway that
// serves each release as Flux's own artifact, pushed by the flux CLI.
type Flux struct {
	node *Node
	// Registry is the registry's host:port, as an OCIRepository's URL names
	// it (oci://<Registry>/<repository>).
	Registry string
	// failing is the repository whose every request the registry answers
	// with 500, nil for none.
	failing atomic.Pointer[string]
	cli     string
	srv     *http.Server
}

// StartFlux installs Flux's CRDs and controllers on the node, serves the
// registry, and waits until every controller is Available.
func (n *Node) StartFlux(ctx context.Context) (*Flux, error) {
	dir, err := fluxDir()
	if err != nil {
		return nil, err
	}
	f := &Flux{node: n, cli: filepath.Join(dir, "flux")}
	if err := f.serveRegistry(); err != nil {
		return nil, err
	}
	n.say("installing Flux's CRDs")
	if err := n.installFluxCRDs(ctx); err != nil {
		return nil, err
	}
	n.say("importing Flux's controllers as images")
	for _, c := range fluxControllers {
		archive, err := BinaryImage(filepath.Join(dir, c.name), c.name, fluxImage(c.name, c.version), filepath.Join(n.dir, c.name+".tar"))
		if err != nil {
			return nil, err
		}
		if err := n.ImportImage(ctx, archive); err != nil {
			return nil, err
		}
	}
	if _, err := n.Apply(ctx, []byte(fluxManifests())); err != nil {
		return nil, fmt.Errorf("install Flux: %w", err)
	}
	n.say("waiting for Flux's controllers")
	for _, c := range fluxControllers {
		if err := n.WaitAvailable(ctx, FluxNamespace, c.name); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// fluxDir is the folder of the cached Flux binaries.
func fluxDir() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "flux-"+FluxVersion)
	for _, name := range []string{"source-controller", "kustomize-controller", "notification-controller", "flux"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("no %s in %s: build it with %s", name, dir, FluxBuildCommand)
		}
	}
	return dir, nil
}

func fluxImage(name, version string) string {
	return "localhost/delivery-node/" + name + ":" + version
}

// installFluxCRDs applies every CRD of the three controllers' modules, the
// newer OCIRepository and Kustomization over the ones every control plane
// starts with, and waits until each is served.
func (n *Node) installFluxCRDs(ctx context.Context) error {
	for _, c := range fluxControllers {
		dir, err := moduleDir(ctx, "github.com/fluxcd/"+c.name+"@"+c.version)
		if err != nil {
			return err
		}
		files, err := filepath.Glob(filepath.Join(dir, "config/crd/bases/*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no CRDs in %s", dir)
		}
		for _, file := range files {
			raw, err := os.ReadFile(file) //nolint:gosec // a module file
			if err != nil {
				return err
			}
			objs, err := n.Apply(ctx, raw)
			if err != nil {
				return fmt.Errorf("apply %s: %w", filepath.Base(file), err)
			}
			for _, o := range objs {
				if err := n.waitEstablished(ctx, o.GetName()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (n *Node) waitEstablished(ctx context.Context, name string) error {
	return waitFor(ctx, "CRD "+name+" to be established", func() (bool, string) {
		// Read as unstructured: the clients' scheme holds no apiextensions.
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := n.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err.Error()
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == string(apiextensionsv1.Established) && m["status"] == "True" {
				return true, ""
			}
		}
		return false, "not established"
	})
}

// WaitAvailable waits until the Deployment namespace/name has all its
// replicas updated and available, saying what its pods' containers wait on.
func (n *Node) WaitAvailable(ctx context.Context, namespace, name string) error {
	return waitFor(ctx, "Deployment "+namespace+"/"+name+" to be available", func() (bool, string) {
		d, err := n.Kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if available(d) {
			return true, ""
		}
		return false, n.podStates(ctx, namespace)
	})
}

func available(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

// podStates says, for a wait that failed, what each pod of namespace is
// doing.
func (n *Node) podStates(ctx context.Context, namespace string) string {
	pods, err := n.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, " %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, " %s terminated: %s %s", c.Name, c.State.Terminated.Reason, c.State.Terminated.Message)
			default:
				fmt.Fprintf(&b, " %s ready %v, restarts %d", c.Name, c.Ready, c.RestartCount)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}

// serveRegistry serves go-containerregistry's registry on the gateway,
// where source-controller's pod reaches it.
func (f *Flux) serveRegistry() error {
	ln, err := net.Listen("tcp", net.JoinHostPort(f.node.Gateway, "0"))
	if err != nil {
		return fmt.Errorf("serve the registry: %w", err)
	}
	// Its log of every request is noise in a test's output.
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	f.Registry = ln.Addr().String()
	f.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if repo := f.failing.Load(); repo != nil && strings.HasPrefix(r.URL.Path, "/v2/"+*repo+"/") {
			http.Error(w, "the registry fails, as the test asked", http.StatusInternalServerError)
			return
		}
		reg.ServeHTTP(w, r)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	f.node.closers = append(f.node.closers, func() { _ = f.srv.Close() })
	return nil
}

// FailRepository makes the registry answer 500 to every request for
// repository until Heal, leaving the others served: a test may fail one
// Project's pulls while another's releases go on.
func (f *Flux) FailRepository(repository string) { f.failing.Store(&repository) }

// Heal serves every repository again.
func (f *Flux) Heal() { f.failing.Store(nil) }

// Artifact is one release as Flux's artifact: what the flux CLI pushed.
type Artifact struct {
	// Repository is the artifact's repository in the registry.
	Repository string
	// Tag is the tag it was pushed under.
	Tag string
	// Digest is its manifest's digest, sha256:<hex>: what a pin by
	// digest names and what Flux reports as the revision.
	Digest string
}

// URL is the OCIRepository's url for the artifact's repository.
func (a Artifact) URL(f *Flux) string { return "oci://" + f.Registry + "/" + a.Repository }

// Push pushes the folder dir as a Flux artifact to repository:tag with the
// flux CLI, as a release workflow does with flux push artifact: source and
// revision become the artifact's origin annotations.
func (f *Flux) Push(ctx context.Context, dir, repository, tag, source, revision string) (Artifact, error) {
	ref := "oci://" + f.Registry + "/" + repository + ":" + tag
	cmd := exec.CommandContext(ctx, f.cli, "push", "artifact", ref, "--path="+dir, //nolint:gosec // the cached flux CLI
		"--source="+source, "--revision="+revision, "--insecure-registry", "--output=json")
	cmd.Env = append(os.Environ(), "HOME="+f.node.dir)
	// The CLI prints its answer through cobra, on standard error unless told
	// otherwise, so both streams are read.
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Artifact{}, fmt.Errorf("flux push artifact %s: %w: %s", ref, err, out)
	}
	digest := pushedDigest(out)
	if digest == "" {
		return Artifact{}, fmt.Errorf("flux push artifact %s named no digest: %s", ref, out)
	}
	return Artifact{Repository: repository, Tag: tag, Digest: digest}, nil
}

// pushedDigest reads the digest from flux push artifact's JSON answer.
func pushedDigest(out []byte) string {
	var answer struct{ Digest string }
	start := bytes.IndexByte(out, '{')
	if start < 0 {
		return ""
	}
	if json.NewDecoder(bytes.NewReader(out[start:])).Decode(&answer) != nil || !strings.HasPrefix(answer.Digest, "sha256:") {
		return ""
	}
	return answer.Digest
}
