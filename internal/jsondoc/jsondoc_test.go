package jsondoc_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

var schema = jsondoc.MustCompile([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://example.test/member.schema.json",
  "type": "object", "additionalProperties": false, "required": ["process"],
  "properties": {
    "process": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
    "seen": {"type": "string", "format": "date-time"},
    "port": {"type": "integer", "minimum": 1}
  }
}`), jsondoc.AssertFormats())

type member struct {
	Process string `json:"process"`
	Seen    string `json:"seen,omitempty"`
	Port    int    `json:"port,omitempty"`
}

func TestDecodeStrict(t *testing.T) {
	var m member
	if err := schema.DecodeStrict([]byte(`{"process":"auth-api","port":8080}`), &m); err != nil || m.Process != "auth-api" || m.Port != 8080 {
		t.Fatalf("DecodeStrict = %+v, %v", m, err)
	}
	cases := []struct {
		name, doc string
		is        error
		want      string
	}{
		{"not JSON", `{"process":`, jsondoc.ErrNotJSON, "not JSON"},
		{"unknown field", `{"process":"a","extra":1}`, jsondoc.ErrSchema, "/: additional properties 'extra' not allowed"},
		{"pattern", `{"process":"A b"}`, jsondoc.ErrSchema, "/process: "},
		{"format asserted", `{"process":"a","seen":"yesterday"}`, jsondoc.ErrSchema, "/seen: "},
		{"two causes on one line", `{"process":"A","port":0}`, jsondoc.ErrSchema, "; "},
		{"trailing data", `{"process":"a"} {"process":"b"}`, jsondoc.ErrNotJSON, "not JSON"},
		{"a name given twice: the schema would see only the last", `{"process":"A b","process":"a"}`, jsondoc.ErrNotJSON, `"process" appears twice`},
		{"a name given twice, once escaped", `{"process":"a","p\u0072ocess":"b"}`, jsondoc.ErrNotJSON, `"process" appears twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := schema.DecodeStrict([]byte(tc.doc), &member{})
			if err == nil || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("DecodeStrict(%s) = %v, want %v containing %q on one line", tc.doc, err, tc.is, tc.want)
			}
		})
	}
}

// A Go type that lacks a field the schema allows is caught by the strict
// decode, not silently dropped.
func TestDecodeStrictCatchesDrift(t *testing.T) {
	var narrow struct {
		Process string `json:"process"`
	}
	err := schema.DecodeStrict([]byte(`{"process":"a","port":1}`), &narrow)
	if err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("DecodeStrict into a narrower type = %v", err)
	}
}

func TestMustCompilePanicsOnABrokenSchema(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a schema that does not compile did not panic")
		}
	}()
	jsondoc.MustCompile([]byte(`{"type": 7}`))
}

func TestMustCompileFileReadsTheFolder(t *testing.T) {
	folder := fstest.MapFS{"schema/port.schema.json": {Data: []byte(`{"$id": "port.schema.json", "type": "integer", "minimum": 1}`)}}
	port := jsondoc.MustCompileFile(folder, "schema/port.schema.json")
	if err := port.Validate(float64(0)); err == nil {
		t.Fatal("0 held to minimum 1 passed")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "absent.schema.json") {
			t.Fatalf("a file not there: %v", r)
		}
	}()
	jsondoc.MustCompileFile(folder, "schema/absent.schema.json")
}

func TestOneLine(t *testing.T) {
	if got := jsondoc.OneLine(errors.New("a\n  b")); got != "a b" {
		t.Fatalf("OneLine = %q", got)
	}
}

// Names may repeat across objects, and a name may be a value; only a name
// given twice in one object is refused.
func TestParseRefusesANameGivenTwiceInOneObject(t *testing.T) {
	for doc, refused := range map[string]bool{
		`{"a":{"b":1},"c":{"b":2},"b":[{"b":3},{"b":4}]}`: false,
		`{"a":"a","b":["a","a"],"c":{"a":"a"}}`:           false,
		`[{"a":1},{"a":1}]`:                               false,
		`{"a":{"b":1,"b":2}}`:                             true,
		`{"a":[{"b":1},{"c":2,"c":3}]}`:                   true,
		`{"a":{},"a":[]}`:                                 true,
		`{"a":[1,{"x":{}}],"b":2,"a":3}`:                  true,
	} {
		if _, err := jsondoc.Parse([]byte(doc)); (err != nil) != refused {
			t.Errorf("Parse(%s) = %v, want refused %v", doc, err, refused)
		}
	}
}
