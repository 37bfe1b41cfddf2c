package corpustest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// SpecRel is deploy-kit's spec/v1 folder as vendored, relative to the
// repository's root.
var SpecRel = filepath.Join("third_party", "deploy-kit", "spec", "v1")

// The verdicts a corpus gives.
const (
	Accept = "accept"
	Refuse = "refuse"
)

// Case is one document of a corpus and deploy-kit's verdict on it.
type Case struct {
	Name    string
	Verdict string
	// Breaks is what a refused document breaks: unknown-field,
	// missing-required, wrong-type, enum, union or rule.
	Breaks string
	// Document is the document as JSON, patched as the case says.
	Document []byte
}

// SpecDir is the vendored spec/v1 folder, found from the test's folder up to
// the repository's root (the folder holding go.mod).
func SpecDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, SpecRel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder: cannot find the repository's root")
		}
		dir = parent
	}
}

// SchemaJSON is the vendored schema named (cluster-state-snapshot, …).
func SchemaJSON(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := fs.ReadFile(os.DirFS(SpecDir(t)), "schemas/"+name+".schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Schema compiles the vendored schema named, its formats asserted.
func Schema(t testing.TB, name string) *jsondoc.Schema {
	t.Helper()
	return jsondoc.MustCompile(SchemaJSON(t, name), jsondoc.AssertFormats())
}

type rawCase struct {
	Name    string          `json:"name"`
	Verdict string          `json:"verdict"`
	Breaks  string          `json:"breaks"`
	File    string          `json:"file"`
	Case    string          `json:"case"`
	Patch   json.RawMessage `json:"patch"`
	// Instance is the document written in the corpus itself.
	Instance json.RawMessage `json:"instance"`
}

// Cases reads the corpus of the schema named, each case's document resolved:
// read from the spec file it names (YAML read as JSON), written in the corpus,
// or taken from the case it names; then patched (RFC 6902) where it says.
func Cases(t testing.TB, name string) []Case {
	t.Helper()
	// Read through an fs.FS, so a corpus names no file outside the spec.
	spec := os.DirFS(SpecDir(t))
	raw, err := fs.ReadFile(spec, "schemas/corpus/"+name+".corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Schema string    `json:"schema"`
		Cases  []rawCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	if corpus.Schema != name+".schema.json" {
		t.Fatalf("the corpus of %s is %s's", name, corpus.Schema)
	}
	if len(corpus.Cases) == 0 {
		t.Fatalf("the corpus of %s has no cases", name)
	}
	docs := map[string][]byte{}
	out := make([]Case, 0, len(corpus.Cases))
	for _, c := range corpus.Cases {
		doc, err := resolve(spec, c, docs)
		if err != nil {
			t.Fatalf("%s: case %q: %v", name, c.Name, err)
		}
		docs[c.Name] = doc
		out = append(out, Case{Name: c.Name, Verdict: c.Verdict, Breaks: c.Breaks, Document: doc})
	}
	return out
}

func resolve(spec fs.FS, c rawCase, earlier map[string][]byte) ([]byte, error) {
	var doc []byte
	switch {
	case len(c.Instance) > 0:
		doc = c.Instance
	case c.File != "":
		source, err := fs.ReadFile(spec, c.File)
		if err != nil {
			return nil, err
		}
		if doc, err = yaml.YAMLToJSON(source); err != nil {
			return nil, err
		}
	case c.Case != "":
		base, ok := earlier[c.Case]
		if !ok {
			return nil, errors.New("names a case not given before it: " + c.Case)
		}
		doc = base
	default:
		return nil, errors.New("names no document")
	}
	if len(c.Patch) == 0 {
		return doc, nil
	}
	patch, err := jsonpatch.DecodePatch(c.Patch)
	if err != nil {
		return nil, err
	}
	return patch.Apply(doc)
}

// Means is what refuses a document deploy-kit refuses.
type Means string

const (
	// ByTypes means the generated type's UnmarshalJSON refuses it (a required
	// field, an enum or constant, a pattern, a length, a JSON type), and so
	// does the schema.
	ByTypes Means = "the generated types"
	// BySchema means only the schema refuses it (an unknown field, a union, a rule
	// across fields); the generated type decodes it.
	BySchema Means = "the schema alone"
)

// Expect says, for one schema, what refuses each kind of break its corpus
// has, and where the vendored schema disagrees with its corpus.
type Expect struct {
	// Breaks maps a refused case's Breaks to what refuses it.
	Breaks map[string]Means
	// Cases overrides Breaks for one case, by name.
	Cases map[string]Means
	// Disagree names the cases whose verdict the vendored schema does not
	// give, each with why. Run checks the schema still disagrees, so a
	// refresh that mends it fails until the entry goes.
	Disagree map[string]string
}

// Run holds the schema named and the generated type T to every case of its
// corpus. An accepted document is accepted by the schema, decodes into T,
// and re-encodes from T to a document the schema accepts that decodes to the
// same value. A refused document is refused by the schema, and by T where
// Expect says ByTypes; where it says BySchema, T decodes it, so the split
// the test states stays true.
func Run[T any](t *testing.T, name string, e Expect) {
	t.Helper()
	schema := Schema(t, name)
	for _, c := range Cases(t, name) {
		t.Run(c.Name, func(t *testing.T) {
			schemaErr := validate(schema, c.Document)
			if why, ok := e.Disagree[c.Name]; ok {
				if (schemaErr == nil) == (c.Verdict == Accept) {
					t.Fatalf("the vendored schema now agrees with the corpus (%s): drop the case from Disagree", c.Verdict)
				}
				t.Logf("the vendored schema disagrees with the corpus's %s: %s", c.Verdict, why)
				return
			}
			switch c.Verdict {
			case Accept:
				accepted[T](t, schema, c, schemaErr)
			case Refuse:
				means, ok := e.Cases[c.Name]
				if !ok {
					means, ok = e.Breaks[c.Breaks]
				}
				if !ok {
					t.Fatalf("no expectation says what refuses a case that breaks %q", c.Breaks)
				}
				refused[T](t, c, schemaErr, means)
			default:
				t.Fatalf("unknown verdict %q", c.Verdict)
			}
		})
	}
}

func accepted[T any](t *testing.T, schema *jsondoc.Schema, c Case, schemaErr error) {
	t.Helper()
	if schemaErr != nil {
		t.Fatalf("the schema refuses a document deploy-kit accepts: %v", schemaErr)
	}
	var v T
	if err := json.Unmarshal(c.Document, &v); err != nil {
		t.Fatalf("the generated type refuses a document deploy-kit accepts: %v", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("the decoded document does not encode: %v", err)
	}
	if err := validate(schema, out); err != nil {
		t.Fatalf("the schema refuses the document re-encoded from the generated type: %v\n%s", err, out)
	}
	var back T
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("the re-encoded document does not decode: %v", err)
	}
	if !reflect.DeepEqual(v, back) {
		t.Fatalf("the re-encoded document decodes to another value:\n%#v\n%#v", v, back)
	}
}

func refused[T any](t *testing.T, c Case, schemaErr error, means Means) {
	t.Helper()
	if schemaErr == nil {
		t.Fatalf("the schema accepts a document deploy-kit refuses (breaks %s)", c.Breaks)
	}
	var v T
	typeErr := json.Unmarshal(c.Document, &v)
	switch means {
	case ByTypes:
		if typeErr == nil {
			t.Fatalf("the generated type decodes a document that breaks %s; the test says the types refuse it", c.Breaks)
		}
	case BySchema:
		if typeErr != nil {
			t.Fatalf("the generated type now refuses a document that breaks %s (%v); the test says only the schema does: update it", c.Breaks, typeErr)
		}
	default:
		t.Fatalf("unknown means %q", means)
	}
}

func validate(schema *jsondoc.Schema, raw []byte) error {
	doc, err := jsondoc.Parse(raw)
	if err != nil {
		return err
	}
	return schema.Validate(doc)
}
