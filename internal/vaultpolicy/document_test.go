package vaultpolicy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

var workedSets = []struct {
	dir   string
	names []string
}{
	{"auth", []string{"auth-system-auth-api", "auth-system-auth-migration"}},
	{"estate", []string{"data-system-postgres", "data-system-postgres-backup", "data-system-rabbitmq-backup"}},
	{"knowledge-platform", []string{
		"knowledge-platform-system-basic-memory", "knowledge-platform-system-docling-serve-backup",
		"knowledge-platform-system-hindsight-api", "knowledge-platform-system-hindsight-worker",
		"knowledge-platform-system-karakeep",
	}},
}

func renderFiles(t *testing.T, set string) map[string][]byte {
	t.Helper()
	return testenv.ReadFolder(t, filepath.Join("testdata", "render", set))
}

// The worked example sets are accepted whole, and the job's own encoding of
// each policy is the very line deploy-kit rendered: both write RFC 8785 JSON.
func TestWorkedSetsDecode(t *testing.T) {
	for _, set := range workedSets {
		t.Run(set.dir, func(t *testing.T) {
			files := renderFiles(t, set.dir)
			render, err := Load(testenv.MountConfigMap(t, files))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range render.Entries {
				names = append(names, e.Name())
				if got, want := e.Policy.Encode(), string(bytes.TrimSpace(files[e.Name()+".policy.json"])); got != want {
					t.Errorf("%s encodes as\n%s\nrendered\n%s", e.Name(), got, want)
				}
				if err := CheckRole(e.Identity, e.Role); err != nil {
					t.Errorf("%s: %v", e.Name(), err)
				}
			}
			if !slices.Equal(names, set.names) {
				t.Errorf("names %q, want %q", names, set.names)
			}
		})
	}
}

// Every case under testdata/refusals is a render the job refuses whole, with
// a message that says why. A case folder without a row here fails the test.
func TestRefusalCorpus(t *testing.T) {
	cases := map[string]string{
		"glob":                  `"secret/data/*" holds a glob`,
		"plus-segment":          `holds a + segment`,
		"template":              `holds a template`,
		"sudo":                  `sudo is never granted`,
		"sys-policies-acl":      `"sys/policies/acl" is under sys/`,
		"auth-token-create":     `"auth/token/create" is under auth/`,
		"create-on-kv":          `carries exactly ["read"], not ["create"]`,
		"deny-capability":       `carries exactly ["read"], not ["deny"]`,
		"transit-wider-path":    `not a form the render writes`,
		"second-serviceaccount": `binds ServiceAccounts ["auth-migration" "auth-api"]`,
		"another-namespace":     `binds namespaces ["data-system"]`,
		"second-namespace":      `binds namespaces ["auth-system" "data-system"]`,
		"namespace-selector":    `may not carry a namespace selector`,
		"identity-mismatch":     `binds ServiceAccounts ["auth-api"]; the name allows exactly ["auth-migration"]`,
		"another-policy":        `grants policies ["auth-system-auth-api"]`,
		"unknown-file":          `"notes.txt" is not a document the render writes`,
		"half-pair":             `auth-system-auth-migration has a policy but no role`,
		"hcl-in-path":           `not a form the render writes`,
		"hcl-as-string":         `not a JSON object`,
		"unknown-policy-field":  `unknown field "allowed_parameters"`,
		"unknown-role-field":    `unknown field "token_ttl"`,
		"wrapped-role":          `unknown field`,
		"duplicate-key":         `key "database/creds/auth-owner" is given twice`,
		"case-folded-key":       `unknown field "Bound_Service_Account_Names"`,
		"not-json":              `not a JSON object`,
		"trailing-data":         `data after the value`,
		"not-a-grant-name":      `name "vault-policy-admin" is not <project>-system-<identity>`,
	}
	dirs, err := os.ReadDir(filepath.Join("testdata", "refusals"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		want, ok := cases[d.Name()]
		if !ok {
			t.Errorf("testdata/refusals/%s has no expected message", d.Name())
			continue
		}
		delete(cases, d.Name())
		t.Run(d.Name(), func(t *testing.T) {
			files := testenv.ReadFolder(t, filepath.Join("testdata", "refusals", d.Name()))
			_, err := Load(testenv.MountConfigMap(t, files))
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("accepted (err %v)", err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
	for name := range cases {
		t.Errorf("no folder testdata/refusals/%s", name)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name, project, identity, err string
	}{
		{"auth-system-auth-api", "auth", "auth-api", ""},
		{"knowledge-platform-system-basic-memory", "knowledge-platform", "basic-memory", ""},
		// The first "-system-" decides: one reading only.
		{"a-system-b-system-c", "a", "b-system-c", ""},
		{"data-system-postgres-backup", "data", "postgres-backup", ""},
		{"default", "", "", "is not <project>-system-<identity>"},
		{"-system-api", "", "", `Project ""`},
		{"auth-system-", "", "", `identity ""`},
		{"Auth-system-api", "", "", `Project "Auth"`},
		{"auth-system-api.v2", "", "", `identity "api.v2"`},
		{strings.Repeat("p", 60) + "-system-api", "", "", "does not make a namespace name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ParseName(tc.name)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.Project != tc.project || id.Name != tc.identity || id.VaultName() != tc.name {
				t.Errorf("read as %+v", id)
			}
		})
	}
}

func TestCheckRule(t *testing.T) {
	read, update := []string{"read"}, []string{"update"}
	for _, tc := range []struct {
		path         string
		capabilities []string
		err          string
	}{
		// The render's forms, each with exactly its capability.
		{"secret/data/auth-api", read, ""},
		{"secret/metadata/platform/postgres/auth", read, ""},
		{"database/creds/auth-owner", read, ""},
		{"transit/sign/auth-api-jwt", update, ""},
		{"transit/verify/k", update, ""},
		{"transit/encrypt/k", update, ""},
		{"transit/decrypt/k", update, ""},
		{"transit/keys/auth-api-jwt/rotate", update, ""},
		// Capabilities other than the form's.
		{"secret/data/auth-api", []string{"create"}, `not ["create"]`},
		{"secret/data/auth-api", []string{"read", "read"}, `not ["read" "read"]`},
		{"secret/data/auth-api", []string{"read", "list"}, `not ["read" "list"]`},
		{"secret/data/auth-api", []string{}, `not []`},
		{"database/creds/x", update, `not ["update"]`},
		{"transit/sign/k", read, `not ["read"]`},
		{"secret/data/auth-api", []string{"read", "sudo"}, "sudo is never granted"},
		// Shapes no grant derives.
		{"secret/data/*", read, "glob"},
		{"secret/data/a*", read, "glob"},
		{"secret/data/+/x", read, "+ segment"},
		{"+/data/x", read, "+ segment"},
		{"secret/data/x/+", read, "+ segment"},
		{"secret/data/{{identity.entity.id}}", read, "template"},
		{"sys/policies/acl", read, "under sys/"},
		{"sys", read, "under sys/"},
		{"auth/token/create", update, "under auth/"},
		{"auth", read, "under auth/"},
		{"secret/data", read, "not a form"},
		{"secret/data/", read, "not a form"},
		{"secret/data/a//b", read, "not a form"},
		{"secret/data/../../sys/x", read, "not a form"},
		{"secret/data/./x", read, "not a form"},
		{"secret/config", read, "not a form"},
		{"secret/destroy/x", read, "not a form"},
		{"database/creds/a/b", read, "not a form"},
		{"database/roles/x", read, "not a form"},
		{"transit/hmac/k", update, "not a form"},
		{"transit/keys/k", update, "not a form"},
		{"transit/sign/k/sha2-256", update, "not a form"},
		{"cubbyhole/x", read, "not a form"},
		{"/secret/data/x", read, "not a form"},
		{"secret/data/x y", read, "not a form"},
		{`secret/data/x"`, read, "not a form"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			err := CheckRule(Rule{Path: tc.path, Capabilities: tc.capabilities})
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func TestCheckRole(t *testing.T) {
	id := Identity{Project: "auth", Name: "auth-api"}
	good := Role{
		ServiceAccountNames: []string{"auth-api"}, ServiceAccountNamespaces: []string{"auth-system"},
		TokenPolicies: []string{"auth-system-auth-api"},
	}
	if err := CheckRole(id, good); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Role){
		"wildcard ServiceAccount":  func(r *Role) { r.ServiceAccountNames = []string{"*"} },
		"no ServiceAccount":        func(r *Role) { r.ServiceAccountNames = []string{} },
		"wildcard namespace":       func(r *Role) { r.ServiceAccountNamespaces = []string{"*"} },
		"selector":                 func(r *Role) { r.NamespaceSelector = `{"matchLabels":{}}` },
		"a second policy":          func(r *Role) { r.TokenPolicies = append(r.TokenPolicies, "default") },
		"no policy":                func(r *Role) { r.TokenPolicies = nil },
		"the namespace of another": func(r *Role) { r.ServiceAccountNamespaces = []string{"knowledge-system"} },
	} {
		role := good
		edit(&role)
		if err := CheckRole(id, role); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDecodeDocuments(t *testing.T) {
	for _, tc := range []struct {
		what, doc, err string
		role           bool
	}{
		{"empty path", `{"path":{}}`, "grants nothing", false},
		{"path not an object", `{"path":[]}`, `"path" is not an object`, false},
		{"path null", `{"path":null}`, `"path" is not an object`, false},
		{"no path", `{}`, `no "path" object`, false},
		{"capabilities not a list", `{"path":{"database/creds/x":{"capabilities":"read"}}}`, "not a list of strings", false},
		{"capabilities null", `{"path":{"database/creds/x":{"capabilities":null}}}`, "not a list of strings", false},
		{"rule not an object", `{"path":{"database/creds/x":["read"]}}`, "not a JSON object", false},
		{"invalid UTF-8", "{\"path\":{\"secret/data/\xff\":{\"capabilities\":[\"read\"]}}}", "not valid UTF-8", false},
		{"null document", `null`, "not a JSON object", false},
		{"unterminated", `{"path":{`, "not a JSON object", false},
		{"too large", `{"path":{"` + strings.Repeat("a", maxDocumentBytes) + `":{}}}`, "larger than", false},
		{"role missing names", `{"bound_service_account_namespaces":["a-system"],"token_policies":["a-system-b"]}`, `no "bound_service_account_names"`, true},
		{"role names not strings", `{"bound_service_account_names":[1],"bound_service_account_namespaces":["a-system"],"token_policies":["a-system-b"]}`, "not a list of strings", true},
		{"role empty selector", `{"bound_service_account_names":["b"],"bound_service_account_namespaces":["a-system"],"bound_service_account_namespace_selector":"","token_policies":["a-system-b"]}`, "namespace selector", true},
		{"role is a list", `[]`, "not a JSON object", true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var err error
			if tc.role {
				_, err = DecodeRole([]byte(tc.doc))
			} else {
				_, err = DecodePolicy([]byte(tc.doc))
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func TestDecodeEmptyRender(t *testing.T) {
	if _, err := Decode(map[string][]byte{}); err == nil || !strings.Contains(err.Error(), "no documents") {
		t.Fatalf("error %v", err)
	}
}

func TestDecodeRoleWithoutPolicy(t *testing.T) {
	files := renderFiles(t, "auth")
	delete(files, "auth-system-auth-api.policy.json")
	if _, err := Decode(files); err == nil || !strings.Contains(err.Error(), "has a role but no policy") {
		t.Fatalf("error %v", err)
	}
}

func TestSamePolicy(t *testing.T) {
	want, err := DecodePolicy([]byte(`{"path":{"database/creds/a":{"capabilities":["read"]},"secret/data/x":{"capabilities":["read"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for held, same := range map[string]bool{
		want.Encode(): true,
		// Vault holding the same grant spelled otherwise is as rendered.
		"{\n  \"path\": {\"secret/data/x\": {\"capabilities\": [\"read\"]},\n \"database/creds/a\": {\"capabilities\": [\"read\"]}}}": true,
		`path "secret/data/x" { capabilities = ["read"] }`:                                                  false,
		`{"path":{"secret/data/x":{"capabilities":["read"]}}}`:                                              false,
		`{"path":{"database/creds/a":{"capabilities":["read"]},"secret/data/*":{"capabilities":["read"]}}}`: false,
		"": false,
	} {
		if got := SamePolicy(held, want); got != same {
			t.Errorf("SamePolicy(%q) = %v", held, got)
		}
	}
}

func TestSameRole(t *testing.T) {
	want := Role{ServiceAccountNames: []string{"a"}, ServiceAccountNamespaces: []string{"p-system"}, TokenPolicies: []string{"p-system-a"}}
	same := want
	if !SameRole(same, want) {
		t.Error("an equal role differs")
	}
	for name, edit := range map[string]func(*Role){
		"selector":        func(r *Role) { r.NamespaceSelector = `{"matchLabels":{"x":"y"}}` },
		"more accounts":   func(r *Role) { r.ServiceAccountNames = []string{"a", "b"} },
		"namespace":       func(r *Role) { r.ServiceAccountNamespaces = []string{"*"} },
		"policies":        func(r *Role) { r.TokenPolicies = []string{"p-system-a", "admin"} },
		"policies absent": func(r *Role) { r.TokenPolicies = nil },
	} {
		held := want
		edit(&held)
		if SameRole(held, want) {
			t.Errorf("%s: seen as the same", name)
		}
	}
	reordered := Role{ServiceAccountNames: []string{"b", "a"}, ServiceAccountNamespaces: []string{"p-system"}, TokenPolicies: []string{"x"}}
	if !SameRole(reordered, Role{ServiceAccountNames: []string{"a", "b"}, ServiceAccountNamespaces: []string{"p-system"}, TokenPolicies: []string{"x"}}) {
		t.Error("order changed the comparison")
	}
}

func TestFindStale(t *testing.T) {
	render, err := Decode(renderFiles(t, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	policies := []string{
		"default", "root", "policy-admin", // Vault's own and the platform's fixtures
		"auth-system-auth-api", "auth-system-auth-migration", // named by the render
		"auth-system-old-worker",                  // stale
		"knowledge-system-knowledge-api",          // another Project's
		"authz-system-x",                          // another Project, sharing a prefix
		"auth-system-", "auth-system-Legacy_Role", // not a name the render could write
	}
	roles := []string{"policy-admin", "auth-system-auth-api", "auth-system-old-worker", "auth-system-old-worker", "auth-system-cron"}
	got := FindStale(render, policies, roles, "policy-admin")
	want := []Stale{{"policy", "auth-system-old-worker"}, {"role", "auth-system-cron"}, {"role", "auth-system-old-worker"}}
	if !slices.Equal(got, want) {
		t.Errorf("stale %v, want %v", got, want)
	}
	// The job's own login, though of the render's form and of a covered
	// Project, is never reported.
	got = FindStale(render, append(policies, "auth-system-vault-policy"), append(roles, "auth-system-vault-policy"), "auth-system-vault-policy")
	if !slices.Equal(got, want) {
		t.Errorf("with the job's own login of the render's form: stale %v, want %v", got, want)
	}
}
