package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
	"github.com/JorisJonkers-dev/delivery/internal/vaultpolicy"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const (
	jobNamespace = "secrets-system"
	jobAccount   = "vault-policy"
)

var testdata = filepath.Join("..", "..", "internal", "vaultpolicy", "testdata")

// fixture is a real Vault whose Kubernetes auth reviews tokens with the real
// API server, holding the job's login role as the platform sets it up.
type fixture struct {
	vault *testenv.Vault
	env   map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cp := testenv.Shared(t)
	v := testenv.NewVault(t)
	tokenFile := v.JobLogin(t, cp, jobNamespace, jobAccount, "policy-admin", vaultpolicy.AdminPolicy("kubernetes"))
	return &fixture{vault: v, env: map[string]string{"VAULT_ADDR": v.Addr, "TOKEN_FILE": tokenFile}}
}

// run runs the job whole with the fixture's settings plus extra, and returns
// its exit code and log lines.
func (f *fixture) run(t *testing.T, policiesDir string, extra ...string) (int, []map[string]any) {
	t.Helper()
	env := map[string]string{"POLICIES_DIR": policiesDir}
	for k, v := range f.env {
		env[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return runWith(t, env)
}

func runWith(t *testing.T, env map[string]string) (int, []map[string]any) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard, &out)
	return code, testenv.JSONLines(t, out.String())
}

func mountSet(t *testing.T, folder ...string) string {
	t.Helper()
	return testenv.MountConfigMap(t, testenv.ReadFolder(t, filepath.Join(append([]string{testdata}, folder...)...)))
}

func summary(t *testing.T, lines []map[string]any) (written, unchanged, stale float64) {
	t.Helper()
	last := lines[len(lines)-1]
	if last["msg"] != "summary" {
		t.Fatalf("last line %v is not the summary", last)
	}
	return last["written"].(float64), last["unchanged"].(float64), last["stale"].(float64)
}

// The job logs in with a real ServiceAccount token Vault verifies through
// TokenReview, applies each worked set, and on a second run writes nothing.
func TestRunAppliesWorkedSetsOnce(t *testing.T) {
	f := newFixture(t)
	for set, identities := range map[string]float64{"auth": 2, "estate": 3, "knowledge-platform": 5} {
		dir := mountSet(t, "render", set)
		code, lines := f.run(t, dir)
		if code != 0 {
			t.Fatalf("%s: exit %d: %v", set, code, lines)
		}
		if w, u, s := summary(t, lines); w != 2*identities || u != 0 || s != 0 {
			t.Errorf("%s: first run wrote %v, unchanged %v, stale %v", set, w, u, s)
		}
		code, lines = f.run(t, dir)
		if code != 0 || len(lines) != 1 {
			t.Fatalf("%s: second run exit %d: %v", set, code, lines)
		}
		if w, u, _ := summary(t, lines); w != 0 || u != 2*identities {
			t.Errorf("%s: second run wrote %v, unchanged %v", set, w, u)
		}
	}
	text, err := f.vault.Client.Sys().GetPolicy("auth-system-auth-migration")
	if err != nil || text != `{"path":{"database/creds/auth-owner":{"capabilities":["read"]}}}` {
		t.Errorf("policy reads back %q, %v", text, err)
	}
}

// vaultState is everything the job could change: each policy's text and each
// role's full settings.
func vaultState(t *testing.T, v *testenv.Vault) map[string]any {
	t.Helper()
	state := map[string]any{}
	policies, err := v.Client.Sys().ListPolicies()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range policies {
		text, err := v.Client.Sys().GetPolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		state["policy "+name] = text
	}
	list, err := v.Client.Logical().List("auth/kubernetes/role")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range list.Data["keys"].([]any) {
		role, err := v.Client.Logical().Read("auth/kubernetes/role/" + name.(string))
		if err != nil {
			t.Fatal(err)
		}
		state["role "+name.(string)] = role.Data
	}
	return state
}

// Every refusal of the corpus ends the run with exit 1 and one line saying
// why, and Vault holds exactly what it held before.
func TestRunRefusalsLeaveVaultUntouched(t *testing.T) {
	f := newFixture(t)
	if code, lines := f.run(t, mountSet(t, "render", "auth")); code != 0 {
		t.Fatalf("seeding: exit %d: %v", code, lines)
	}
	// A role edited in Vault stays as edited: a refused render repairs nothing.
	if _, err := f.vault.Client.Logical().Write("auth/kubernetes/role/auth-system-auth-api", map[string]any{
		"bound_service_account_namespace_selector": `{"matchLabels":{"team":"auth"}}`,
	}); err != nil {
		t.Fatal(err)
	}
	before := vaultState(t, f.vault)
	cases, err := os.ReadDir(filepath.Join(testdata, "refusals"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			code, lines := f.run(t, mountSet(t, "refusals", c.Name()))
			if code != 1 || len(lines) != 1 || lines[0]["level"] != "ERROR" || !strings.HasPrefix(lines[0]["msg"].(string), "refused") {
				t.Fatalf("exit %d, lines %v", code, lines)
			}
			if after := vaultState(t, f.vault); !reflect.DeepEqual(before, after) {
				t.Errorf("Vault changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestRunRefusesAPlainFolder(t *testing.T) {
	f := newFixture(t)
	before := vaultState(t, f.vault)
	code, lines := f.run(t, filepath.Join(testdata, "render", "auth"))
	if code != 1 || len(lines) != 1 || !strings.Contains(lines[0]["error"].(string), "not a mounted ConfigMap") {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
	if !reflect.DeepEqual(before, vaultState(t, f.vault)) {
		t.Error("Vault changed")
	}
}

// The job acts only as its login role: a role Vault does not know stops it at
// login, a login without the grant to write roles stops it at that call.
func TestRunStopsAtTheFailingCall(t *testing.T) {
	f := newFixture(t)
	dir := mountSet(t, "render", "auth")
	code, lines := f.run(t, dir, "VAULT_ROLE", "nobody")
	if code != 1 || len(lines) != 1 || lines[0]["call"] != "login" {
		t.Fatalf("unknown role: exit %d, lines %v", code, lines)
	}
	f.vault.GrantKubernetesRole(t, "kubernetes", "policy-only", jobNamespace, jobAccount, "policy-only",
		`path "sys/policies/acl/*" { capabilities = ["read", "create", "update"] }`)
	code, lines = f.run(t, dir, "VAULT_ROLE", "policy-only")
	last := lines[len(lines)-1]
	if code != 1 || last["call"] != "read role" || last["name"] != "auth-system-auth-api" {
		t.Fatalf("no role grant: exit %d, lines %v", code, lines)
	}
	if len(lines) != 2 || lines[0]["msg"] != "wrote policy" {
		t.Errorf("lines %v: want the policy written, then the stop", lines)
	}
}

func TestRunSettings(t *testing.T) {
	code, lines := runWith(t, map[string]string{})
	if code != 2 || len(lines) != 1 || !strings.Contains(lines[0]["error"].(string), "VAULT_ADDR") {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
	// The defaults: the render at /policies, which a test machine has not.
	code, lines = runWith(t, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1"})
	if code != 1 || lines[0]["dir"] != "/policies" {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
	// The client refuses an address that is not a URL, and Vault's own
	// environment variables when malformed.
	mounted := mountSet(t, "render", "auth")
	code, lines = runWith(t, map[string]string{"VAULT_ADDR": "://vault", "POLICIES_DIR": mounted})
	if code != 2 || lines[0]["msg"] != cli.BadSettingMsg || !strings.Contains(lines[0]["error"].(string), "://vault") {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
	t.Setenv("VAULT_MAX_RETRIES", "many")
	code, lines = runWith(t, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1", "POLICIES_DIR": mounted})
	if code != 2 || lines[0]["msg"] != cli.BadSettingMsg || !strings.Contains(lines[0]["error"].(string), "VAULT_*") {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
	t.Setenv("VAULT_MAX_RETRIES", "")
	// The pod's token is the default login; a test machine has none.
	code, lines = runWith(t, map[string]string{"VAULT_ADDR": "http://127.0.0.1:1", "POLICIES_DIR": mountSet(t, "render", "auth")})
	if code != 1 || lines[0]["call"] != "login" || !strings.Contains(lines[0]["error"].(string), vaultlogin.DefaultTokenFile) {
		t.Fatalf("exit %d, lines %v", code, lines)
	}
}

// What the job wrote works as rendered: the identity's own ServiceAccount
// logs in through its role and holds exactly its grant; the same name in
// another namespace cannot log in as it.
func TestRunGrantsWorkAsRendered(t *testing.T) {
	f := newFixture(t)
	if code, lines := f.run(t, mountSet(t, "render", "auth")); code != 0 {
		t.Fatalf("exit %d: %v", code, lines)
	}
	cp := testenv.Shared(t)
	ctx := context.Background()
	client := f.vault.LoginClient(t)
	if err := vaultlogin.Login(ctx, client, vaultlogin.Settings{Role: "auth-system-auth-api", AuthPath: "kubernetes",
		TokenFile: cp.ServiceAccountTokenFile(t, "auth-system", "auth-api")}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"secret/data/auth-api":             "read",
		"secret/metadata/auth-api":         "read",
		"transit/sign/auth-api-jwt":        "update",
		"transit/keys/auth-api-jwt/rotate": "update",
		"secret/data/auth-api-other":       "deny",
		"database/creds/auth-owner":        "deny",
		"sys/policies/acl/auth-system-x":   "deny",
	} {
		got, err := client.Sys().CapabilitiesSelfWithContext(ctx, path)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s: capabilities %q, %v; want [%s]", path, got, err, want)
		}
	}
	other := f.vault.LoginClient(t)
	if err := vaultlogin.Login(ctx, other, vaultlogin.Settings{Role: "auth-system-auth-api", AuthPath: "kubernetes",
		TokenFile: cp.ServiceAccountTokenFile(t, "data-system", "auth-api")}); err == nil {
		t.Error("a ServiceAccount of another namespace logged in as auth-system-auth-api")
	}
}

// variables are the variables the table in docs/vault-policy.md names for the job.
var variables = []string{"VAULT_ADDR", "VAULT_ROLE", "VAULT_AUTH_PATH", "POLICIES_DIR", "TOKEN_FILE", "LOG_LEVEL"}

func TestCommandLine(t *testing.T) {
	clitest.Conform(t, clitest.Binary{Name: "vault-policy", Variables: variables, Run: func(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, getenv, stdout, stderr)
	}})
}

func TestHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{})
	if code := run(context.Background(), nil, env.Getenv, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit %d without VAULT_ADDR", code)
	}
	env.Named(t, variables)
}
