package testenv

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NATSVersion is the NATS server scripts/test-binaries.sh builds.
const NATSVersion = "v2.15.2"

// NATSBuildCommand builds the NATS server; every failure to find it names it.
const NATSBuildCommand = "scripts/test-binaries.sh nats (make test runs it)"

// NATSBinary is the cached NATS server: NATS_SERVER_BINARY when set, else the
// file scripts/test-binaries.sh writes.
func NATSBinary() (string, error) {
	return cachedBinary("NATS_SERVER_BINARY", "nats-server-"+NATSVersion, "nats-server", "NATS server", NATSBuildCommand)
}

// NATS is one running nats-server with JetStream at a loopback address of
// its own, its store in a folder of its own. In a cluster it is one of the
// peers, and a test may stop it and start it again on the same ports and
// store: at its own address no server another test starts on 127.0.0.1
// takes those ports while it is down.
type NATS struct {
	// URL is what a client dials: nats://host:port.
	URL string
	// StoreDir holds the server's JetStream store.
	StoreDir string

	name                    string
	host                    string
	port, monitor, clusterP int
	routes                  []string // the other peers' route URLs; empty alone
	bin                     string

	mu   sync.Mutex
	proc *process
	log  *LogBuffer
}

// StartNATS starts one JetStream server on a fresh store; Stop ends it and
// removes the store.
func StartNATS(ctx context.Context) (*NATS, error) {
	bin, err := NATSBinary()
	if err != nil {
		return nil, err
	}
	return onFreePort(func() (*NATS, error) {
		n, err := newNATS(bin, "mesh-0")
		if err != nil {
			return nil, err
		}
		if err := n.Start(ctx); err != nil {
			_ = n.Remove()
			return nil, err
		}
		return n, nil
	})
}

func newNATS(bin, name string) (*NATS, error) {
	host := randomLoopback().String()
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePortOn(host)
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	store, err := os.MkdirTemp("", "nats-store-")
	if err != nil {
		return nil, err
	}
	return &NATS{
		URL: "nats://" + net.JoinHostPort(host, strconv.Itoa(ports[0])), StoreDir: store,
		name: name, host: host, port: ports[0], monitor: ports[1], clusterP: ports[2], bin: bin,
	}, nil
}

// Start runs the server (again, after Stop) and waits until it answers its
// health check, JetStream included.
func (n *NATS) Start(ctx context.Context) error {
	args := []string{"-a", n.host, "-p", strconv.Itoa(n.port), "-m", strconv.Itoa(n.monitor),
		"-js", "-sd", n.StoreDir, "-n", n.name}
	if len(n.routes) > 0 {
		args = append(args, "--cluster_name", "mesh", "--cluster", "nats://"+net.JoinHostPort(n.host, strconv.Itoa(n.clusterP)),
			"--routes", strings.Join(n.routes, ","))
	}
	cmd := exec.Command(n.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	log := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := startProcess(cmd)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proc, n.log = proc, log
	n.mu.Unlock()
	if err := n.waitHealthy(ctx); err != nil {
		n.Stop()
		return err
	}
	return nil
}

// waitHealthy polls /healthz until the server and its JetStream answer ok. A
// peer of a cluster is healthy once it has joined the meta group.
func (n *NATS) waitHealthy(ctx context.Context) error {
	return n.proc.awaitHTTP(ctx, "nats-server", n.URL, "http://"+net.JoinHostPort(n.host, strconv.Itoa(n.monitor))+"/healthz", 50*time.Millisecond, n.log)
}

// Stop ends the server, keeping its store so Start brings it back as it was.
func (n *NATS) Stop() {
	n.mu.Lock()
	proc := n.proc
	n.proc = nil
	n.mu.Unlock()
	if proc != nil {
		proc.terminate()
	}
}

// Remove stops the server and removes its store.
func (n *NATS) Remove() error {
	n.Stop()
	return os.RemoveAll(n.StoreDir)
}

// Log is what the server printed since it last started.
func (n *NATS) Log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log == nil {
		return ""
	}
	return n.log.String()
}

// NewNATS starts a JetStream server for this test and removes it when the
// test ends. A test that cannot have one fails, naming the command that
// builds it.
func NewNATS(t testing.TB) *NATS {
	t.Helper()
	n := forTest(t, 2*time.Minute, "no NATS server for this test", StartNATS)
	t.Cleanup(func() { _ = n.Remove() })
	return n
}

// NATSCluster is JetStream servers routed to one another as one cluster,
// for the tests that stop a peer in the middle of the writes.
type NATSCluster struct {
	Peers []*NATS
}

// StartNATSCluster starts size peers at once (a peer is healthy only once
// the meta group has its quorum, so they cannot start one by one); Remove
// ends them.
func StartNATSCluster(ctx context.Context, size int) (*NATSCluster, error) {
	bin, err := NATSBinary()
	if err != nil {
		return nil, err
	}
	c := &NATSCluster{}
	for i := range size {
		n, err := newNATS(bin, "mesh-"+strconv.Itoa(i))
		if err != nil {
			_ = c.Remove()
			return nil, err
		}
		c.Peers = append(c.Peers, n)
	}
	for _, n := range c.Peers {
		for _, other := range c.Peers {
			if other != n {
				n.routes = append(n.routes, "nats://"+net.JoinHostPort(other.host, strconv.Itoa(other.clusterP)))
			}
		}
	}
	errs := make(chan error, size)
	for _, n := range c.Peers {
		go func() { errs <- n.Start(ctx) }()
	}
	for range size {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		_ = c.Remove()
		return nil, err
	}
	return c, nil
}

// URLs is every peer's URL, comma-joined as nats.Connect takes them, so a
// client goes on at another peer when one stops.
func (c *NATSCluster) URLs() string {
	urls := make([]string, len(c.Peers))
	for i, n := range c.Peers {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// Peer is the peer of a server name (mesh-<i>), as JetStream names a
// stream's leader; nil for none.
func (c *NATSCluster) Peer(name string) *NATS {
	for _, n := range c.Peers {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Remove stops every peer and removes its store.
func (c *NATSCluster) Remove() error {
	var err error
	for _, n := range c.Peers {
		err = errors.Join(err, n.Remove())
	}
	return err
}

// NewNATSCluster starts a cluster of size peers for this test and removes
// it when the test ends.
func NewNATSCluster(t testing.TB, size int) *NATSCluster {
	t.Helper()
	c := forTest(t, 2*time.Minute, "no NATS cluster for this test", func(ctx context.Context) (*NATSCluster, error) { return StartNATSCluster(ctx, size) })
	t.Cleanup(func() { _ = c.Remove() })
	return c
}
