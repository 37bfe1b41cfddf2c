package postgrescatalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeWorkedCatalog(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.MaintenanceDatabase != "postgres" || c.Server.SSLMode != "verify-full" || c.Server.Port != 5432 {
		t.Errorf("server %+v", c.Server)
	}
	if len(c.Projects) != 2 || c.Projects[1] != Entry("knowledge", "database") {
		t.Errorf("projects %+v", c.Projects)
	}
	if c.AdminPath != "secret/data/data-system/platform-postgres-admin" || c.Vault.Connection != "platform-postgres" {
		t.Errorf("catalog %+v", c)
	}
}

func TestDecodeDefaults(t *testing.T) {
	c, err := Decode([]byte(`{"server":{"host":"10.0.0.7","port":5433,"maintenanceDatabase":"maintenance","sslmode":"disable"},
		"adminPath":"database/static-creds/admin","vault":{"mount":"db/pg","connection":"pg"},
		"projects":[{"project":"n8n","database":"n8n_db","ownerRole":"n8n-owner","dataRole":"n8n-data",
		"vaultRoles":{"owner":"db/pg/roles/n8n-owner","data":"db/pg/roles/n8n-data"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.MaintenanceDatabase != "maintenance" || c.Server.SSLMode != "disable" || c.Projects[0].VaultRoles.Data != "db/pg/roles/n8n-data" {
		t.Errorf("%+v", c)
	}
}

// Every file of the refusal corpus is refused whole, with a reason.
func TestDecodeRefusals(t *testing.T) {
	want := map[string]string{
		"hostile-project.json":        "refused by its schema",
		"hostile-database.json":       "/projects/0/database",
		"hostile-connection.json":     "/vault/connection",
		"database-not-derived.json":   `project "auth" must read`,
		"vault-role-not-derived.json": `project "auth" must read`,
		"vault-role-other-mount.json": `"owner":"database/roles/auth-owner"`,
		"project-twice.json":          `project "auth" is named twice`,
		"unknown-field.json":          "additional properties 'extra'",
		"unknown-entry-field.json":    "additional properties 'password'",
		"upper-case-project.json":     "/projects/0/project",
		"trailing-hyphen.json":        "/projects/0/project",
		"project-too-long.json":       "/projects/0/project",
		"sslmode-prefer.json":         "/server/sslmode",
		"admin-path-dots.json":        "/adminPath",
		"no-projects.json":            "missing property 'projects'",
		"two-documents.json":          "not JSON",
		"port-zero.json":              "/server/port",
		"template-maintenance.json":   "/server/maintenanceDatabase",
		"not-json.json":               "not JSON",
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "refusals"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%d refusal files, %d expectations", len(entries), len(want))
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", "refusals", e.Name()))
			if err == nil {
				t.Fatalf("accepted %+v", c)
			}
			if !strings.Contains(err.Error(), want[e.Name()]) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want it to say %q on one line", err, want[e.Name()])
			}
		})
	}
}

func TestLoadRefusesAnOversizedOrMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(strings.Repeat(" ", maxCatalogBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "more than a ConfigMap holds") {
		t.Errorf("oversized: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestJobPolicy(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `path "secret/data/data-system/platform-postgres-admin" { capabilities = ["read"] }
path "database/roles/*" { capabilities = ["read", "create", "update"] }
`
	if got := JobPolicy(c); got != want {
		t.Errorf("%s", got)
	}
}
