package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

// NATSTrust is what a server in operator mode trusts: the operator's JWT,
// the system account's public key, and the account JWTs its full resolver
// starts with (the system account's among them). A user of those accounts
// connects with its own JWT; no other does.
type NATSTrust struct {
	OperatorJWT   string
	SystemAccount string
	Accounts      []string
}

// OperatorNATS is the built nats-server in operator mode with JetStream and
// a full resolver, configured from a file as an operator deploys it (the
// resolver_preload nsc writes), so a test holds the mesh's credentials to
// the very server a fleet runs, not only to the embedded one.
type OperatorNATS struct {
	// URL is what a client dials: nats://host:port.
	URL string

	n    *NATS
	conf string
	dir  string
}

// StartOperatorNATS starts the server on a fresh store and resolver folder;
// Remove ends it and removes both.
func StartOperatorNATS(ctx context.Context, trust NATSTrust) (*OperatorNATS, error) {
	bin, err := NATSBinary()
	if err != nil {
		return nil, err
	}
	return onFreePort(func() (*OperatorNATS, error) {
		n, err := newNATS(bin, "mesh-operator")
		if err != nil {
			return nil, err
		}
		o := &OperatorNATS{URL: n.URL, n: n}
		if err := o.configure(trust); err != nil {
			_ = o.Remove()
			return nil, err
		}
		if err := o.Start(ctx); err != nil {
			_ = o.Remove()
			return nil, err
		}
		return o, nil
	})
}

// configure writes the server's configuration: the operator's JWT in a file
// beside it, the full resolver's folder, and every account preloaded by its
// public key, which is read from the account's own JWT.
func (o *OperatorNATS) configure(trust NATSTrust) error {
	dir, err := os.MkdirTemp("", "nats-operator-")
	if err != nil {
		return err
	}
	o.dir = dir
	operator := filepath.Join(dir, "operator.jwt")
	if err := os.WriteFile(operator, []byte(trust.OperatorJWT), 0o600); err != nil {
		return err
	}
	preload := map[string]string{}
	for _, token := range trust.Accounts {
		claims, err := jwt.DecodeAccountClaims(token)
		if err != nil {
			return fmt.Errorf("an account the resolver is to start with: %w", err)
		}
		preload[claims.Subject] = token
	}
	keys := make([]string, 0, len(preload))
	for k := range preload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var conf strings.Builder
	fmt.Fprintf(&conf, "server_name: %q\nlisten: %q\nhttp: %q\n", o.n.name,
		net.JoinHostPort(o.n.host, strconv.Itoa(o.n.port)), net.JoinHostPort(o.n.host, strconv.Itoa(o.n.monitor)))
	fmt.Fprintf(&conf, "jetstream {\n  store_dir: %q\n}\n", o.n.StoreDir)
	fmt.Fprintf(&conf, "operator: %q\nsystem_account: %q\n", operator, trust.SystemAccount)
	// A full resolver takes pushed accounts on $SYS.REQ.CLAIMS.UPDATE and
	// keeps them in its folder, as the mesh's bootstrap asks.
	fmt.Fprintf(&conf, "resolver {\n  type: full\n  dir: %q\n  allow_delete: false\n  interval: \"2m\"\n  timeout: \"5s\"\n}\n",
		filepath.Join(dir, "resolver"))
	conf.WriteString("resolver_preload {\n")
	for _, k := range keys {
		fmt.Fprintf(&conf, "  %s: %q\n", k, preload[k])
	}
	conf.WriteString("}\n")
	o.conf = filepath.Join(dir, "nats.conf")
	return os.WriteFile(o.conf, []byte(conf.String()), 0o600)
}

// Start runs the server (again, after Stop) on its configuration and waits
// until it answers its health check, JetStream included.
func (o *OperatorNATS) Start(ctx context.Context) error {
	cmd := exec.Command(o.n.bin, "-c", o.conf)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	log := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := startProcess(cmd)
	if err != nil {
		return err
	}
	o.n.mu.Lock()
	o.n.proc, o.n.log = proc, log
	o.n.mu.Unlock()
	if err := o.n.waitHealthy(ctx); err != nil {
		o.n.Stop()
		return err
	}
	return nil
}

// Stop ends the server, keeping its store and resolver folder.
func (o *OperatorNATS) Stop() { o.n.Stop() }

// Log is what the server printed since it last started.
func (o *OperatorNATS) Log() string { return o.n.Log() }

// Remove stops the server and removes its store, configuration and
// resolver folder.
func (o *OperatorNATS) Remove() error {
	err := o.n.Remove()
	if o.dir != "" {
		if rmErr := os.RemoveAll(o.dir); err == nil {
			err = rmErr
		}
	}
	return err
}

// NewOperatorNATS starts the server in operator mode for this test and
// removes it when the test ends. A test that cannot have one fails, naming
// the command that builds it.
func NewOperatorNATS(t testing.TB, trust NATSTrust) *OperatorNATS {
	t.Helper()
	o := forTest(t, 2*time.Minute, "no NATS server in operator mode for this test", func(ctx context.Context) (*OperatorNATS, error) { return StartOperatorNATS(ctx, trust) })
	t.Cleanup(func() { _ = o.Remove() })
	return o
}
