package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema.
type Schema struct {
	compiled *jsonschema.Schema
}

// Option changes how a schema is compiled.
type Option func(*jsonschema.Compiler)

// AssertFormats makes "format" (date-time, …) a check rather than a note.
func AssertFormats() Option { return func(c *jsonschema.Compiler) { c.AssertFormat() } }

// MustCompile compiles a schema the binary embeds, named by its $id. The
// schema is part of the program, so one that does not compile is a
// programming error and panics at start.
func MustCompile(doc []byte, opts ...Option) *Schema {
	var head struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		panic(fmt.Sprintf("embedded schema is not JSON: %v", err))
	}
	if head.ID == "" {
		head.ID = "schema.json"
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", head.ID, err))
	}
	c := jsonschema.NewCompiler()
	for _, opt := range opts {
		opt(c)
	}
	if err := c.AddResource(head.ID, parsed); err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", head.ID, err))
	}
	return &Schema{compiled: c.MustCompile(head.ID)}
}

// MustCompileFile is MustCompile of the file at name in an embedded folder.
func MustCompileFile(folder fs.FS, name string, opts ...Option) *Schema {
	raw, err := fs.ReadFile(folder, name)
	if err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	return MustCompile(raw, opts...)
}

// Validate holds a parsed document (as Parse gives it) to the schema.
func (s *Schema) Validate(doc any) error {
	if err := s.compiled.Validate(doc); err != nil {
		return errors.New(OneLine(err))
	}
	return nil
}

// Parse reads JSON as the validator wants it: numbers kept exact. A name
// repeated in one object is refused: the validator would see the last of
// its values and encoding/json merge them all, so a value the schema never
// held would reach the Go types.
func Parse(raw []byte) (any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errors.New(OneLine(err))
	}
	if err := repeatedName(raw); err != nil {
		return nil, err
	}
	return doc, nil
}

// repeatedName finds a member name given twice in one object of a document
// that parses, as written or escaped.
func repeatedName(raw []byte) error {
	type container struct {
		names map[string]bool // nil for an array
		// atName is true where an object's next token is a member name.
		atName bool
	}
	var open []*container
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errors.New(OneLine(err)) // not reached for a document that parsed
		}
		var top *container
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		if delim, ok := tok.(json.Delim); ok {
			switch delim {
			case '{', '[':
				if top != nil && top.names != nil {
					top.atName = true // this object or array is the member's value
				}
				c := &container{atName: delim == '{'}
				if delim == '{' {
					c.names = map[string]bool{}
				}
				open = append(open, c)
			default:
				open = open[:len(open)-1]
			}
			continue
		}
		if top == nil || top.names == nil {
			continue
		}
		if top.atName {
			name, _ := tok.(string)
			if top.names[name] {
				return fmt.Errorf("the name %q appears twice in one object", name)
			}
			top.names[name] = true
		}
		top.atName = !top.atName
	}
}

// ErrNotJSON marks a document that does not parse at all.
var ErrNotJSON = errors.New("not JSON")

// ErrSchema marks a document the schema refuses.
var ErrSchema = errors.New("refused by its schema")

// DecodeStrict parses raw, holds it to the schema, then decodes it into out
// refusing unknown fields and trailing data, so the Go type and the schema
// cannot drift apart unnoticed.
func (s *Schema) DecodeStrict(raw []byte, out any) error {
	doc, err := Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("does not decode: %s", OneLine(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("does not decode: data after the document")
	}
	return nil
}

// OneLine folds an error onto one line; a validation error becomes its
// deepest causes, each with where in the document it is, because every cause
// is logged or answered as one line.
func OneLine(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	english := message.NewPrinter(language.English)
	var causes []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			causes = append(causes, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(english))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(causes, "; ")
}
