package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
)

// PauseImage is the sandbox image every pod of the node starts from.
const PauseImage = "localhost/delivery-node/pause:1"

// startContainerd runs containerd privately: its root, state, sockets,
// runc's root and the CNI configuration all in the node's folder.
func (n *Node) startContainerd(ctx context.Context) error {
	for _, d := range []string{"containerd/root", "containerd/state", "runc", "cni/conf", "cni/ipam", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	n.containerdSock = filepath.Join(n.dir, "containerd.sock")
	// No masquerade and no route but the service range: a pod reaches the
	// node's bridge and the cluster's Services, nothing off this machine.
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "delivery-node", "plugins": [{
  "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "dataDir": %q,
    "ranges": [[{"subnet": %q, "gateway": %q}]],
    "routes": [{"dst": %q}]}}]}`,
		nodeBridge, filepath.Join(n.dir, "cni/ipam"), nodePodRange, nodeGateway, nodeSvcRange)
	if err := os.WriteFile(filepath.Join(n.dir, "cni/conf/10-delivery-node.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	// restrict_oom_score_adj: no process here may lower its OOM score, and
	// the CRI asks for -998 for every sandbox, which runc then fails on.
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(n.dir, "containerd/root"), filepath.Join(n.dir, "containerd/state"),
		n.containerdSock, filepath.Join(n.dir, "containerd-ttrpc.sock"), PauseImage,
		filepath.Join(n.dir, "runc"), n.registryHosts(), filepath.Join(n.dir, "cni/conf"))
	configFile := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		return err
	}
	if err := n.run("containerd", "containerd", "--config", configFile); err != nil {
		return err
	}
	return waitFor(ctx, "containerd to answer", func() (bool, string) {
		out, err := n.ctr(ctx, "version")
		return err == nil, out
	})
}

// ctr runs containerd's own client against the node's containerd, in the
// namespace the CRI keeps the kubelet's images in.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	args = append([]string{"--address", n.containerdSock, "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput() //nolint:gosec // containerd's client
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args[4:], " "), err, out)
	}
	return string(out), nil
}

// ImportImage loads an image archive into the node's containerd under the
// name the archive carries; pods then run it without a pull.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.ctr(ctx, "images", "import", archive)
	return err
}

// pauseImage builds the sandbox image from this module's pause program.
func (n *Node) pauseImage(ctx context.Context) (string, error) {
	root, err := ociimage.ModuleRoot(ctx, "", ".")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(n.dir, "pause")
	if err := (ociimage.GoBuild{Dir: root}).Build(ctx, "./internal/testenv/pause", bin); err != nil {
		return "", fmt.Errorf("build the pause program: %w", err)
	}
	return BinaryImage(bin, "pause", PauseImage, filepath.Join(n.dir, "pause.tar"))
}

// BinaryImage packs a static binary as an image named ref, the way the
// product's images are packed (one layer, the nonroot user, no shell), into
// the archive out, and returns out.
func BinaryImage(bin, command, ref, out string) (string, error) {
	program, err := os.ReadFile(bin) //nolint:gosec // a binary the tests built or cached
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		return "", fmt.Errorf("read the CA bundle: %w", err)
	}
	layer, err := ociimage.Root{Binary: command, Program: program, CACerts: ca}.Layer()
	if err != nil {
		return "", err
	}
	img, err := ociimage.Image(ociimage.Target{Name: command, Command: command}, layer, ociimage.Stamp{})
	if err != nil {
		return "", err
	}
	tag, err := nameTag(ref)
	if err != nil {
		return "", err
	}
	if err := ociimage.WriteArchive(out, tag, img); err != nil {
		return "", err
	}
	return out, nil
}

// startKubelet runs the kubelet with the node's settings: containerd's
// socket, cgroupfs under the node's own cgroup, the cluster DNS on the
// gateway, and this machine's kernel settings as they are.
func (n *Node) startKubelet(bin, kubeconfig, clientCA string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, nil, 0o600); err != nil {
		return err
	}
	// failCgroupV1: these machines mount cgroup v1. oomScoreAdj 0: no
	// process here may lower its score. The eviction thresholds are low so
	// that a test machine's full disk does not evict the test's pods.
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
oomScoreAdj: 0
failSwapOn: false
podLogsDir: %s
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
protectKernelDefaults: false
rotateCertificates: false
`, nodeMark, nodeGateway, ports[0], ports[1], nodeGateway, resolv, clientCA,
		filepath.Join(n.dir, "pod-logs"), n.containerdSock, n.containerdSock)
	configFile := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		return err
	}
	return n.run("kubelet", bin, "--config="+configFile, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.dir, "kubelet"), "--cert-dir="+filepath.Join(n.dir, "kubelet-pki"),
		"--hostname-override="+nodeName, "--node-ip="+nodeGateway,
		"--volume-plugin-dir="+filepath.Join(n.dir, "volume-plugins"), "--v=1")
}

// startKubeProxy runs kube-proxy in iptables mode for the node's ranges,
// leaving the host's conntrack settings alone and node ports on the
// gateway alone.
func (n *Node) startKubeProxy(bin, kubeconfig string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [%s/32]
oomScoreAdj: 0
iptables: {localhostNodePorts: false, masqueradeAll: false, syncPeriod: 30s, minSyncPeriod: 0s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kubeconfig, nodePodRange, nodeName, nodeGateway, ports[0], ports[1], nodeGateway)
	n.kubeProxyConfig = filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(n.kubeProxyConfig, []byte(config), 0o600); err != nil {
		return err
	}
	return n.run("kube-proxy", bin, "--config="+n.kubeProxyConfig, "--v=1")
}

// waitFor polls cond every 100 ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() (bool, string)) error {
	for {
		ok, last := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited for %s (%s): %w", what, strings.TrimSpace(last), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MemberImage is the image of the program the node's test Applications
// run (internal/testenv/member).
const MemberImage = "localhost/delivery-node/member:1"

// BuildMemberImage builds the member program and packs it as MemberImage
// into an archive under dir, for NodeOptions.Images.
func BuildMemberImage(ctx context.Context, dir string) (string, error) {
	root, err := ociimage.ModuleRoot(ctx, "", ".")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "member")
	if err := (ociimage.GoBuild{Dir: root}).Build(ctx, "./internal/testenv/member", bin); err != nil {
		return "", fmt.Errorf("build the member program: %w", err)
	}
	return BinaryImage(bin, "member", MemberImage, filepath.Join(dir, "member.tar"))
}
