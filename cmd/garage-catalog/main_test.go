package main

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegarage"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	jobNamespace = "platform"
	jobAccount   = "garage-catalog"
	tokenPath    = "secret/data/platform/garage/admin"
)

const jobPolicy = `
path "secret/data/+/+/s3" {
  capabilities = ["read", "create"]
}
path "` + tokenPath + `" {
  capabilities = ["read"]
}
`

// job is the whole job's surroundings: a real API server that reviews the
// job's ServiceAccount token, a real Vault that trusts it, and Garage.
type job struct {
	env    map[string]string
	garage *fakegarage.Garage
	vault  *testenv.Vault
}

func newJob(t *testing.T) *job {
	t.Helper()
	cp := testenv.Shared(t)
	v := testenv.NewVault(t)
	tokenFile := v.JobLogin(t, cp, jobNamespace, jobAccount, "garage-catalog", jobPolicy)
	g := fakegarage.New(t)
	if _, err := v.Client.Logical().Write(tokenPath, map[string]any{"data": map[string]any{"admin-token": g.Token}}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	catalog := `{"adminApi":{"host":"` + u.Hostname() + `","port":` + u.Port() + `},
		"adminToken":{"path":"` + tokenPath + `"},
		"keys":[{"project":"knowledge","process":"karakeep","buckets":["knowledge-assets"]}]}`
	file := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(file, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	return &job{
		garage: g,
		vault:  v,
		env: map[string]string{
			"CATALOG_FILE": file,
			"VAULT_ADDR":   v.Addr,
			"TOKEN_FILE":   tokenFile,
		},
	}
}

func (j *job) run(t *testing.T) (int, []map[string]any, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), nil, func(k string) string { return j.env[k] }, io.Discard, &out)
	return code, testenv.JSONLines(t, out.String()), out.String()
}

func TestRunAppliesTheCatalogThenChangesNothing(t *testing.T) {
	j := newJob(t)
	code, lines, out := j.run(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	last := lines[len(lines)-1]
	if last["msg"] != "summary" || last["minted"] != 1.0 || last["buckets_created"] != 1.0 || last["grants"] != 1.0 {
		t.Errorf("summary %v", last)
	}
	ids := j.garage.KeysNamed("knowledge")
	if len(ids) != 1 {
		t.Fatalf("garage holds keys %v", ids)
	}
	_, secret, _ := j.garage.Key(ids[0])

	writes := j.garage.Writes()
	code, lines, out2 := j.run(t)
	if code != 0 || len(lines) != 1 || lines[0]["changes"] != 0.0 || lines[0]["kept"] != 1.0 {
		t.Errorf("second run: exit %d: %s", code, out2)
	}
	if j.garage.Writes() != writes {
		t.Error("the second run wrote to Garage")
	}
	for _, s := range []string{secret, j.garage.Token, j.vault.RootToken} {
		if strings.Contains(out+out2, s) {
			t.Error("a secret reached the log")
		}
	}
}

func TestRunFailsWithOneLineNamingTheCause(t *testing.T) {
	j := newJob(t)
	// A bad setting exits 2, a refusal or a failed call 1.
	cases := map[string]struct {
		change func(t *testing.T)
		code   int
		want   string
	}{
		"no catalog file named": {func(*testing.T) { delete(j.env, "CATALOG_FILE") }, 2, "CATALOG_FILE"},
		"no Vault address":      {func(*testing.T) { delete(j.env, "VAULT_ADDR") }, 2, "VAULT_ADDR"},
		"a catalog that is not one": {func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "c.json")
			_ = os.WriteFile(f, []byte(`{"keys":[]}`), 0o600)
			j.env["CATALOG_FILE"] = f
		}, 1, "refused by its schema"},
		"a missing catalog":            {func(*testing.T) { j.env["CATALOG_FILE"] = "/nonexistent/catalog.json" }, 1, "no such file"},
		"a role Vault lacks":           {func(*testing.T) { j.env["VAULT_ROLE"] = "someone-else" }, 1, "login"},
		"another auth mount":           {func(*testing.T) { j.env["VAULT_AUTH_PATH"] = "elsewhere" }, 1, "auth/elsewhere"},
		"a token file that is not":     {func(*testing.T) { j.env["TOKEN_FILE"] = "/nonexistent/token" }, 1, "login"},
		"an address with a bad scheme": {func(*testing.T) { j.env["VAULT_ADDR"] = "://" }, 2, "vault"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			saved := make(map[string]string, len(j.env))
			for k, v := range j.env {
				saved[k] = v
			}
			t.Cleanup(func() { j.env = saved })
			c.change(t)
			code, lines, out := j.run(t)
			if code != c.code || len(lines) != 1 || lines[0]["level"] != "ERROR" || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want %d and one error line naming %q: %s", code, c.code, c.want, out)
			}
			if j.garage.Writes() != 0 {
				t.Error("a refused run wrote to Garage")
			}
		})
	}
}

func TestRunFailsWhenGarageRefuses(t *testing.T) {
	j := newJob(t)
	if _, err := j.vault.Client.Logical().Write(tokenPath, map[string]any{"data": map[string]any{"admin-token": "stale"}}); err != nil {
		t.Fatal(err)
	}
	code, lines, out := j.run(t)
	if code != 1 || len(lines) != 1 || !strings.Contains(out, "HTTP 403") || strings.Contains(out, "stale") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// variables are the variables the table in docs/garage-catalog.md names for the job.
var variables = []string{"CATALOG_FILE", "VAULT_ADDR", "VAULT_ROLE", "VAULT_AUTH_PATH", "TOKEN_FILE", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "garage-catalog", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, stdout, stderr)
	}})
}

func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{})
	if code := run(context.Background(), nil, env.Getenv, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit %d without CATALOG_FILE", code)
	}
	env.Named(t, variables)
}
