package vaultpolicy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const authPath = "kubernetes"

// recording passes every call to Vault and notes it, so a test sees the order
// of calls and which ones wrote.
type recording struct {
	Vault
	calls []string
}

func (r *recording) note(call string) { r.calls = append(r.calls, call) }

func (r *recording) ReadPolicy(ctx context.Context, name string) (string, bool, error) {
	r.note("read policy " + name)
	return r.Vault.ReadPolicy(ctx, name)
}

func (r *recording) WritePolicy(ctx context.Context, name, text string) error {
	r.note("write policy " + name)
	return r.Vault.WritePolicy(ctx, name, text)
}

func (r *recording) ReadRole(ctx context.Context, name string) (Role, bool, error) {
	r.note("read role " + name)
	return r.Vault.ReadRole(ctx, name)
}

func (r *recording) WriteRole(ctx context.Context, name string, role Role) error {
	r.note("write role " + name)
	return r.Vault.WriteRole(ctx, name, role)
}

func (r *recording) ListPolicies(ctx context.Context) ([]string, error) {
	r.note("list policies")
	return r.Vault.ListPolicies(ctx)
}

func (r *recording) ListRoles(ctx context.Context) ([]string, error) {
	r.note("list roles")
	return r.Vault.ListRoles(ctx)
}

func (r *recording) writes() []string {
	var out []string
	for _, c := range r.calls {
		if strings.HasPrefix(c, "write ") {
			out = append(out, c)
		}
	}
	return out
}

// newVault starts a Vault with Kubernetes auth mounted (no TokenReview is
// needed here: these tests act with tokens Vault issues directly).
func newVault(t *testing.T) *testenv.Vault {
	t.Helper()
	v := testenv.NewVault(t)
	if err := v.Client.Sys().EnableAuthWithOptions(authPath, &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	return v
}

// tokenWith is a client acting with a token that holds only the given policy
// text, as the job's login would.
func tokenWith(t *testing.T, v *testenv.Vault, policy string) *vaultapi.Client {
	t.Helper()
	name := "test-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	if err := v.Client.Sys().PutPolicy(name, policy); err != nil {
		t.Fatal(err)
	}
	secret, err := v.Client.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{name}, NoDefaultPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Client.Clone()
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(secret.Auth.ClientToken)
	return c
}

func jobVault(t *testing.T, v *testenv.Vault) *recording {
	t.Helper()
	return &recording{Vault: &Client{API: tokenWith(t, v, AdminPolicy(authPath)), AuthPath: authPath}}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The worked example sets apply and read back as rendered, each policy
// before its role; a second run writes nothing.
func TestApplyWorkedSets(t *testing.T) {
	v := newVault(t)
	ctx := context.Background()
	for _, set := range workedSets {
		render, err := Load(testenv.MountConfigMap(t, renderFiles(t, set.dir)))
		if err != nil {
			t.Fatal(err)
		}
		job := jobVault(t, v)
		sum, err := Apply(ctx, job, render, "", discard())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Written != 2*len(set.names) || sum.Unchanged != 0 || len(sum.Stale) != 0 {
			t.Errorf("%s: first run %+v", set.dir, sum)
		}
		var wantWrites []string
		for _, name := range set.names {
			wantWrites = append(wantWrites, "write policy "+name, "write role "+name)
		}
		if got := job.writes(); !slices.Equal(got, wantWrites) {
			t.Errorf("%s: writes %q, want %q", set.dir, got, wantWrites)
		}

		admin := &Client{API: v.Client, AuthPath: authPath}
		for _, e := range render.Entries {
			text, found, err := admin.ReadPolicy(ctx, e.Name())
			if err != nil || !found || text != e.Policy.Encode() {
				t.Errorf("policy %s reads back %q, %v, %v", e.Name(), text, found, err)
			}
			role, found, err := admin.ReadRole(ctx, e.Name())
			if err != nil || !found || !SameRole(role, e.Role) {
				t.Errorf("role %s reads back %+v, %v, %v", e.Name(), role, found, err)
			}
		}

		again := jobVault(t, v)
		sum, err = Apply(ctx, again, render, "", discard())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Written != 0 || sum.Unchanged != 2*len(set.names) || len(again.writes()) != 0 {
			t.Errorf("%s: second run %+v, writes %q", set.dir, sum, again.writes())
		}
	}
}

func loadSet(t *testing.T, set string) Render {
	t.Helper()
	render, err := Load(testenv.MountConfigMap(t, renderFiles(t, set)))
	if err != nil {
		t.Fatal(err)
	}
	return render
}

// What someone changed in Vault is not as rendered and is written again: a
// role that gained a namespace selector loses it, a widened policy narrows.
func TestApplyRewritesEdits(t *testing.T) {
	v := newVault(t)
	ctx := context.Background()
	render := loadSet(t, "auth")
	if _, err := Apply(ctx, jobVault(t, v), render, "", discard()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Client.Logical().Write("auth/kubernetes/role/auth-system-auth-api", map[string]any{
		"bound_service_account_namespace_selector": `{"matchLabels":{"team":"auth"}}`,
	}); err != nil {
		t.Fatal(err)
	}
	admin := &Client{API: v.Client, AuthPath: authPath}
	if role, _, _ := admin.ReadRole(ctx, "auth-system-auth-api"); role.NamespaceSelector == "" {
		t.Fatal("the edit did not take")
	}
	if err := v.Client.Sys().PutPolicy("auth-system-auth-migration", `path "database/creds/*" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	// A period lets the role's tokens be renewed for ever: wider than the
	// grant, though the four bindings are as rendered.
	if _, err := v.Client.Logical().Write("auth/kubernetes/role/auth-system-auth-migration", map[string]any{
		"token_period": "768h", "token_bound_cidrs": []string{"10.0.0.0/8"},
	}); err != nil {
		t.Fatal(err)
	}
	if role, _, _ := admin.ReadRole(ctx, "auth-system-auth-migration"); !slices.Equal(role.TokenEdits, []string{"token_bound_cidrs", "token_period"}) {
		t.Fatalf("the token edits read as %q", role.TokenEdits)
	}

	job := jobVault(t, v)
	sum, err := Apply(ctx, job, render, "", discard())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"write role auth-system-auth-api", "write policy auth-system-auth-migration", "write role auth-system-auth-migration"}
	if got := job.writes(); !slices.Equal(got, want) || sum.Written != 3 || sum.Unchanged != 1 {
		t.Errorf("writes %q, summary %+v", got, sum)
	}
	if role, _, _ := admin.ReadRole(ctx, "auth-system-auth-migration"); len(role.TokenEdits) != 0 {
		t.Errorf("the role keeps %q after the run", role.TokenEdits)
	}
	role, _, err := admin.ReadRole(ctx, "auth-system-auth-api")
	if err != nil || role.NamespaceSelector != "" || !SameRole(role, render.Entries[0].Role) {
		t.Errorf("role after the run %+v, %v", role, err)
	}
	text, _, _ := admin.ReadPolicy(ctx, "auth-system-auth-migration")
	if text != render.Entries[1].Policy.Encode() {
		t.Errorf("policy after the run %q", text)
	}
}

// Names of a covered Project that the render no longer names are reported
// and kept; other Projects' names and the platform's own are not reported.
func TestApplyReportsStaleAndKeepsIt(t *testing.T) {
	v := newVault(t)
	ctx := context.Background()
	seed := func(name string) {
		t.Helper()
		if err := v.Client.Sys().PutPolicy(name, `path "secret/data/x" { capabilities = ["read"] }`); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Client.Logical().Write("auth/kubernetes/role/"+name, map[string]any{
			"bound_service_account_names": []string{"x"}, "bound_service_account_namespaces": []string{"x"}, "token_policies": []string{name},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"auth-system-old-worker", "knowledge-system-knowledge-api", "policy-admin"} {
		seed(name)
	}
	var logs bytes.Buffer
	sum, err := Apply(ctx, jobVault(t, v), loadSet(t, "auth"), "", slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Stale{{"policy", "auth-system-old-worker"}, {"role", "auth-system-old-worker"}}
	if !slices.Equal(sum.Stale, want) {
		t.Errorf("stale %v, want %v", sum.Stale, want)
	}
	if n := strings.Count(logs.String(), `"msg":"stale`); n != 2 || !strings.Contains(logs.String(), `"name":"auth-system-old-worker"`) {
		t.Errorf("stale log lines %d in\n%s", n, logs.String())
	}
	admin := &Client{API: v.Client, AuthPath: authPath}
	for _, name := range []string{"auth-system-old-worker", "knowledge-system-knowledge-api", "policy-admin"} {
		if _, found, err := admin.ReadPolicy(ctx, name); !found || err != nil {
			t.Errorf("policy %s gone: %v", name, err)
		}
		if _, found, err := admin.ReadRole(ctx, name); !found || err != nil {
			t.Errorf("role %s gone: %v", name, err)
		}
	}
}

// A call that fails stops the run at that call, named; nothing after it is
// attempted. The failures are Vault's own: a login lacking a grant.
func TestApplyStopsAtTheFailingCall(t *testing.T) {
	ctx := context.Background()
	render := loadSet(t, "auth")
	withoutRoleWrite := `path "sys/policies/acl/*" { capabilities = ["read", "create", "update", "list"] }
path "auth/kubernetes/role/*" { capabilities = ["read"] }`
	withoutRoleList := `path "sys/policies/acl/*" { capabilities = ["read", "create", "update", "list"] }
path "auth/kubernetes/role/*" { capabilities = ["read", "create", "update"] }`
	for _, tc := range []struct {
		name, policy, call, failedAt string
		calls                        int
	}{
		{"no grant at all", `path "secret/data/x" { capabilities = ["read"] }`, "read policy", "auth-system-auth-api", 1},
		{"role writes refused", withoutRoleWrite, "write role", "auth-system-auth-api", 4},
		{"role listing refused", withoutRoleList, "list roles", "", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVault(t)
			job := &recording{Vault: &Client{API: tokenWith(t, v, tc.policy), AuthPath: authPath}}
			_, err := Apply(ctx, job, render, "", discard())
			call, ok := errors.AsType[*CallError](err)
			if !ok || call.Call != tc.call || call.Name != tc.failedAt || !strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("error %v, want %s %s refused", err, tc.call, tc.failedAt)
			}
			if len(job.calls) != tc.calls || !strings.HasPrefix(job.calls[len(job.calls)-1], tc.call) {
				t.Errorf("calls %q: the run went on after %s", job.calls, tc.call)
			}
		})
	}
}

// A render naming the role the job logs in as is refused before any call:
// written, the job's grant would be an identity's.
func TestApplyRefusesToRewriteItsOwnLogin(t *testing.T) {
	job := &recording{}
	render := loadSet(t, "auth")
	own := render.Entries[0].Name()
	if _, err := Apply(context.Background(), job, render, own, discard()); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), own) {
		t.Fatalf("error %v, want the render refused for naming %s", err, own)
	}
	if len(job.calls) != 0 {
		t.Fatalf("calls %q before the refusal", job.calls)
	}
}

func TestApplyStopsWhenVaultIsGone(t *testing.T) {
	v := newVault(t)
	job := jobVault(t, v)
	if err := v.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(context.Background(), job, loadSet(t, "estate"), "", discard())
	if call, ok := errors.AsType[*CallError](err); !ok || call.Call != "read policy" || call.Name != "data-system-postgres" {
		t.Fatalf("error %v", err)
	}
}

// The job's login grant is enough for a whole run and no wider: it cannot
// delete a policy.
func TestAdminPolicyCannotDelete(t *testing.T) {
	v := newVault(t)
	if err := v.Client.Sys().PutPolicy("auth-system-x", `path "secret/data/x" { capabilities = ["read"] }`); err != nil {
		t.Fatal(err)
	}
	c := tokenWith(t, v, AdminPolicy(authPath))
	if err := c.Sys().DeletePolicy("auth-system-x"); err == nil {
		t.Fatal("the job's grant deleted a policy")
	}
	if _, err := c.Logical().Delete("auth/kubernetes/role/auth-system-x"); err == nil {
		t.Fatal("the job's grant deleted a role")
	}
}

func TestListRolesOfAnEmptyMount(t *testing.T) {
	v := newVault(t)
	roles, err := jobVault(t, v).ListRoles(context.Background())
	if err != nil || len(roles) != 0 {
		t.Fatalf("roles %q, %v", roles, err)
	}
}
