package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/postgrescatalog"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	jobNamespace = "data-system"
	jobAccount   = "postgres-catalog"
	connection   = "platform-postgres"
	adminPath    = "secret/data/data-system/platform-postgres-admin"
)

// fixture is the platform as the job meets it: a real PostgreSQL, a real
// Vault whose database secrets engine issues logins on it and whose
// Kubernetes auth reviews the job's token with the real API server, and the
// job's login role holding exactly the policy docs/postgres-catalog.md documents. The job
// reaches Vault through a proxy that counts every request.
type fixture struct {
	pg     *testenv.Postgres
	vault  *testenv.Vault
	proxy  *requestLog
	tracer *testenv.StatementLog
	env    map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cp := testenv.Shared(t)
	f := &fixture{pg: testenv.StartPostgres(t), vault: testenv.NewVault(t), proxy: &requestLog{}, tracer: &testenv.StatementLog{}}
	f.vault.ConfigureDatabaseEngine(t, f.pg, "database", connection, adminPath)
	tokenFile := f.vault.JobLogin(t, cp, jobNamespace, jobAccount, "postgres-catalog", postgrescatalog.JobPolicy(f.catalog()))
	target, err := url.Parse(f.vault.Addr)
	if err != nil {
		t.Fatal(err)
	}
	upstream := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.proxy.Add(r.Method + " " + r.URL.Path)
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	f.env = map[string]string{"VAULT_ADDR": proxy.URL, "TOKEN_FILE": tokenFile}
	return f
}

func (f *fixture) catalog(projects ...string) *postgrescatalog.Catalog {
	c := &postgrescatalog.Catalog{
		Server:    postgrescatalog.Server{Host: "127.0.0.1", Port: 5432, SSLMode: "disable"},
		AdminPath: adminPath,
		Vault:     postgrescatalog.VaultRefs{Mount: "database", Connection: connection},
		Projects:  []postgrescatalog.Project{},
	}
	if f.pg != nil {
		c.Server.Port = f.pg.Port
	}
	for _, p := range projects {
		c.Projects = append(c.Projects, postgrescatalog.Entry(p, "database"))
	}
	return c
}

func writeCatalog(t *testing.T, raw []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (f *fixture) catalogFile(t *testing.T, projects ...string) string {
	t.Helper()
	raw, err := json.Marshal(f.catalog(projects...))
	if err != nil {
		t.Fatal(err)
	}
	return writeCatalog(t, raw)
}

// run runs the job whole with the fixture's settings plus extra, and returns
// its exit code and log lines.
func (f *fixture) run(t *testing.T, catalogFile string, extra ...string) (int, []map[string]any) {
	t.Helper()
	env := map[string]string{"CATALOG_FILE": catalogFile}
	for k, v := range f.env {
		env[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	f.proxy.Reset()
	f.tracer.Reset()
	var out bytes.Buffer
	code := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard, &out, postgrescatalog.Connector{Tracer: f.tracer})
	return code, testenv.JSONLines(t, out.String())
}

// The job signs in with a real ServiceAccount token, applies a fresh
// catalog, and its second run sends PostgreSQL reads only and Vault no write.
func TestRunAppliesOnceThenNothing(t *testing.T) {
	f := newFixture(t)
	file := f.catalogFile(t, "auth", "knowledge")
	code, lines := f.run(t, file)
	last := lines[len(lines)-1]
	if code != 0 || last["msg"] != "summary" || last["projects"] != 2.0 || last["changed"] != 2.0 || last["vaultWrites"] != 4.0 {
		t.Fatalf("first run: exit %d, %v", code, lines)
	}
	if w := f.proxy.writes(); len(w) != 4 {
		t.Errorf("first run's Vault writes: %q", w)
	}

	code, lines = f.run(t, file)
	if code != 0 || len(lines) != 1 || lines[0]["changed"] != 0.0 || lines[0]["statements"] != 0.0 || lines[0]["vaultWrites"] != 0.0 {
		t.Fatalf("second run: exit %d, %v", code, lines)
	}
	if w := f.proxy.writes(); len(w) != 0 {
		t.Errorf("second run wrote to Vault: %q", w)
	}
	if len(f.tracer.All()) == 0 {
		t.Error("the second run read nothing: the tracer saw no statement")
	}
	for _, s := range f.tracer.All() {
		if !strings.HasPrefix(strings.TrimSpace(s), "WITH") {
			t.Errorf("second run sent %q", s)
		}
	}

	// The job's Vault roles issue working logins.
	secret, err := f.vault.Client.Logical().Read("database/creds/auth-data")
	if err != nil || secret == nil {
		t.Fatalf("database/creds/auth-data: %v", err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(secret.Data["username"].(string), secret.Data["password"].(string)),
		Host: f.pg.Host + ":" + strconv.Itoa(f.pg.Port), Path: "/auth_db", RawQuery: "sslmode=disable"}
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		t.Fatalf("sign in with issued credentials: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var role string
	if err := conn.QueryRow(context.Background(), "SELECT current_user").Scan(&role); err != nil || role != "auth-data" {
		t.Errorf("issued login acts as %q, %v", role, err)
	}
}

// A catalog naming a hostile identifier is refused before Vault or
// PostgreSQL is contacted: nothing is created and nothing is dropped.
func TestRunRefusesAHostileCatalog(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", "CREATE DATABASE y")
	before := f.pg.Psql(t, "postgres", "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database; SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles")
	raw := []byte(`{"server":{"host":"127.0.0.1","port":5432,"sslmode":"disable"},"adminPath":"` + adminPath + `",
		"vault":{"mount":"database","connection":"platform-postgres"},
		"projects":[{"project":"x\"; DROP DATABASE y; --","database":"x\"; DROP DATABASE y; --_db",
		"ownerRole":"x\"; DROP DATABASE y; ---owner","dataRole":"x\"; DROP DATABASE y; ---data",
		"vaultRoles":{"owner":"database/roles/x-owner","data":"database/roles/x-data"}}]}`)
	code, lines := f.run(t, writeCatalog(t, raw))
	if code != 1 || len(lines) != 1 || lines[0]["msg"] != "refused: nothing applied" || !strings.Contains(lines[0]["error"].(string), "/projects/0/project") {
		t.Fatalf("exit %d, %v", code, lines)
	}
	if after := f.pg.Psql(t, "postgres", "SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database; SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles"); after != before {
		t.Errorf("PostgreSQL changed:\n%s\n%s", before, after)
	}
	if r := f.proxy.All(); len(r) != 0 {
		t.Errorf("Vault was contacted: %q", r)
	}
}

// A superuser-owned database fails the run with one line naming the
// database and the step; the database before it is applied.
func TestRunFailsOnASuperuserOwnedDatabase(t *testing.T) {
	f := newFixture(t)
	f.pg.Psql(t, "postgres", "CREATE DATABASE agents_db")
	code, lines := f.run(t, f.catalogFile(t, "auth", "agents"))
	last := lines[len(lines)-1]
	if code != 1 || last["msg"] != "step failed" || last["database"] != "agents_db" || last["step"] != "adopt" ||
		!strings.Contains(last["error"].(string), "superuser") {
		t.Fatalf("exit %d, %v", code, lines)
	}
	if len(lines) != 2 || lines[0]["database"] != "auth_db" {
		t.Errorf("lines %v: want auth_db applied before the failure", lines)
	}
}

// Every way the job cannot start is one JSON line: exit 2 for a bad
// setting, 1 for a refusal or a failed call.
func TestRunStopsAtTheFailingCall(t *testing.T) {
	f := newFixture(t)
	file := f.catalogFile(t, "auth")
	cases := []struct {
		name  string
		env   []string
		code  int
		msg   string
		field string
		value string
	}{
		{"no catalog file setting", []string{"CATALOG_FILE", ""}, 2, cli.BadSettingMsg, "error", "CATALOG_FILE"},
		{"a catalog file that is absent", []string{"CATALOG_FILE", filepath.Join(t.TempDir(), "absent")}, 1, "refused: nothing applied", "file", "absent"},
		{"an unknown Vault role", []string{"VAULT_ROLE", "nobody"}, 1, "call failed", "call", "login"},
		{"a bad Vault setting", []string{"VAULT_ADDR", "://"}, 2, cli.BadSettingMsg, "error", "://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, lines := f.run(t, file, c.env...)
			if code != c.code || len(lines) != 1 || lines[0]["msg"] != c.msg || !strings.Contains(lines[0][c.field].(string), c.value) {
				t.Fatalf("exit %d, %v", code, lines)
			}
		})
	}

	// A role without read on the admin login stops at that read; one
	// without write on database roles stops at the Vault step.
	f.vault.GrantKubernetesRole(t, "kubernetes", "no-admin", jobNamespace, jobAccount, "no-admin",
		`path "database/roles/*" { capabilities = ["read", "create", "update"] }`)
	code, lines := f.run(t, file, "VAULT_ROLE", "no-admin")
	if code != 1 || len(lines) != 1 || lines[0]["call"] != "read admin login" {
		t.Fatalf("no admin grant: exit %d, %v", code, lines)
	}
	f.vault.GrantKubernetesRole(t, "kubernetes", "read-only", jobNamespace, jobAccount, "read-only",
		`path "`+adminPath+`" { capabilities = ["read"] }
path "database/roles/*" { capabilities = ["read"] }`)
	code, lines = f.run(t, file, "VAULT_ROLE", "read-only")
	last := lines[len(lines)-1]
	if code != 1 || last["step"] != "vault roles" || last["database"] != "auth_db" {
		t.Fatalf("no role grant: exit %d, %v", code, lines)
	}
	if w := f.proxy.writes(); len(w) != 1 {
		t.Errorf("Vault writes %q: want the one refused", w)
	}

	// PostgreSQL unreachable.
	c := f.catalog("auth")
	c.Server.Port = 1
	raw, _ := json.Marshal(c)
	code, lines = f.run(t, writeCatalog(t, raw))
	if code != 1 || len(lines) != 1 || lines[0]["call"] != "connect" {
		t.Fatalf("unreachable server: exit %d, %v", code, lines)
	}
}

// requestLog records every request the job sends Vault.
type requestLog struct {
	testenv.History[string]
}

// writes are the requests that change Vault, the login aside.
func (l *requestLog) writes() []string {
	var out []string
	for _, r := range l.All() {
		if (strings.HasPrefix(r, "PUT ") || strings.HasPrefix(r, "POST ")) && !strings.HasSuffix(r, "/login") {
			out = append(out, r)
		}
	}
	return out
}

// variables are the variables the table in docs/postgres-catalog.md names for the job.
var variables = []string{"CATALOG_FILE", "VAULT_ADDR", "VAULT_ROLE", "VAULT_AUTH_PATH", "TOKEN_FILE", "PGSSLROOTCERT", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "postgres-catalog", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, stdout, stderr, postgrescatalog.Connector{})
	}})
}

func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{})
	if code := run(context.Background(), nil, env.Getenv, io.Discard, io.Discard, postgrescatalog.Connector{}); code != 2 {
		t.Fatalf("exit %d without CATALOG_FILE", code)
	}
	env.Named(t, variables)
}
