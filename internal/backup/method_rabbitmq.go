package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// maxDefinitions bounds the definitions document read into memory; a broker
// with more than this in definitions alone is not one this method serves.
const maxDefinitions = 256 << 20

// RabbitMQ fetches a broker's definitions (users, vhosts, permissions,
// policies, queues, exchanges, bindings) from the management API.
//
// It speaks HTTP itself because there is no maintained Go client for the
// management API (amqp091-go speaks AMQP only, and the definitions are not
// reachable over AMQP); the one request it makes is a plain authenticated GET.
type RabbitMQ struct {
	Host     string
	Port     int
	Username string
	Password string
	Client   *http.Client // nil uses a client with a 5-minute timeout
}

// rabbitmqVariables are what RabbitMQ.Configure reads.
var rabbitmqVariables = []settings.Variable{
	{Name: "BACKUP_HOST", Default: settings.Required, Meaning: "the management API's host"},
	{Name: "BACKUP_PORT", Default: "15672", Meaning: "its port"},
	{Name: "RABBITMQ_USERNAME", Default: settings.Required, Meaning: "the management API login"},
	{Name: "RABBITMQ_PASSWORD", Default: settings.Required, Meaning: "its password"},
}

// Name implements Method.
func (RabbitMQ) Name() string { return "rabbitmq" }

// Summary implements Method.
func (RabbitMQ) Summary() string { return "Save a RabbitMQ broker's definitions" }

// Extension implements Method: the gzipped definitions document.
func (RabbitMQ) Extension() string { return ".json.gz" }

// Variables implements Method.
func (RabbitMQ) Variables() []settings.Variable { return rabbitmqVariables }

// Configure implements Method.
func (RabbitMQ) Configure(env *settings.Reader, _ string, _ *slog.Logger) (Method, error) {
	return RabbitMQ{
		Host:     env.Required("BACKUP_HOST"),
		Port:     env.PositiveInt("BACKUP_PORT", 15672),
		Username: env.Required("RABBITMQ_USERNAME"),
		Password: env.Required("RABBITMQ_PASSWORD"),
	}, nil
}

// Restore implements Method: the definitions become one file in target.
func (RabbitMQ) Restore(_ context.Context, read ReadFunc, work, target string, into *Restored) error {
	return restoreOneFile(read, work, target, into)
}

// Check implements Method: the restored document must still be definitions
// a broker would import, as Write required of it.
func (RabbitMQ) Check(_ context.Context, restored *Restored) error {
	if err := checkFile(restored.Path, func(r io.Reader) error {
		body, err := io.ReadAll(io.LimitReader(r, maxDefinitions+1))
		if err != nil {
			return err
		}
		_, err = ParseDefinitions(body)
		return err
	}); err != nil {
		return err
	}
	restored.Checks = append(restored.Checks, "the definitions parse")
	return nil
}

// Describe implements Method.
func (RabbitMQ) Describe(restored Restored) (what, where string) {
	return "the definitions", restored.Path
}

// LoadHint implements Method: the broker imports them itself, from its
// command line or its management API.
func (RabbitMQ) LoadHint(path string) string {
	return "restored " + path + "; import the definitions with either of:\n" +
		"  rabbitmqctl import_definitions " + shellQuote(path) + "\n" +
		"  curl --fail -u \"$RABBITMQ_USERNAME:$RABBITMQ_PASSWORD\" -H 'content-type: application/json' --data-binary @" +
		shellQuote(path) + " http://<broker>:15672/api/definitions\n"
}

// Write fetches the definitions, checks that they parse as definitions, and
// writes them to w exactly as the broker sent them.
func (r RabbitMQ) Write(ctx context.Context, w io.Writer) error {
	body, err := r.fetch(ctx)
	if err != nil {
		return err
	}
	if _, err := ParseDefinitions(body); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("write the definitions: %w", err)
	}
	return nil
}

func (r RabbitMQ) fetch(ctx context.Context) ([]byte, error) {
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Minute}
	}
	endpoint := "http://" + net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) + "/api/definitions"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(r.Username, r.Password)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the definitions: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDefinitions+1))
	if err != nil {
		return nil, fmt.Errorf("read the definitions: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the definitions: %s: %s", resp.Status, firstLine(body))
	}
	if len(body) > maxDefinitions {
		return nil, fmt.Errorf("the definitions exceed %d bytes", maxDefinitions)
	}
	return body, nil
}

// Definitions is the part of the management API's definitions document the
// method checks; the document is stored as received, so fields not named
// here are kept.
type Definitions struct {
	RabbitVersion    string            `json:"rabbit_version"`
	RabbitMQVersion  string            `json:"rabbitmq_version"`
	Users            []DefinedUser     `json:"users"`
	Vhosts           []DefinedVhost    `json:"vhosts"`
	Permissions      []json.RawMessage `json:"permissions"`
	TopicPermissions []json.RawMessage `json:"topic_permissions"`
	Parameters       []json.RawMessage `json:"parameters"`
	GlobalParameters []json.RawMessage `json:"global_parameters"`
	Policies         []json.RawMessage `json:"policies"`
	Queues           []DefinedQueue    `json:"queues"`
	Exchanges        []DefinedExchange `json:"exchanges"`
	Bindings         []DefinedBinding  `json:"bindings"`
}

// DefinedUser is a user in the definitions.
type DefinedUser struct {
	Name string `json:"name"`
}

// DefinedVhost is a virtual host in the definitions.
type DefinedVhost struct {
	Name string `json:"name"`
}

// DefinedQueue is a queue in the definitions.
type DefinedQueue struct {
	Name    string `json:"name"`
	Vhost   string `json:"vhost"`
	Durable bool   `json:"durable"`
}

// DefinedExchange is an exchange in the definitions.
type DefinedExchange struct {
	Name  string `json:"name"`
	Vhost string `json:"vhost"`
	Type  string `json:"type"`
}

// DefinedBinding is a binding in the definitions.
type DefinedBinding struct {
	Source          string `json:"source"`
	Vhost           string `json:"vhost"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// ParseDefinitions decodes a definitions document and checks it is one: a
// single JSON object naming the broker's version, with the vhosts, users,
// queues, exchanges and bindings lists the management API always exports,
// each entry naming what it is. Anything else (an error page, a truncated
// answer, a proxy's login form) is refused.
func ParseDefinitions(body []byte) (Definitions, error) {
	var present map[string]json.RawMessage
	if err := json.Unmarshal(body, &present); err != nil {
		return Definitions{}, fmt.Errorf("the definitions are not a JSON object: %w", err)
	}
	for _, key := range []string{"users", "vhosts", "queues", "exchanges", "bindings"} {
		raw, ok := present[key]
		if !ok || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			return Definitions{}, fmt.Errorf("the definitions lack the %q list", key)
		}
	}
	var d Definitions
	if err := json.Unmarshal(body, &d); err != nil {
		return Definitions{}, fmt.Errorf("the definitions do not decode: %w", err)
	}
	if d.RabbitVersion == "" && d.RabbitMQVersion == "" {
		return Definitions{}, errors.New("the definitions name no broker version")
	}
	if len(d.Vhosts) == 0 {
		return Definitions{}, errors.New("the definitions hold no vhost; a broker always has one")
	}
	for i, u := range d.Users {
		if u.Name == "" {
			return Definitions{}, fmt.Errorf("user %d has no name", i)
		}
	}
	for i, v := range d.Vhosts {
		if v.Name == "" {
			return Definitions{}, fmt.Errorf("vhost %d has no name", i)
		}
	}
	for i, q := range d.Queues {
		if q.Name == "" || q.Vhost == "" {
			return Definitions{}, fmt.Errorf("queue %d lacks a name or vhost", i)
		}
	}
	for i, e := range d.Exchanges {
		if e.Name == "" || e.Vhost == "" || e.Type == "" {
			return Definitions{}, fmt.Errorf("exchange %d lacks a name, vhost or type", i)
		}
	}
	for i, b := range d.Bindings {
		if b.Vhost == "" || b.Destination == "" || (b.DestinationType != "queue" && b.DestinationType != "exchange") {
			return Definitions{}, fmt.Errorf("binding %d lacks a vhost, destination or destination type", i)
		}
	}
	return d, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
