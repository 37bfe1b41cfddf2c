package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RabbitMQBinDir holds Debian's real RabbitMQ scripts. The /usr/sbin wrappers
// switch user, after which the Erlang cookie in the private HOME no longer
// matches, so the tests run these directly.
const RabbitMQBinDir = "/usr/lib/rabbitmq/bin"

// rabbitNode is the only node name the broker starts under here; two brokers
// on one machine would clash on it, so brokers are serialised by rabbitLock
// across every test process.
const rabbitNode = "rabbit@localhost"

// RabbitMQ is a throwaway broker on 127.0.0.1 with its management API, and an
// administrator that may log in from anywhere.
type RabbitMQ struct {
	Host           string
	AMQPPort       int
	ManagementPort int
	Username       string
	Password       string

	dir      string
	env      []string
	epmdPort int
	server   *process
	lock     *os.File
}

// StartRabbitMQ starts a broker for this test and stops it when the test
// ends. Only one broker runs on the machine at a time: a second test waits
// for the first to stop. It fails, naming DepsCommand, when RabbitMQ is not
// installed.
func StartRabbitMQ(t testing.TB) *RabbitMQ {
	t.Helper()
	r := forTest(t, 5*time.Minute, "no RabbitMQ for this test", StartRabbitMQServer)
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop RabbitMQ: %v", err)
		}
	})
	return r
}

// StartRabbitMQServer starts a broker outside a test; the caller stops it.
func StartRabbitMQServer(ctx context.Context) (*RabbitMQ, error) {
	if _, err := os.Stat(filepath.Join(RabbitMQBinDir, "rabbitmq-server")); err != nil {
		return nil, fmt.Errorf("RabbitMQ is not installed (%s): install it with %s", RabbitMQBinDir, DepsCommand)
	}
	lock, err := rabbitLock(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "delivery-rabbitmq-")
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	r := &RabbitMQ{Host: "127.0.0.1", Username: "admin", Password: "rabbitmq-test-password", dir: dir, lock: lock}
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.Stop())
	}
	return r, nil
}

// rabbitLock holds a machine-wide lock for as long as the broker runs.
func rabbitLock(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "delivery-rabbitmq.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("another test's RabbitMQ did not stop in time: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *RabbitMQ) start(ctx context.Context) error {
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	r.AMQPPort, r.ManagementPort, r.epmdPort = ports[0], ports[1], ports[2]
	distPort := ports[3]
	for _, sub := range []string{"home", "mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(r.dir, sub), 0o700); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
management.tcp.ip = 127.0.0.1
management.tcp.port = %d
default_user = %s
default_pass = %s
loopback_users = none
`, r.AMQPPort, r.ManagementPort, r.Username, r.Password)
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[].\n", "rabbitmq-env.conf": ""}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	// A private epmd port keeps this broker's node registry apart from any
	// other Erlang node on the machine, and lets Stop kill only its own epmd.
	r.env = append(os.Environ(),
		"HOME="+filepath.Join(r.dir, "home"),
		"RABBITMQ_NODENAME="+rabbitNode,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(r.AMQPPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT="+strconv.Itoa(r.epmdPort),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "rabbit.pid"),
	)
	plugins := exec.CommandContext(ctx, filepath.Join(RabbitMQBinDir, "rabbitmq-plugins"), "enable", "--offline", "rabbitmq_management")
	plugins.Env = r.env
	if out, err := plugins.CombinedOutput(); err != nil {
		return fmt.Errorf("enable the management plugin: %w: %s", err, out)
	}
	logFile, err := os.Create(filepath.Join(r.dir, "server.out"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// Not CommandContext: the broker outlives the start deadline.
	server := exec.Command(filepath.Join(RabbitMQBinDir, "rabbitmq-server"))
	server.Env = r.env
	server.Stdout, server.Stderr = logFile, logFile
	if r.server, err = startProcess(server); err != nil {
		return err
	}
	for {
		if err := r.API(ctx, http.MethodGet, "/api/overview", nil, nil); err == nil {
			return nil
		}
		select {
		case <-r.server.exited():
			out, _ := os.ReadFile(filepath.Join(r.dir, "server.out"))
			return fmt.Errorf("rabbitmq-server exited while starting: %s", tail(out, 1500))
		case <-ctx.Done():
			return fmt.Errorf("the management API did not answer: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ManagementURL is the management API's base URL.
func (r *RabbitMQ) ManagementURL() string {
	return "http://" + net.JoinHostPort(r.Host, strconv.Itoa(r.ManagementPort))
}

// API calls the management API as the administrator, sending in as JSON
// when it is not nil and decoding the answer into out when it is not nil.
func (r *RabbitMQ) API(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.ManagementURL()+path, body)
	if err != nil {
		return err
	}
	req.SetBasicAuth(r.Username, r.Password)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(answer)))
	}
	if out != nil {
		return json.Unmarshal(answer, out)
	}
	return nil
}

// stopServer stops the broker with rabbitmqctl and waits for it to end.
// A broker that had ended before it was asked is an error naming how it
// ended and its last words, as a test's broker must not vanish; a
// rabbitmqctl that cannot reach a broker still running (a machine so busy
// its distribution times out) is not: the broker's group is ended with
// signals instead.
func (r *RabbitMQ) stopServer() error {
	if how := r.server.ended(); how != "" {
		out, _ := os.ReadFile(filepath.Join(r.dir, "server.out"))
		return fmt.Errorf("the broker had ended before it was stopped (%s): %s", how, tail(out, 1500))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := exec.CommandContext(ctx, filepath.Join(RabbitMQBinDir, "rabbitmqctl"), "-n", rabbitNode, "--timeout", "60", "stop")
	stop.Env = r.env
	if err := stop.Run(); err != nil {
		r.server.terminate()
		return nil
	}
	r.server.await(30 * time.Second)
	return nil
}

// Stop stops the broker and its epmd, removes its files and lets the next
// broker start.
func (r *RabbitMQ) Stop() error {
	var errs []error
	if r.server != nil {
		errs = append(errs, r.stopServer())
		r.server = nil
	}
	if r.epmdPort != 0 {
		epmd := exec.Command("epmd", "-port", strconv.Itoa(r.epmdPort), "-kill")
		epmd.Env = r.env
		_ = epmd.Run() // no epmd left to kill is what stopping wants
		r.epmdPort = 0
	}
	errs = append(errs, os.RemoveAll(r.dir))
	if r.lock != nil {
		errs = append(errs, r.lock.Close())
		r.lock = nil
	}
	return errors.Join(errs...)
}
