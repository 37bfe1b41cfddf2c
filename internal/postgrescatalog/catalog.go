package postgrescatalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

//go:embed catalog.schema.json
var catalogSchemaJSON []byte

// catalogSchemaURL is the schema's own $id; the compiler needs a name for it.
// maxCatalogBytes bounds the file: a ConfigMap holds at most 1 MiB.
const maxCatalogBytes = 1 << 20

// catalogSchema is compiled once from the schema the binary embeds.
var catalogSchema = jsondoc.MustCompile(catalogSchemaJSON)

// Catalog is one server's database catalog.
type Catalog struct {
	Server    Server    `json:"server"`
	AdminPath string    `json:"adminPath"`
	Vault     VaultRefs `json:"vault"`
	Projects  []Project `json:"projects"`
}

// Server is where the job reaches PostgreSQL.
type Server struct {
	Host                string `json:"host"`
	Port                int    `json:"port"`
	MaintenanceDatabase string `json:"maintenanceDatabase,omitempty"`
	SSLMode             string `json:"sslmode,omitempty"`
}

// Defaults of the optional server fields.
const (
	DefaultMaintenanceDatabase = "postgres"
	DefaultSSLMode             = "verify-full"
)

// VaultRefs names the database secrets engine's mount and the connection the
// platform configured in it.
type VaultRefs struct {
	Mount      string `json:"mount"`
	Connection string `json:"connection"`
}

// Project is one consuming Project's entry. Every name in it is a fixed
// function of Project; the decoder refuses an entry where one is not.
type Project struct {
	Project    string     `json:"project"`
	Database   string     `json:"database"`
	OwnerRole  string     `json:"ownerRole"`
	DataRole   string     `json:"dataRole"`
	VaultRoles VaultRoles `json:"vaultRoles"`
}

// VaultRoles are the paths of the Project's two Vault database roles.
type VaultRoles struct {
	Owner string `json:"owner"`
	Data  string `json:"data"`
}

// Entry derives a Project's entry from its name alone, under mount.
func Entry(project, mount string) Project {
	p := Project{Project: project, Database: project + "_db", OwnerRole: project + "-owner", DataRole: project + "-data"}
	p.VaultRoles = VaultRoles{Owner: mount + "/roles/" + p.OwnerRole, Data: mount + "/roles/" + p.DataRole}
	return p
}

// Decode reads a catalog strictly: it must pass the schema, every field must
// be one this job knows, every name must be the one its Project derives, and
// each Project appears once. Nothing is applied from a catalog that reads any
// other way.
func Decode(raw []byte) (*Catalog, error) {
	if len(raw) > maxCatalogBytes {
		return nil, fmt.Errorf("catalog is %d bytes, more than a ConfigMap holds", len(raw))
	}
	var c Catalog
	if err := catalogSchema.DecodeStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if c.Server.MaintenanceDatabase == "" {
		c.Server.MaintenanceDatabase = DefaultMaintenanceDatabase
	}
	if c.Server.SSLMode == "" {
		c.Server.SSLMode = DefaultSSLMode
	}
	seen := make(map[string]bool, len(c.Projects))
	for i, p := range c.Projects {
		if seen[p.Project] {
			return nil, fmt.Errorf("catalog: project %q is named twice", p.Project)
		}
		seen[p.Project] = true
		if want := Entry(p.Project, c.Vault.Mount); p != want {
			return nil, fmt.Errorf("catalog: /projects/%d: project %q must read %s", i, p.Project, mustJSON(want))
		}
	}
	return &c, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Load reads and decodes the catalog file at path.
func Load(path string) (*Catalog, error) {
	f, err := os.Open(path) //nolint:gosec // the path is the job's own setting
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, maxCatalogBytes+1))
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}
