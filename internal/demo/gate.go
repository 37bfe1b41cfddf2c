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
// its own; examples/demo/platform.yaml gives the two pods these addresses.
const (
	flaggerAddress = "127.0.0.1"
	scraperAddress = "127.0.0.2"
	// outsiderAddress is a loopback address no pod has.
	outsiderAddress = "127.0.0.3"
)

// gateProcess is the release-gate binary running as a child process.
type gateProcess struct {
	url     string
	logFile string
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	logs    *testenv.LogBuffer
	exited  chan error
	// isolated is true when the gate resolves the members' Canary services
	// through the demo's hosts file.
	isolated bool
}

// startGate builds cmd/release-gate, gives it a kubeconfig that acts as its
// ServiceAccount (so it runs under exactly deploy/release-gate/rbac.yaml) and
// starts it on a free loopback port. It runs until runCtx ends or stop.
func startGate(ctx, runCtx context.Context, t *teller, cp *testenv.ControlPlane) (*gateProcess, error) {
	bin := filepath.Join(t.dir, "release-gate")
	t.say("Building ./cmd/release-gate...")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/release-gate") //nolint:gosec // into the demo's own folder
	build.Dir = t.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the release gate: %w: %s", err, out)
	}
	kubeconfig, err := cp.KubeconfigAs(t.dir, gateNS, "release-gate")
	if err != nil {
		return nil, err
	}
	addr, err := testenv.FreeAddress()
	if err != nil {
		return nil, err
	}
	hosts := filepath.Join(t.dir, "hosts")
	if err := os.WriteFile(hosts, []byte(t.members.hostsFile()), 0o600); err != nil {
		return nil, fmt.Errorf("write the hosts file: %w", err)
	}
	g := &gateProcess{url: "http://" + addr, logFile: filepath.Join(t.dir, "release-gate.log"), logs: &testenv.LogBuffer{}, exited: make(chan error, 1)}
	args, why := isolation(ctx, hosts, bin)
	g.isolated = why == ""
	// The gate drains on SIGTERM, so ending its context sends that rather
	// than a kill; the kernel sends it too should the demo die first.
	gateCtx, cancel := context.WithCancel(runCtx)
	g.cancel = cancel
	g.cmd = exec.CommandContext(gateCtx, args[0], args[1:]...) //nolint:gosec // the binary just built, or the system's unshare running it
	g.cmd.Cancel = func() error { return g.cmd.Process.Signal(syscall.SIGTERM) }
	g.cmd.WaitDelay = drainWait
	// Every variable the gate reads is set here, so that one left in the
	// shell (a FLAGGER_NAMESPACE of the user's own cluster) cannot point the
	// demo's gate elsewhere.
	g.cmd.Env = append(os.Environ(),
		"ADDR="+addr,
		"KUBECONFIG="+kubeconfig,
		"FLAGGER_NAMESPACE=delivery-system",
		"FLAGGER_SELECTOR=app.kubernetes.io/instance=flagger",
		"FLAGGER_SERVICE_ACCOUNT=flagger",
		"GATE_NAMESPACE=delivery-system",
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
	t.say("release-gate serves on %s under its grant (deploy/release-gate/rbac.yaml)", g.url)
	if g.isolated {
		t.say("its own traffic reaches the members' Canary services through a private /etc/hosts:")
		for _, m := range t.members.all() {
			t.say("  %s -> %s", m.host, m.addr)
		}
	} else {
		t.say("this machine gives no process a private /etc/hosts (%s):", why)
		t.say("the gate cannot resolve the members' Canary services, so its own traffic meets no answer")
	}
	return g, nil
}

// isolation returns the command that runs bin seeing hosts as /etc/hosts, in
// a mount namespace of its own, as a cluster's DNS would resolve the Canary
// services; the gate itself is unchanged. Where the system allows no such
// namespace it returns bin alone and says why.
func isolation(ctx context.Context, hosts, bin string) ([]string, string) {
	wrap := func(then string) []string {
		return []string{"unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
			`mount --bind "$1" /etc/hosts && exec "$2"`, "sh", hosts, then}
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return []string{bin}, "no true command"
	}
	probe := wrap(trueBin)
	if out, err := exec.CommandContext(ctx, probe[0], probe[1:]...).CombinedOutput(); err != nil { //nolint:gosec // fixed arguments
		return []string{bin}, strings.TrimSpace(string(out) + " " + err.Error())
	}
	return wrap(bin), ""
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
