package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBuildCommand builds the kubelet and kube-proxy beside the control
// plane's binaries; every failure to find them names it.
const NodeBuildCommand = "scripts/test-binaries.sh node (make test runs it)"

// Node is a cluster whose one node runs pods for real: the control plane
// with its controllers and scheduler, containerd with runc, a CNI bridge
// kept on this machine, the kubelet, kube-proxy and a cluster DNS that
// answers the cluster's Service names and nothing else. Pods run the images
// imported into containerd (ImportImage); nothing is ever pulled.
//
// One node runs on a machine at a time (a second run waits for the first),
// and stopping it leaves nothing behind: processes, mounts, cgroups, links,
// routes, chains and kernel settings are put back, a killed run's by the
// next.
type Node struct {
	*ControlPlane
	processSet
	// Gateway is this machine's address on the node's bridge: pods reach
	// servers a test runs there.
	Gateway string
	// Name is the Node's name.
	Name string

	lock                       *os.File
	dns                        *clusterDNS
	containerdSock             string
	kubeProxy, kubeProxyConfig string
	say                        func(string)
	// closers stop what was started beside the processes (servers in
	// this process), first thing on Close.
	closers []func()
}

// NodeOptions shape a Node.
type NodeOptions struct {
	// Images are image archives (docker-archive tarballs, as
	// ociimage.WriteArchive writes) imported before the kubelet starts.
	Images []string
	// Say is told each step of the start in a few words; nil is quiet.
	Say func(string)
}

var sharedNode sharedServer[*Node]

// SharedNode returns the package's one Node, started on first use with opts
// (later calls' opts are not read) and stopped by Main once the package's
// tests end. A test that cannot have one fails, naming what is missing.
func SharedNode(t testing.TB, opts NodeOptions) *Node {
	t.Helper()
	// The lock's own 30 minutes for another run's node, then the start.
	return sharedNode.get(t, 35*time.Minute, "no node that runs pods for this test",
		func(ctx context.Context) (*Node, error) { return StartNode(ctx, opts) })
}

// CanRunNode says why this machine cannot run the node, or nil when it can:
// it runs as root, with the kube components built and Debian's containerd,
// runc, iptables and CNI plugins installed.
func CanRunNode() error {
	if os.Geteuid() != 0 {
		return errors.New("the node runs containers and owns network rules, which takes root")
	}
	_, err := nodeBinaries()
	return err
}

// nodeBinaries finds the kube components the node runs, and checks the
// host tools it needs are there.
func nodeBinaries() (map[string]string, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		bin := filepath.Join(assets, name)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("no %s in %s: build it with %s", name, assets, NodeBuildCommand)
		}
		bins[name] = bin
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("no %s on this machine: scripts/test-deps.sh installs it", tool)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return nil, errors.New("no CNI bridge plugin in /usr/lib/cni: scripts/test-deps.sh installs containernetworking-plugins")
	}
	return bins, nil
}

// StartNode starts a Node; Close stops it. A start that fails stops what it
// started and says what each process logged.
func StartNode(ctx context.Context, opts NodeOptions) (*Node, error) {
	say := opts.Say
	if say == nil {
		say = func(string) {}
	}
	bins, err := nodeBinaries()
	if err != nil {
		return nil, err
	}
	lock, err := nodeLock(ctx, 30*time.Minute, say)
	if err != nil {
		return nil, err
	}
	n := &Node{Gateway: nodeGateway, Name: nodeName, lock: lock, say: say, kubeProxy: bins["kube-proxy"]}
	say("clearing what an earlier node left")
	if err := clearHost(ctx, bins["kube-proxy"], ""); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("clear an earlier node's leftovers: %w", err)
	}
	if err := n.start(ctx, bins, opts); err != nil {
		err = errors.Join(err, n.tail())
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, bins map[string]string, opts NodeOptions) error {
	if err := saveSysctls(); err != nil {
		return fmt.Errorf("record the kernel settings: %w", err)
	}
	dir, err := os.MkdirTemp("", nodeMark+"-")
	if err != nil {
		return err
	}
	n.dir = dir
	n.say("making the bridge " + nodeBridge + " at " + nodeGateway)
	if err := upNetwork(ctx); err != nil {
		return err
	}
	if err := makeCgroups(); err != nil {
		return err
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		return err
	}
	pki, err := writeNodePKI(pkiDir, net.ParseIP(nodeGateway), net.ParseIP(nodeAPIService))
	if err != nil {
		return err
	}
	n.say("starting etcd and kube-apiserver")
	cp, err := StartWith(ctx, ControlPlaneOptions{
		Address: nodeGateway, ServiceRange: nodeSvcRange, CertDir: pkiDir, CA: pki.caPEM,
		ServiceAccounts: true,
		Args: map[string]string{
			"kubelet-client-certificate": pki.clientCert,
			"kubelet-client-key":         pki.clientKey,
		},
	})
	if err != nil {
		return err
	}
	n.ControlPlane = cp
	n.say("starting kube-controller-manager and kube-scheduler")
	admin, err := cp.startControllers(&n.processSet, bins, nodePodRange)
	if err != nil {
		return err
	}
	if n.dns, err = serveClusterDNS(nodeGateway, cp.Kube); err != nil {
		return err
	}
	n.say("starting containerd")
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	pause, err := n.pauseImage(ctx)
	if err != nil {
		return err
	}
	for _, archive := range append([]string{pause}, opts.Images...) {
		if err := n.ImportImage(ctx, archive); err != nil {
			return err
		}
	}
	n.say("starting the kubelet and kube-proxy")
	if err := n.startKubelet(bins["kubelet"], admin, pki.caFile); err != nil {
		return err
	}
	if err := n.startKubeProxy(bins["kube-proxy"], admin); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// waitReady waits for the Node to be Ready and for the default
// ServiceAccount, which pods of the default namespace need.
func (n *Node) waitReady(ctx context.Context) error {
	n.say("waiting for the node to be Ready")
	last := "no Node yet"
	for {
		node, err := n.Kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil {
			last = "not Ready"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					last = fmt.Sprintf("Ready %s: %s", c.Status, c.Message)
					if c.Status == corev1.ConditionTrue {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node was never Ready (%s): %w", last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// OnClose has f run when the node stops: a server its pods reach that the
// tests of a package share.
func (n *Node) OnClose(f func()) { n.closers = append(n.closers, f) }

// Close stops the node and everything it started, and puts this machine
// back as it was.
func (n *Node) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range n.closers {
		c()
	}
	n.stopAll()
	if n.dns != nil {
		n.dns.close()
	}
	if err := clearHost(ctx, n.kubeProxy, n.kubeProxyConfig); err != nil {
		fmt.Fprintln(os.Stderr, "the node left something behind:", err)
	}
	if n.ControlPlane != nil {
		_ = n.Stop()
	}
	if n.dir != "" {
		_ = os.RemoveAll(n.dir)
	}
	if n.lock != nil {
		_ = n.lock.Close()
	}
}

// makeCgroups makes the node's cgroup in every hierarchy: the kubelet runs
// its pods beneath it (cgroupRoot) and wants it there already. A cpuset
// cgroup holds no process until its cpus and mems are set, so they are
// copied from the root.
func makeCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, nodeMark)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) { //nolint:gosec // a cgroup
			return fmt.Errorf("make cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			raw, err := os.ReadFile(filepath.Join(h, f)) //nolint:gosec // a cgroup file
			if err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f), raw, 0o600); err != nil {
				return fmt.Errorf("set %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// ports returns count ports free on 127.0.0.1 now.
func freePorts(count int) ([]int, error) {
	out := make([]int, count)
	for i := range out {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// ContainerLogs is the end of every container's log on the node whose pod
// is in namespace (every namespace's when empty), for a test that failed.
func (n *Node) ContainerLogs(namespace string, max int) string {
	pattern := namespace + "_*"
	if namespace == "" {
		pattern = "*"
	}
	files, _ := filepath.Glob(filepath.Join(n.dir, "pod-logs", pattern, "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		raw, _ := os.ReadFile(f) //nolint:gosec // the node's own pod logs
		if len(raw) > max {
			raw = raw[len(raw)-max:]
		}
		fmt.Fprintf(&b, "\n--- %s\n%s", strings.TrimPrefix(f, filepath.Join(n.dir, "pod-logs")+"/"), raw)
	}
	return b.String()
}

// PodLogs is what the containers of namespace's pods whose names start
// with prefix wrote, one line per write, the CRI's time, stream and tag
// taken off, oldest first per container.
func (n *Node) PodLogs(namespace, prefix string) string {
	files, _ := filepath.Glob(filepath.Join(n.dir, "pod-logs", namespace+"_"+prefix+"*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		raw, _ := os.ReadFile(f) //nolint:gosec // the node's own pod logs
		for _, line := range strings.Split(string(raw), "\n") {
			// <time> <stream> <P|F> <text>
			parts := strings.SplitN(line, " ", 4)
			if len(parts) == 4 {
				b.WriteString(parts[3])
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}
