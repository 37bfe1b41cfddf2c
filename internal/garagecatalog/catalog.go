// Package garagecatalog applies a bucket catalog to Garage through its admin
// API: one S3 key per consuming Project, kept in Vault, the Project's buckets,
// and read and write grants of the key on them. It never deletes a key, a
// bucket or a grant, and a run over a Garage and Vault that already hold the
// catalog writes nothing.
package garagecatalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaJSON is the catalog's JSON Schema (draft 2020-12), the format's
// published definition.
//
//go:embed catalog.schema.json
var SchemaJSON []byte

const schemaURL = "garage-catalog.schema.json"

// Defaults the catalog may leave out.
const (
	DefaultScheme     = "http"
	DefaultAPIVersion = "v2"
	DefaultTokenField = "admin-token"
)

// maxCatalogBytes bounds what Decode reads; a rendered catalog is a few
// kilobytes, so anything near this is not one.
const maxCatalogBytes = 4 << 20

var catalogSchema = mustCompileSchema()

func mustCompileSchema() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		panic(fmt.Sprintf("garage catalog schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		panic(fmt.Sprintf("garage catalog schema: %v", err))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		panic(fmt.Sprintf("garage catalog schema: %v", err))
	}
	return s
}

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
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the catalog is not JSON: %w", err)
	}
	if err := catalogSchema.Validate(inst); err != nil {
		return nil, fmt.Errorf("the catalog does not follow its schema: %s", schemaError(err))
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decode the catalog: %w", err)
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

// schemaError flattens a validation error to one line: the deepest causes,
// each with where in the catalog it is.
func schemaError(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	printer := message.NewPrinter(language.English)
	var parts []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			parts = append(parts, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}
