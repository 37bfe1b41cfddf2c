package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's network, the same on every run: one node at a time runs on a
// machine (nodeLock), so fixed names let a run clear what a killed one left.
// The ranges are private ones no interface of these machines uses; nothing
// routes them off the machine (the bridge holds no uplink, pods get no
// default route, and a guard drops anything bridged to another interface).
const (
	nodeName     = "delivery-node"
	nodeBridge   = "dlvnode0"
	nodeGateway  = "10.201.0.1"
	nodePodRange = "10.201.0.0/24"
	nodeSvcRange = "10.202.0.0/24"
	// nodeAPIService is the kubernetes Service's address: the first of the
	// service range.
	nodeAPIService = "10.202.0.1"
	// nodeMark names every path, cgroup and rule of a node's, so a cleanup
	// finds a killed run's leftovers by it alone.
	nodeMark = "dlvnode"
	// nodeGuardComment marks the node's own iptables rules.
	nodeGuardComment = "delivery-node guard"
)

// nodeSysctls are the kernel settings the kubelet and the bridge plugin
// change, put back when the node stops.
var nodeSysctls = []string{
	"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables",
}

// nodeStateFile keeps the kernel settings as they were before a node ran,
// so a run after one that was killed still puts them back.
func nodeStateFile() string { return filepath.Join(os.TempDir(), "delivery-node.sysctls") }

// nodeLock takes the machine's one node, waiting up to wait for another
// run's to end: kube-proxy and the kubelet own host-wide rules and paths, so
// two nodes on one machine would undo each other. The lock is released when
// the returned file is closed, or when the process dies.
func nodeLock(ctx context.Context, wait time.Duration, say func(string)) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "delivery-node.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock the node: %w", err)
		}
		if !told {
			say("another run's node holds this machine; waiting for it to stop")
			told = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("another run's node held this machine for %s", wait)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// run runs a host command, its output in the error when it fails.
func hostRun(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput() //nolint:gosec // fixed host tools
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// saveSysctls records the kernel settings the node changes, unless a killed
// run's record is there already (which holds the values from before it).
func saveSysctls() error {
	if _, err := os.Stat(nodeStateFile()); err == nil {
		return nil
	}
	values := map[string]string{}
	for _, k := range nodeSysctls {
		raw, err := os.ReadFile(filepath.Join("/proc/sys", k)) //nolint:gosec // fixed kernel settings
		if err != nil {
			continue // a setting this kernel lacks is one nothing changes
		}
		values[k] = strings.TrimSpace(string(raw))
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return os.WriteFile(nodeStateFile(), raw, 0o600)
}

// restoreSysctls puts back the recorded settings and forgets them.
func restoreSysctls() error {
	raw, err := os.ReadFile(nodeStateFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var values map[string]string
	if err := json.Unmarshal(raw, &values); err != nil {
		return fmt.Errorf("read %s: %w", nodeStateFile(), err)
	}
	var errs []error
	for k, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("put back %s: %w", k, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(nodeStateFile()))
	}
	return errors.Join(errs...)
}

// upNetwork makes the bridge with the gateway's address before anything
// starts (the API server and the kubelet listen there), routes the service
// range through it, so a ClusterIP dialled from this machine leaves by the
// bridge and not the default route, and guards it.
func upNetwork(ctx context.Context) error {
	steps := [][]string{
		{"ip", "link", "add", nodeBridge, "type", "bridge"},
		{"ip", "addr", "add", nodeGateway + "/24", "dev", nodeBridge},
		{"ip", "link", "set", nodeBridge, "up"},
		{"ip", "route", "add", nodeSvcRange, "dev", nodeBridge, "src", nodeGateway},
		// In mangle: kube-proxy puts its own rules first in filter's FORWARD.
		{"iptables", "-t", "mangle", "-I", "FORWARD", "-i", nodeBridge, "!", "-o", nodeBridge, "-m", "comment", "--comment", nodeGuardComment, "-j", "DROP"},
		{"iptables", "-t", "mangle", "-I", "FORWARD", "-o", nodeBridge, "!", "-i", nodeBridge, "-m", "comment", "--comment", nodeGuardComment, "-j", "DROP"},
	}
	for _, s := range steps {
		if err := hostRun(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// clearHost removes whatever a node left on this machine, its own or a
// killed run's: processes, mounts, cgroups, links, routes and rules, and
// puts the kernel settings back. Each step goes on after another fails.
func clearHost(ctx context.Context, kubeProxy, kubeProxyConfig string) error {
	var errs []error
	killMarked()
	errs = append(errs, unmountMarked())
	if kubeProxy != "" {
		args := []string{"--cleanup"}
		if kubeProxyConfig != "" {
			args = append(args, "--config="+kubeProxyConfig)
		}
		// kube-proxy removes its own chains; what it cannot find is no error.
		_ = hostRun(ctx, kubeProxy, args...)
	}
	errs = append(errs, clearChains(ctx))
	errs = append(errs, removeLinks(ctx))
	errs = append(errs, removeCgroups())
	errs = append(errs, removeFixedPaths())
	errs = append(errs, restoreSysctls())
	return errors.Join(errs...)
}

// removeFixedPaths removes what the kubelet and libcni keep at fixed paths
// whatever their folders: libcni's cache of the node's network, the
// kubelet's links to its pods' logs, its device-plugin socket.
func removeFixedPaths() error {
	var errs []error
	// libcni names the loopback's cache by container alone; the node's name
	// its DNS server, the gateway.
	cached, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, f := range cached {
		raw, err := os.ReadFile(f) //nolint:gosec // libcni's cache
		if err == nil && (strings.HasPrefix(filepath.Base(f), "delivery-node-") || bytes.Contains(raw, []byte(`"`+nodeGateway+`"`))) {
			errs = append(errs, os.Remove(f))
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.Contains(target, "/"+nodeMark+"-") {
			errs = append(errs, os.Remove(l))
		}
	}
	if err := os.Remove("/var/lib/kubelet/device-plugins/kubelet.sock"); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// The folders the kubelet made there, where nothing else put a file.
	for _, d := range []string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/log/containers"} {
		_ = os.Remove(d)
	}
	return errors.Join(errs...)
}

// killMarked ends every process whose command line names a node's folder
// (containerd, its shims, the kubelet, kube-proxy) and every process left
// in a node's cgroups (the containers).
func killMarked() {
	self := os.Getpid()
	pids := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")) //nolint:gosec // /proc
		if err == nil && bytes.Contains(cmdline, []byte("/"+nodeMark+"-")) {
			pids[pid] = true
		}
	}
	for _, cg := range nodeCgroups() {
		_ = filepath.WalkDir(cg, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil //nolint:nilerr // a cgroup gone or unreadable holds no process to kill
			}
			if d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path) //nolint:gosec // a node's cgroup
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != self {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	for pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Wait, bounded, for them to be gone, so their mounts can go.
	deadline := time.Now().Add(10 * time.Second)
	for pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// unmountMarked unmounts every mount under a node's folder or its network
// namespaces, the deepest first.
func unmountMarked() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.Contains(fields[4], "/"+nodeMark+"-") {
			points = append(points, unescapeMount(fields[4]))
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount reads mountinfo's octal escapes (a space is \040).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// clearChains deletes the node's guard and every KUBE-* chain, with the
// rules elsewhere that jump to them, from iptables and ip6tables.
func clearChains(ctx context.Context) error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.CommandContext(ctx, tool, "-t", table, "-S").Output() //nolint:gosec // fixed host tools
			if err != nil {
				continue // a table or a tool this host lacks holds nothing of ours
			}
			var chains []string
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) >= 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
					chains = append(chains, f[1])
				case len(f) >= 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") &&
					(strings.Contains(line, "-j KUBE-") || strings.Contains(line, nodeGuardComment)):
					args := append([]string{"-t", table, "-D", f[1]}, shellFields(strings.Join(f[2:], " "))...)
					if err := hostRun(ctx, tool, args...); err != nil {
						errs = append(errs, err)
					}
				}
			}
			for _, c := range chains {
				_ = hostRun(ctx, tool, "-t", table, "-F", c)
			}
			for _, c := range chains {
				_ = hostRun(ctx, tool, "-t", table, "-X", c)
			}
		}
	}
	return errors.Join(errs...)
}

// shellFields splits an iptables -S rule into arguments, keeping a quoted
// comment whole.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, has := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, has = !quoted, true
		case r == ' ' && !quoted:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}

// removeLinks deletes the veths left on the bridge, the bridge, and so its
// addresses and routes.
func removeLinks(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "ip", "-o", "link", "show", "master", nodeBridge).Output() //nolint:gosec // fixed host tool
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				_ = hostRun(ctx, "ip", "link", "del", name)
			}
		}
	}
	if exec.CommandContext(ctx, "ip", "link", "show", nodeBridge).Run() != nil { //nolint:gosec // fixed host tool
		return nil //nolint:nilerr // no bridge is nothing to remove
	}
	return hostRun(ctx, "ip", "link", "del", nodeBridge)
}

// nodeCgroups are the node's cgroup roots, one per mounted hierarchy.
func nodeCgroups() []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, nodeMark)
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

func cgroupHierarchies() []string {
	var out []string
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"} // a unified hierarchy alone
	}
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}

// removeCgroups removes the node's cgroups, the deepest first; their
// processes were killed before.
func removeCgroups() error {
	var errs []error
	for _, root := range nodeCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 50 { // a cgroup whose last process just died may be busy a moment
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// NodeLeftovers says what of a node is still on this machine: none once a
// node has stopped, whoever ran it. A package whose tests ran a node checks
// it after they end.
func NodeLeftovers() []string {
	var left []string
	if exec.Command("ip", "link", "show", nodeBridge).Run() == nil { //nolint:gosec // fixed host tool
		left = append(left, "the bridge "+nodeBridge)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mounts, []byte("/"+nodeMark+"-")) {
		left = append(left, "a mount under a node's folder")
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, _ := exec.Command(tool, "-t", table, "-S").Output() //nolint:gosec // fixed host tools
			if bytes.Contains(out, []byte("KUBE-")) || bytes.Contains(out, []byte(nodeGuardComment)) {
				left = append(left, tool+"'s "+table+" rules")
			}
		}
	}
	if cgs := nodeCgroups(); len(cgs) > 0 {
		left = append(left, "the cgroups "+strings.Join(cgs, ", "))
	}
	if _, err := os.Stat(nodeStateFile()); err == nil {
		left = append(left, "kernel settings not put back")
	}
	if out, _ := exec.Command("ip", "route", "show", nodeSvcRange).Output(); len(bytes.TrimSpace(out)) > 0 { //nolint:gosec // fixed host tool
		left = append(left, "the route of "+nodeSvcRange)
	}
	cached, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, f := range cached {
		if raw, err := os.ReadFile(f); err == nil && bytes.Contains(raw, []byte(`"`+nodeGateway+`"`)) { //nolint:gosec // libcni's cache
			left = append(left, "libcni's cache "+f)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmdline, []byte("/"+nodeMark+"-")) { //nolint:gosec // /proc
			left = append(left, "process "+e.Name())
		}
	}
	return left
}
