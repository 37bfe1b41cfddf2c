package postgrescatalog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const (
	adminPath  = "secret/data/platform/postgres-admin"
	connection = "platform-postgres"
)

// fixture is a real PostgreSQL and a real Vault whose database secrets
// engine issues logins on that PostgreSQL, as the platform configures it.
type fixture struct {
	pg     *testenv.Postgres
	vault  *testenv.Vault
	tracer *testenv.StatementLog
	writes *countingVault
	log    bytes.Buffer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{pg: testenv.StartPostgres(t), vault: testenv.NewVault(t), tracer: &testenv.StatementLog{}}
	f.vault.ConfigureDatabaseEngine(t, f.pg, "database", connection, adminPath)
	f.writes = &countingVault{Vault: &VaultClient{API: f.vault.Client}}
	return f
}

// catalog is a catalog of projects on the fixture's server.
func (f *fixture) catalog(projects ...string) *Catalog {
	c := &Catalog{
		Server:    Server{Host: f.pg.Host, Port: f.pg.Port, MaintenanceDatabase: "postgres", SSLMode: "disable"},
		AdminPath: adminPath,
		Vault:     VaultRefs{Mount: "database", Connection: connection},
	}
	for _, p := range projects {
		c.Projects = append(c.Projects, Entry(p, "database"))
	}
	return c
}

// apply runs the catalog once and returns the run's summary, the statements
// it sent and its Vault writes.
func (f *fixture) apply(t testing.TB, c *Catalog) (Summary, []string, int, error) {
	t.Helper()
	f.tracer.Reset()
	f.writes.reset()
	login, err := f.writes.ReadAdminLogin(context.Background(), c.AdminPath)
	if err != nil {
		t.Fatalf("read the admin login: %v", err)
	}
	connector := Connector{Server: c.Server, Login: login, Tracer: f.tracer}
	a := &Applier{Catalog: c, Connect: connector.Connect, Vault: f.writes, Log: slog.New(slog.NewJSONHandler(&f.log, nil))}
	sum, err := a.Apply(context.Background())
	return sum, f.tracer.All(), f.writes.count(), err
}

// mustApply applies and fails the test on any error.
func (f *fixture) mustApply(t testing.TB, c *Catalog) (Summary, []string, int) {
	t.Helper()
	sum, statements, writes, err := f.apply(t, c)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return sum, statements, writes
}

// creds reads a fresh login from database/creds/<role>.
func (f *fixture) creds(t testing.TB, role string) (user, password string) {
	t.Helper()
	secret, err := f.vault.Client.Logical().Read("database/creds/" + role)
	if err != nil || secret == nil {
		t.Fatalf("read database/creds/%s: %v", role, err)
	}
	return secret.Data["username"].(string), secret.Data["password"].(string)
}

// connectAs opens a connection to database with a login.
func (f *fixture) connectAs(t testing.TB, database, user, password string) *pgx.Conn {
	t.Helper()
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password),
		Host: net.JoinHostPort(f.pg.Host, strconv.Itoa(f.pg.Port)), Path: "/" + database, RawQuery: "sslmode=disable"}
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", database, user, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// changes are the statements that change something: neither reads, nor
// the ones pgx sends to open and close a transaction, nor the job's lock.
func changes(statements []string) []string {
	var out []string
	for _, s := range statements {
		switch {
		case isRead(s), s == "begin", s == "commit", s == "rollback", s == "SELECT pg_advisory_lock($1)":
		default:
			out = append(out, s)
		}
	}
	return out
}

func isRead(s string) bool {
	s = strings.ToUpper(strings.TrimSpace(s))
	return strings.HasPrefix(s, "WITH ") || strings.HasPrefix(s, "WITH\n")
}

// countingVault counts the database roles written through it.
type countingVault struct {
	Vault
	mu     sync.Mutex
	writes int
	fail   error
}

func (c *countingVault) WriteDatabaseRole(ctx context.Context, path string, role DatabaseRole) error {
	c.mu.Lock()
	c.writes++
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.Vault.WriteDatabaseRole(ctx, path, role)
}

func (c *countingVault) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = 0
}

func (c *countingVault) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// psqlOne runs one query as the superuser and returns its trimmed output.
func (f *fixture) psqlOne(t testing.TB, database, sql string) string {
	t.Helper()
	return strings.TrimSpace(f.pg.Psql(t, database, sql))
}

func fmtList(s []string) string { return fmt.Sprintf("%q", s) }
