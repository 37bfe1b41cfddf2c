package backup

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// declare creates the users, vhosts, permissions, exchanges, queues and
// bindings a broker's backup must carry.
func declare(t *testing.T, r *testenv.RabbitMQ) {
	t.Helper()
	ctx := context.Background()
	calls := []struct {
		method, path string
		body         any
	}{
		{http.MethodPut, "/api/vhosts/orders", map[string]any{"description": "orders"}},
		{http.MethodPut, "/api/users/order-service", map[string]any{"password": "s3cret", "tags": "monitoring"}},
		{http.MethodPut, "/api/permissions/orders/order-service", map[string]any{"configure": "^order", "write": ".*", "read": ".*"}},
		{http.MethodPut, "/api/exchanges/orders/events", map[string]any{"type": "topic", "durable": true}},
		{http.MethodPut, "/api/queues/orders/order.created", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "classic"}}},
		{http.MethodPost, "/api/bindings/orders/e/events/q/order.created", map[string]any{"routing_key": "order.*.created"}},
		{http.MethodPut, "/api/policies/orders/ttl", map[string]any{"pattern": "^order", "definition": map[string]any{"message-ttl": 60000}, "apply-to": "queues"}},
	}
	for _, c := range calls {
		if err := r.API(ctx, c.method, c.path, c.body, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// comparable keeps what a restore must bring back, sorted.
func comparable(d Definitions) []string {
	var out []string
	for _, u := range d.Users {
		out = append(out, "user "+u.Name)
	}
	for _, v := range d.Vhosts {
		out = append(out, "vhost "+v.Name)
	}
	for _, q := range d.Queues {
		out = append(out, "queue "+q.Vhost+"/"+q.Name)
	}
	for _, e := range d.Exchanges {
		out = append(out, "exchange "+e.Vhost+"/"+e.Name+" "+e.Type)
	}
	for _, b := range d.Bindings {
		out = append(out, "binding "+b.Vhost+"/"+b.Source+"->"+b.DestinationType+":"+b.Destination+" "+b.RoutingKey)
	}
	out = append(out, "permissions "+strconv.Itoa(len(d.Permissions)), "policies "+strconv.Itoa(len(d.Policies)))
	slices.Sort(out)
	return out
}

func TestRabbitMQDefinitionsRestoreIntoAFreshBroker(t *testing.T) {
	broker := testenv.StartRabbitMQ(t)
	declare(t, broker)
	dir := t.TempDir()
	method := RabbitMQ{Host: broker.Host, Port: broker.ManagementPort, Username: broker.Username, Password: broker.Password}
	result, err := Job{Dir: dir, Method: method, Retain: 3}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(result.Path), "rabbitmq-") || !strings.HasSuffix(result.Path, ".json.gz") {
		t.Fatalf("generation named %s", result.Path)
	}
	body := gunzipFile(t, result.Path)
	saved, err := ParseDefinitions(body)
	if err != nil {
		t.Fatal(err)
	}
	want := comparable(saved)
	for _, item := range []string{"user order-service", "vhost orders", "queue orders/order.created",
		"exchange orders/events topic", "binding orders/events->queue:order.created order.*.created"} {
		if !slices.Contains(want, item) {
			t.Fatalf("the backup lacks %q: %v", item, want)
		}
	}

	// A fresh broker loads the backup through the same API and then holds the
	// same definitions.
	if err := broker.Stop(); err != nil {
		t.Fatal(err)
	}
	fresh := testenv.StartRabbitMQ(t)
	ctx := context.Background()
	if err := fresh.API(ctx, http.MethodPost, "/api/definitions", jsonRaw(body), nil); err != nil {
		t.Fatal(err)
	}
	var restoredRaw jsonRaw
	if err := fresh.API(ctx, http.MethodGet, "/api/definitions", nil, &restoredRaw); err != nil {
		t.Fatal(err)
	}
	restored, err := ParseDefinitions(restoredRaw)
	if err != nil {
		t.Fatal(err)
	}
	if got := comparable(restored); !slices.Equal(got, want) {
		t.Fatalf("restored definitions differ:\n got %v\nwant %v", got, want)
	}

	// A wrong password is a failed run: no new generation.
	method.Password = "wrong"
	method.Port = fresh.ManagementPort
	_, err = Job{Dir: dir, Method: method, Retain: 3, Now: func() time.Time { return time.Now().Add(time.Hour) }}.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong password gave %v", err)
	}
	assertFiles(t, dir, filepath.Base(result.Path))
}

// jsonRaw passes JSON through the test broker's API helper untouched.
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }

func (j *jsonRaw) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}

func TestRabbitMQRefusesWhatIsNotDefinitions(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
		want   string
	}{
		"an error page":        {http.StatusBadGateway, "<html>bad gateway</html>", "502"},
		"a login form":         {http.StatusOK, "<html><form>", "not a JSON object"},
		"a truncated document": {http.StatusOK, `{"rabbit_version":"3.10.8","users":[`, "not a JSON object"},
		"an empty object":      {http.StatusOK, `{}`, `lack the "users"`},
	}
	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/definitions" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(a.status)
				_, _ = w.Write([]byte(a.body))
			}))
			defer srv.Close()
			host, port := splitHostPort(t, srv.URL)
			dir := t.TempDir()
			_, err := Job{Dir: dir, Method: RabbitMQ{Host: host, Port: port, Username: "u", Password: "p"}, Retain: 1}.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), a.want) {
				t.Fatalf("got %v, want an error with %q", err, a.want)
			}
			assertFiles(t, dir)
		})
	}
}

func TestRabbitMQUnreachable(t *testing.T) {
	dir := t.TempDir()
	_, err := Job{Dir: dir, Method: RabbitMQ{Host: "127.0.0.1", Port: 1}, Retain: 1}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "fetch the definitions") {
		t.Fatalf("got %v", err)
	}
	assertFiles(t, dir)
}

func FuzzParseDefinitions(f *testing.F) {
	seeds, err := os.ReadDir("testdata")
	if err == nil {
		for _, s := range seeds {
			if b, err := os.ReadFile(filepath.Join("testdata", s.Name())); err == nil && strings.HasSuffix(s.Name(), ".json") {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"rabbit_version":"3.10.8","users":[],"vhosts":[{"name":"/"}],"queues":[],"exchanges":[],"bindings":[]} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseDefinitions(body)
		if err != nil {
			return
		}
		if len(d.Vhosts) == 0 || (d.RabbitVersion == "" && d.RabbitMQVersion == "") {
			t.Fatalf("accepted definitions without a vhost or version: %q", body)
		}
		if !bytes.Contains(body, []byte("vhosts")) {
			t.Fatalf("accepted a document without vhosts: %q", body)
		}
	})
}
