package testenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterBuildCommand builds the controllers, kwok and Flagger beside the API
// server; every failure to find them names it.
const ClusterBuildCommand = "scripts/test-binaries.sh cluster (make test runs it)"

// Versions of the cluster's other parts, as scripts/test-binaries.sh builds them.
const (
	KwokVersion    = "v0.8.0"
	FlaggerVersion = "v1.41.0"
)

// FlaggerNamespace is where the cluster runs Flagger, as deploy-kit's estate
// runs it beside the Release Gate.
const FlaggerNamespace = "delivery-system"

// FlaggerAddress is the address Flagger's requests come from: the process
// runs on this machine, and its Pod object carries this address.
const FlaggerAddress = "127.0.0.1"

// Cluster is a control plane that acts: the API server with
// kube-controller-manager (every default controller), kube-scheduler, kwok
// keeping fake nodes whose pods become Ready and whose Job pods complete, and
// the real Flagger under its own published grant. Every process stops when
// the test ends, failed or not.
type Cluster struct {
	*ControlPlane
	// FlaggerLogs is Flagger's output.
	FlaggerLogs *LogBuffer
	processSet
}

// ClusterOptions shape a Cluster.
type ClusterOptions struct {
	// Hosts are the names Flagger resolves and their addresses, seen by
	// Flagger alone through a private /etc/hosts, as a cluster's DNS
	// resolves the Release Gate's Service.
	Hosts map[string]string
	// Nodes is how many fake nodes kwok keeps; 1 when 0.
	Nodes int
}

var sharedCluster sharedServer[*Cluster]

// SharedCluster returns the package's one Cluster, started on first use with
// opts (later calls' opts are not read) and stopped by Main once the
// package's tests end. A test that cannot have one fails, naming the command
// that builds what is missing.
func SharedCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	return sharedCluster.get(t, 3*time.Minute, "no cluster with controllers and Flagger for this test",
		func(ctx context.Context) (*Cluster, error) { return StartCluster(ctx, opts) })
}

// StartCluster starts a Cluster for a caller that is not a test, the demo;
// Close stops it. A start that fails stops what it started and says what
// each process logged.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "delivery-cluster-")
	if err != nil {
		return nil, err
	}
	c, err := startCluster(ctx, dir, opts)
	if err != nil {
		if c != nil {
			c.stop()
		} else {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	return c, nil
}

// Close stops every process of the cluster and the API server, and removes
// its folder.
func (c *Cluster) Close() { c.stop() }

func startCluster(ctx context.Context, dir string, opts ClusterOptions) (*Cluster, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "flagger"} {
		bin := filepath.Join(assets, name)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("no %s in %s: build it with %s", name, assets, ClusterBuildCommand)
		}
		bins[name] = bin
	}
	cp, err := Start(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cluster{ControlPlane: cp, FlaggerLogs: &LogBuffer{}, processSet: processSet{dir: dir}}
	if err := c.start(ctx, bins, opts); err != nil {
		return c, errors.Join(err, c.tail())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bins map[string]string, opts ClusterOptions) error {
	adminFile, err := c.startControllers(&c.processSet, bins, "")
	if err != nil {
		return err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	stages, err := kwokStages(ctx, c.dir)
	if err != nil {
		return err
	}
	if err := c.run("kwok", bins["kwok"],
		"--kubeconfig="+adminFile, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-label-selector=type=kwok",
		"--cidr=10.244.0.0/16", "--node-ip=10.0.0.10", "--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:"+strconv.Itoa(ports[0]),
	); err != nil {
		return err
	}
	nodes := max(opts.Nodes, 1)
	for i := range nodes {
		if err := c.node(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	if err := c.installFlagger(ctx); err != nil {
		return err
	}
	flaggerConfig, err := c.KubeconfigAs(c.dir, FlaggerNamespace, "flagger")
	if err != nil {
		return err
	}
	args := []string{bins["flagger"], "-kubeconfig=" + flaggerConfig, "-mesh-provider=kubernetes",
		"-port=" + strconv.Itoa(ports[1]), "-metrics-server=http://127.0.0.1:9", "-log-level=info",
		"-enable-leader-election=false"}
	if len(opts.Hosts) > 0 {
		hosts := filepath.Join(c.dir, "flagger-hosts")
		if err := os.WriteFile(hosts, []byte(HostsFile(opts.Hosts)), 0o600); err != nil {
			return err
		}
		wrapped, err := PrivateHosts(ctx, hosts, args)
		if err != nil {
			return err
		}
		args = wrapped
	}
	return c.runLogged("flagger", c.FlaggerLogs, args[0], args[1:]...)
}

// startControllers runs kube-controller-manager, with every default
// controller, and kube-scheduler against the control plane, as processes of
// set, and returns the administrator's kubeconfig file they use.
// clusterCIDR, when set, is the pods' range the controller manager knows.
func (cp *ControlPlane) startControllers(set *processSet, bins map[string]string, clusterCIDR string) (string, error) {
	admin, err := cp.Kubeconfig()
	if err != nil {
		return "", err
	}
	adminFile := filepath.Join(set.dir, "admin.kubeconfig")
	rootCA := filepath.Join(set.dir, "root-ca.crt")
	signCert, signKey := filepath.Join(set.dir, "signing-ca.crt"), filepath.Join(set.dir, "signing-ca.key")
	if err := os.WriteFile(adminFile, admin, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(rootCA, cp.Config.CAData, 0o600); err != nil {
		return "", err
	}
	if err := writeCA(signCert, signKey); err != nil {
		return "", err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return "", err
		}
	}
	args := []string{"--kubeconfig=" + adminFile, "--controllers=*", "--leader-elect=false",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + filepath.Join(cp.CertDir(), "sa-signer.key"),
		"--root-ca-file=" + rootCA,
		"--cluster-signing-cert-file=" + signCert, "--cluster-signing-key-file=" + signKey,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
		// Kwok's nodes are never Unknown, and a real node's kubelet may be
		// slow beside a busy build; neither should lose its pods in a test.
		"--node-monitor-grace-period=5m",
	}
	if clusterCIDR != "" {
		args = append(args, "--cluster-cidr="+clusterCIDR)
	}
	if err := set.run("kube-controller-manager", bins["kube-controller-manager"], args...); err != nil {
		return "", err
	}
	if err := set.run("kube-scheduler", bins["kube-scheduler"],
		"--kubeconfig="+adminFile, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[1]),
	); err != nil {
		return "", err
	}
	return adminFile, nil
}

// processSet is the processes a test server of several parts runs, each
// with its output in a file of its folder, stopped together.
type processSet struct {
	dir   string
	procs []*process
}

// run starts one of the set's processes, its output in a file of the set's
// folder.
func (c *processSet) run(name, bin string, args ...string) error {
	return c.runLogged(name, nil, bin, args...)
}

func (c *processSet) runLogged(name string, logs *LogBuffer, bin string, args ...string) error {
	f, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // the cluster's own binaries, found in the cache
	cmd.Stdout, cmd.Stderr = f, f
	if logs != nil {
		cmd.Stdout = &teeWriter{f, logs}
		cmd.Stderr = cmd.Stdout
	}
	p, err := startProcess(cmd)
	if err != nil {
		_ = f.Close()
		return err
	}
	go func() { <-p.exited(); _ = f.Close() }()
	c.procs = append(c.procs, p)
	return nil
}

// stopAll ends every process, the last started first.
func (c *processSet) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].terminate()
	}
	c.procs = nil
}

type teeWriter struct {
	file *os.File
	logs *LogBuffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	_, _ = w.logs.Write(b)
	return w.file.Write(b)
}

// stop ends every process, the last started first, then the API server,
// and removes the cluster's folder.
func (c *Cluster) stop() {
	c.stopAll()
	_ = c.Stop()
	_ = os.RemoveAll(c.dir)
}

// tail is the end of each process's log, for a start that failed.
func (c *processSet) tail() error {
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		raw, _ := os.ReadFile(f) //nolint:gosec // the cluster's own log
		if len(raw) > 2000 {
			raw = raw[len(raw)-2000:]
		}
		fmt.Fprintf(&b, "\n--- %s\n%s", filepath.Base(f), raw)
	}
	if b.Len() == 0 {
		return nil
	}
	return errors.New(b.String())
}

// node creates a Node kwok keeps Ready.
func (c *Cluster) node(ctx context.Context, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}}}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// installFlagger applies Flagger's own published grant in FlaggerNamespace
// and a Pod object standing for the Flagger process: its address is this
// machine's, and no scheduler runs under the name it asks for, so neither
// kube-scheduler nor kwok ever takes it over.
func (c *Cluster) installFlagger(ctx context.Context) error {
	dir, err := moduleDir(ctx, "github.com/fluxcd/flagger@"+FlaggerVersion)
	if err != nil {
		return err
	}
	account, err := os.ReadFile(filepath.Join(dir, "artifacts/flagger/account.yaml")) //nolint:gosec // a module file
	if err != nil {
		return fmt.Errorf("read Flagger's grant: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FlaggerNamespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	grant := bytes.ReplaceAll(account, []byte("namespace: default"), []byte("namespace: "+FlaggerNamespace))
	if _, err := c.Apply(ctx, grant); err != nil {
		return fmt.Errorf("apply Flagger's grant: %w", err)
	}
	_, err = c.Apply(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: flagger-0
  namespace: %s
  labels: {app.kubernetes.io/name: flagger, app.kubernetes.io/instance: flagger}
spec:
  serviceAccountName: flagger
  schedulerName: the-flagger-process
  containers: [{name: flagger, image: ghcr.io/fluxcd/flagger:%s}]
status:
  phase: Running
  podIP: %s
  podIPs: [{ip: %s}]
  conditions: [{type: Ready, status: "True"}]
`, FlaggerNamespace, strings.TrimPrefix(FlaggerVersion, "v"), FlaggerAddress, FlaggerAddress)))
	if err != nil {
		return fmt.Errorf("apply Flagger's pod: %w", err)
	}
	return nil
}

// kwokStages joins kwok's own default stages (nodes kept Ready with a lease,
// pods made Ready, Job pods completed, deleted pods removed) into one config
// file: kwok run without its cluster tool has none. Job pods complete by
// kwok's general stage, so a pod can say how long it runs (the annotation
// pod-complete.stage.kwok.x-k8s.io/delay), as a migration that takes a while.
func kwokStages(ctx context.Context, dir string) (string, error) {
	module, err := moduleDir(ctx, "sigs.k8s.io/kwok@"+KwokVersion)
	if err != nil {
		return "", err
	}
	var docs []string
	for _, f := range []string{
		"kustomize/stage/node/fast/node-initialize.yaml",
		"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"kustomize/stage/pod/fast/pod-ready.yaml",
		"kustomize/stage/pod/general/pod-complete.yaml",
		"kustomize/stage/pod/fast/pod-delete.yaml",
	} {
		raw, err := os.ReadFile(filepath.Join(module, f)) //nolint:gosec // a module file
		if err != nil {
			return "", fmt.Errorf("read kwok's stage %s: %w", f, err)
		}
		docs = append(docs, strings.TrimSpace(string(raw)))
	}
	out := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(out, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600); err != nil {
		return "", err
	}
	return out, nil
}

// writeCA writes a self-signed CA, the cluster's signer of certificate
// requests, as PEM files.
func writeCA(certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "delivery-test-signer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// HostsFile renders names and their addresses as an /etc/hosts.
func HostsFile(hosts map[string]string) string {
	names := make([]string, 0, len(hosts))
	for name := range hosts {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for _, name := range names {
		fmt.Fprintf(&b, "%s %s\n", hosts[name], name)
	}
	return b.String()
}

// PrivateHosts returns the command that runs args seeing hosts as
// /etc/hosts, in a user and mount namespace of its own (util-linux's
// unshare), as a cluster's DNS would resolve its Services; the program
// itself is unchanged. It fails where the system allows no such namespace.
func PrivateHosts(ctx context.Context, hosts string, args []string) ([]string, error) {
	wrap := func(then ...string) []string {
		return append([]string{"unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
			`mount --bind "$1" /etc/hosts && shift && exec "$@"`, "sh", hosts}, then...)
	}
	probe := wrap("true")
	if out, err := exec.CommandContext(ctx, probe[0], probe[1:]...).CombinedOutput(); err != nil { //nolint:gosec // fixed arguments
		return nil, fmt.Errorf("no private /etc/hosts on this system (unshare --user --map-root-user --mount): %w: %s", err, out)
	}
	return wrap(args...), nil
}
