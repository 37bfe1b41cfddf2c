package garagecatalog

import (
	_ "embed"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// SchemaJSON is the catalog's JSON Schema (draft 2020-12), the format's
// published definition.
//
//go:embed catalog.schema.json
var SchemaJSON []byte

// Defaults the catalog may leave out.
const (
	DefaultScheme     = "http"
	DefaultAPIVersion = "v2"
	DefaultTokenField = "admin-token"
)

// maxCatalogBytes bounds what Decode reads; a rendered catalog is a few
// kilobytes, so anything near this is not one.
const maxCatalogBytes = 4 << 20

var catalogSchema = jsondoc.MustCompile(SchemaJSON)

// Catalog is a decoded, valid bucket catalog.
type Catalog struct {
	AdminAPI   AdminAPI   `json:"adminApi"`
	AdminToken AdminToken `json:"adminToken"`
	Keys       []Key      `json:"keys"`
}

// AdminAPI is where Garage's admin API answers and which version it speaks.
type AdminAPI struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Scheme  string `json:"scheme,omitempty"`
	Version string `json:"version,omitempty"`
}

// URL is the admin API's base address, scheme://host:port.
func (a AdminAPI) URL() string {
	return (&url.URL{Scheme: a.Scheme, Host: net.JoinHostPort(a.Host, strconv.Itoa(a.Port))}).String()
}

// AdminToken names the kv v2 document and field holding the admin token.
type AdminToken struct {
	Path  string `json:"path"`
	Field string `json:"field,omitempty"`
}

// Key is one consuming Project's key and the buckets it may read and write.
type Key struct {
	Project string   `json:"project"`
	Process string   `json:"process"`
	Buckets []string `json:"buckets"`
}

// DocumentPath is the kv v2 API path of the Vault document holding the key.
func (k Key) DocumentPath() string {
	return "secret/data/" + k.Project + "/" + k.Process + "/s3"
}

// Decode reads one catalog, refusing anything that is not one JSON document,
// anything the schema does not allow, unknown fields and a Project named
// twice. Defaults are
// filled in on the result.
func Decode(r io.Reader) (*Catalog, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxCatalogBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	if len(raw) > maxCatalogBytes {
		return nil, fmt.Errorf("the catalog is larger than %d bytes", maxCatalogBytes)
	}
	var c Catalog
	if err := catalogSchema.DecodeStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("the catalog: %w", err)
	}

	seen := make(map[string]bool, len(c.Keys))
	for _, k := range c.Keys {
		if seen[k.Project] {
			return nil, fmt.Errorf("project %s is named by two keys; a Project has one key", k.Project)
		}
		seen[k.Project] = true
	}
	if c.AdminAPI.Scheme == "" {
		c.AdminAPI.Scheme = DefaultScheme
	}
	if c.AdminAPI.Version == "" {
		c.AdminAPI.Version = DefaultAPIVersion
	}
	if c.AdminToken.Field == "" {
		c.AdminToken.Field = DefaultTokenField
	}
	return &c, nil
}
