package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// The gate answers Flagger by its pod's address, and /metrics the scraper by
// its own: the cluster gives Flagger's Pod object the Flagger process's
// address, and examples/demo/platform.yaml gives the scraper's pod its own.
const (
	flaggerAddress = testenv.FlaggerAddress
	scraperAddress = "127.0.0.2"
	// outsiderAddress is a loopback address no pod has.
	outsiderAddress = "127.0.0.3"
)

// gateHost is the name deploy-kit's webhook URLs reach the gate by.
const gateHost = "release-gate." + gateNS + ".svc.cluster.local"

// gatePort is the port those URLs name.
const gatePort = 8080

// gateProcess is the release-gate binary running as a child process.
type gateProcess struct {
	url     string
	logFile string
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	logs    *testenv.LogBuffer
	exited  chan error
}

// startGate builds cmd/release-gate, gives it a kubeconfig that acts as its
// ServiceAccount (so it runs under exactly deploy/release-gate/rbac.yaml) and
// starts it at addr, where Flagger's /etc/hosts sends gateHost. The gate sees
// the members' Canary services through an /etc/hosts of its own, as a
// cluster's DNS would resolve them. It runs until runCtx ends or stop.
func startGate(ctx, runCtx context.Context, t *teller, addr string) (*gateProcess, error) {
	bin := filepath.Join(t.dir, "release-gate")
	t.say("Building ./cmd/release-gate...")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/release-gate") //nolint:gosec // into the demo's own folder
	build.Dir = t.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the release gate: %w: %s", err, out)
	}
	kubeconfig, err := t.cp.KubeconfigAs(t.dir, gateNS, "release-gate")
	if err != nil {
		return nil, err
	}
	hosts := filepath.Join(t.dir, "hosts")
	if err := os.WriteFile(hosts, []byte(testenv.HostsFile(t.members.hosts())), 0o600); err != nil {
		return nil, fmt.Errorf("write the hosts file: %w", err)
	}
	args, err := testenv.PrivateHosts(ctx, hosts, []string{bin})
	if err != nil {
		return nil, err
	}
	g := &gateProcess{url: "http://" + addr, logFile: filepath.Join(t.dir, "release-gate.log"), logs: &testenv.LogBuffer{}, exited: make(chan error, 1)}
	// The gate drains on SIGTERM, so ending its context sends that rather
	// than a kill; the kernel sends it too should the demo die first.
	gateCtx, cancel := context.WithCancel(runCtx)
	g.cancel = cancel
	g.cmd = exec.CommandContext(gateCtx, args[0], args[1:]...) //nolint:gosec // the binary just built, under the system's unshare
	g.cmd.Cancel = func() error { return g.cmd.Process.Signal(syscall.SIGTERM) }
	g.cmd.WaitDelay = drainWait
	// Every variable the gate reads is set here, so that one left in the
	// shell (a FLAGGER_NAMESPACE of the user's own cluster) cannot point the
	// demo's gate elsewhere.
	g.cmd.Env = append(os.Environ(),
		"ADDR="+addr,
		"KUBECONFIG="+kubeconfig,
		"FLAGGER_NAMESPACE="+testenv.FlaggerNamespace,
		"FLAGGER_SELECTOR=app.kubernetes.io/instance=flagger",
		"FLAGGER_SERVICE_ACCOUNT=flagger",
		"GATE_NAMESPACE="+gateNS,
		"METRICS_SCRAPER_NAMESPACE=monitoring",
		"METRICS_SCRAPER_SELECTOR=app.kubernetes.io/name=prometheus",
		"METRICS_SCRAPER_SERVICE_ACCOUNT=prometheus",
	)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	logFile, err := os.Create(g.logFile)
	if err != nil {
		return nil, fmt.Errorf("create the gate's log: %w", err)
	}
	g.cmd.Stdout = io.MultiWriter(logFile, g.logs)
	g.cmd.Stderr = g.cmd.Stdout
	if err := g.cmd.Start(); err != nil {
		cancel()
		_ = logFile.Close()
		return nil, fmt.Errorf("start the release gate: %w", err)
	}
	go func() {
		err := g.cmd.Wait()
		_ = logFile.Close()
		g.exited <- err
	}()
	if err := g.waitReady(ctx); err != nil {
		g.stop()
		return nil, err
	}
	t.say("release-gate serves on %s under its grant (deploy/release-gate/rbac.yaml);", g.url)
	t.say("Flagger reaches it as %s:%d, the name deploy-kit's webhooks use.", gateHost, gatePort)
	t.say("Its own traffic reaches the members' Canary services through a private /etc/hosts:")
	for _, m := range t.members.all() {
		t.say("  %s -> %s", m.host, m.addr)
	}
	return g, nil
}

func (g *gateProcess) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		status, _, err := g.call(ctx, http.MethodGet, flaggerAddress, "/readyz", nil)
		if err == nil && status == http.StatusOK {
			return nil
		}
		select {
		case err := <-g.exited:
			g.exited <- err // for stop, which waits on it too
			return fmt.Errorf("the release gate exited (%w):\n%s", err, g.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the release gate was not ready within a minute:\n%s", g.logs.String())
		}
	}
}

// drainWait is how long the gate may drain after SIGTERM before it is killed;
// the gate's own drain bound is 20 s.
const drainWait = 30 * time.Second

// stop sends SIGTERM and waits for the gate to drain.
func (g *gateProcess) stop() {
	g.cancel()
	err := <-g.exited
	g.exited <- err
}

// call makes one request to the gate from the loopback address from, as the
// pod with that address would, and returns the status and the body.
func (g *gateProcess) call(ctx context.Context, method, from, path string, body []byte) (int, string, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true, Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// logLine returns the last line of the gate's log holding every one of
// parts, or "".
func (g *gateProcess) logLine(parts ...string) string {
	lines := strings.Split(g.logs.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		ok := lines[i] != ""
		for _, p := range parts {
			ok = ok && strings.Contains(lines[i], p)
		}
		if ok {
			return lines[i]
		}
	}
	return ""
}
