package fakegarage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// DocumentRel is where Garage's published admin API v2 document lies,
// relative to the repository's root: vendored under third_party/garage, with
// the release it was taken at in the REF beside it.
var DocumentRel = filepath.Join("third_party", "garage", "garage-admin-v2.json")

// DocumentPath finds Garage's admin API v2 document in the repository the
// tests run in, whose root is the folder holding go.mod. The error names the
// place looked at.
func DocumentPath() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, DocumentRel)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the Garage admin API v2 document is absent: looked for %s; it is vendored under third_party/garage (scripts/schemas-check.sh refresh copies it)", path)
	}
	return path, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's folder: cannot find the repository's root")
		}
		dir = parent
	}
}

// LoadDocument loads Garage's admin API v2 document and corrects the one
// known defect of the published file: the operations declare their query
// parameters (id, search, globalAlias, showSecretKey, node...) as path
// parameters, although their paths have no template and Garage reads them
// from the query string. Those parameters are moved to the query: the ones
// Garage takes as optional (nullable, or a boolean flag) become optional, and
// the few published without a schema get the string Garage reads. Nothing
// else is changed. It returns the operations corrected, so a test can see the
// correction stays needed.
func LoadDocument(ctx context.Context, path string) (*openapi3.T, []string, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	var corrected []string
	for template, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			fixed := false
			for _, p := range op.Parameters {
				if p.Value == nil || p.Value.In != openapi3.ParameterInPath || strings.Contains(template, "{"+p.Value.Name+"}") {
					continue
				}
				p.Value.In = openapi3.ParameterInQuery
				if p.Value.Schema == nil {
					p.Value.Schema = openapi3.NewStringSchema().NewRef()
				} else if t := p.Value.Schema.Value.Type; t.Includes(openapi3.TypeNull) || t.Is(openapi3.TypeBoolean) {
					p.Value.Required = false
				}
				fixed = true
			}
			if fixed {
				corrected = append(corrected, method+" "+template)
			}
		}
	}
	// The document's one server is an example address; the double answers on
	// whatever address the test gives it.
	doc.Servers = nil
	if err := doc.Validate(ctx); err != nil {
		return nil, nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", path, err)
	}
	return doc, corrected, nil
}
