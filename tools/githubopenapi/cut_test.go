package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// full is a small document shaped as GitHub's: a path-level parameter, a
// chain of schemas, an example, a component nobody reaches, tags, webhooks.
const full = `{
  "openapi": "3.0.3",
  "info": {"title": "GitHub v3 REST API", "version": "1.1.4"},
  "servers": [{"url": "https://api.github.com"}],
  "tags": [{"name": "repos"}, {"name": "git"}, {"name": "apps"}],
  "paths": {
    "/repos/{owner}/{repo}/deployments": {
      "parameters": [{"$ref": "#/components/parameters/owner"}],
      "get": {"operationId": "repos/list-deployments", "tags": ["repos"],
        "parameters": [{"name": "per_page", "in": "query", "schema": {"type": "integer", "maximum": 100.50}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {
          "schema": {"type": "array", "items": {"$ref": "#/components/schemas/deployment"}},
          "examples": {"default": {"$ref": "#/components/examples/deployments"}}}}}}},
      "post": {"operationId": "repos/create-deployment", "tags": ["repos"],
        "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/unreached"}}}}}}
    },
    "/repos/{owner}/{repo}/git/blobs/{file_sha}": {
      "get": {"operationId": "git/get-blob", "tags": ["git"],
        "responses": {"404": {"$ref": "#/components/responses/not_found"}}}
    }
  },
  "x-webhooks": {"push": {"post": {"operationId": "push"}}},
  "components": {
    "parameters": {"owner": {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}}},
    "schemas": {
      "deployment": {"type": "object", "properties": {"creator": {"$ref": "#/components/schemas/nullable-simple-user"},
        "performed_via_github_app": {"allOf": [{"$ref": "#/components/schemas/integration/properties/owner"}]}}},
      "nullable-simple-user": {"type": "object", "nullable": true, "properties": {"login": {"type": "string", "description": "<b>a~b</b>"}}},
      "integration": {"type": "object", "properties": {"owner": {"$ref": "#/components/schemas/simple~1user"}}},
      "simple/user": {"type": "object"},
      "basic-error": {"type": "object"},
      "unreached": {"type": "object"}
    },
    "examples": {"deployments": {"value": [{"id": 1}]}},
    "responses": {"not_found": {"description": "Not Found", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/basic-error"}}}}}
  }
}`

func names(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not an object", v)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestCutKeepsTheOperationsAndWhatTheyReach(t *testing.T) {
	out, err := Cut([]byte(full), []string{"repos/list-deployments", "git/get-blob"})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if got := names(t, doc); !slices.Equal(got, []string{"components", "info", "openapi", "paths", "servers", "tags"}) {
		t.Errorf("top level %v: webhooks and nothing else dropped", got)
	}
	paths := doc["paths"].(map[string]any)
	if got := names(t, paths["/repos/{owner}/{repo}/deployments"]); !slices.Equal(got, []string{"get", "parameters"}) {
		t.Errorf("the deployments path keeps %v, want its get and its path-level parameters", got)
	}
	components := doc["components"].(map[string]any)
	want := map[string][]string{
		"schemas":    {"basic-error", "deployment", "integration", "nullable-simple-user", "simple/user"},
		"parameters": {"owner"}, "examples": {"deployments"}, "responses": {"not_found"},
	}
	if got := names(t, components); !slices.Equal(got, []string{"examples", "parameters", "responses", "schemas"}) {
		t.Errorf("component kinds %v", got)
	}
	for kind, w := range want {
		if got := names(t, components[kind]); !slices.Equal(got, w) {
			t.Errorf("%s: %v, want %v", kind, got, w)
		}
	}
	if tags := doc["tags"].([]any); len(tags) != 2 {
		t.Errorf("tags %v, want repos and git", tags)
	}
	// Numbers keep their spelling; markup is not escaped.
	if !bytes.Contains(out, []byte(`"maximum": 100.50`)) || !bytes.Contains(out, []byte(`"<b>a~b</b>"`)) {
		t.Errorf("the cut rewrote a value:\n%s", out)
	}
	// Cutting the cut again changes nothing, byte for byte.
	again, err := Cut(out, []string{"git/get-blob", "repos/list-deployments"})
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("a second cut differs (%v):\n%s", err, again)
	}
}

func TestCutRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		ops  []string
		want string
	}{
		"no operation":          {full, nil, "no operation named"},
		"an unknown operation":  {full, []string{"git/get-blob", "repos/get"}, "no operation repos/get"},
		"an operation twice":    {full, []string{"git/get-blob", "git/get-blob"}, "named twice"},
		"not JSON":              {`{"openapi":`, []string{"x"}, "not a JSON object"},
		"two values":            {`{"openapi":"3.0.3","paths":{}} {}`, []string{"x"}, "more than one JSON value"},
		"swagger 2":             {`{"swagger":"2.0","paths":{}}`, []string{"x"}, "not OpenAPI 3"},
		"a dangling reference":  {strings.Replace(full, `"basic-error": {"type": "object"},`, "", 1), []string{"git/get-blob"}, "names no component"},
		"an external reference": {strings.Replace(full, "#/components/responses/not_found", "other.json#/x", 1), []string{"git/get-blob"}, "not within the document"},
		"a reference to a path": {strings.Replace(full, "#/components/responses/not_found", "#/paths/x", 1), []string{"git/get-blob"}, "does not name a component"},
	} {
		_, err := Cut([]byte(tc.doc), tc.ops)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// TestTheVendoredCutIsWhatTheToolWrites cuts the vendored document to its own
// list: the tool must give it back byte for byte, so the file in the
// repository is the tool's output, untouched by hand.
func TestTheVendoredCutIsWhatTheToolWrites(t *testing.T) {
	dir := filepath.Join("..", "..", "third_party", "github")
	vendored, err := os.ReadFile(filepath.Join(dir, "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(dir, "operations.txt"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Cut(vendored, ParseOperations(string(list)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, vendored) {
		t.Fatal("third_party/github/api.github.com.json is not what the tool writes from itself and operations.txt: cut it anew")
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	ops := filepath.Join(dir, "operations.txt")
	if err := os.WriteFile(ops, []byte("# what the double serves\n\ngit/get-blob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage:") || stderr.Len() > 0 {
		t.Errorf("--help: %d %q %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	for _, args := range [][]string{{"--no-such-flag"}, {}, {"-operations", ops, "extra"}} {
		stderr.Reset()
		if code := run(args, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "Usage:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	out := filepath.Join(dir, "cut.json")
	stderr.Reset()
	if code := run([]string{"-operations", ops, "-out", out}, strings.NewReader(full), &stdout, &stderr); code != 0 {
		t.Fatalf("cut: exit %d: %s", code, stderr.String())
	}
	written, _ := os.ReadFile(out)
	if !bytes.Contains(written, []byte(`"git/get-blob"`)) || bytes.Contains(written, []byte(`"repos/list-deployments"`)) {
		t.Errorf("wrote %s", written)
	}
	stderr.Reset()
	if code := run([]string{"-operations", ops}, strings.NewReader(`{}`), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not OpenAPI 3") {
		t.Errorf("a document that is not OpenAPI: exit %d, %q", code, stderr.String())
	}
}

// FuzzCut feeds the cut documents and lists it was not written for: it must
// refuse them or cut them, never panic, and what it cuts must be a document
// it cuts again to the same bytes.
func FuzzCut(f *testing.F) {
	f.Add([]byte(full), "repos/list-deployments\ngit/get-blob")
	f.Add([]byte(full), "repos/create-deployment")
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/a":{"get":{"operationId":"a","x":{"$ref":"#/components/s/a/0"}}}},"components":{"s":{"a":[1]}}}`), "a")
	f.Add([]byte(`{"openapi":"3.0.0","paths":{"/a":{"get":{"operationId":"a","x":{"$ref":"#/components/s/~0/~1"}}}}}`), "a")
	f.Fuzz(func(t *testing.T, doc []byte, ops string) {
		list := ParseOperations(ops)
		out, err := Cut(doc, list)
		if err != nil {
			return
		}
		again, err := Cut(out, list)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("the cut does not cut to itself (%v):\n%s\n%s", err, out, again)
		}
	})
}
