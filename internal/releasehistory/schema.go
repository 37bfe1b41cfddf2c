package releasehistory

import (
	"bytes"
	_ "embed"
	"encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// The schemas of the read API's answers. releases.schema.json refers to
// release.schema.json for each item, so it is compiled with that one beside.
var (
	//go:embed schema/release.schema.json
	ReleaseSchema []byte
	//go:embed schema/releases.schema.json
	ReleasesSchema []byte
	//go:embed schema/rollback-eligible.schema.json
	EligibilitySchema []byte
)

// Compiled answer schemas, for the tests and any client in this module.
var (
	ReleaseAnswer     = jsondoc.MustCompile(ReleaseSchema, jsondoc.AssertFormats())
	ReleasesAnswer    = jsondoc.MustCompile(ReleasesSchema, jsondoc.AssertFormats(), beside(ReleaseSchema))
	EligibilityAnswer = jsondoc.MustCompile(EligibilitySchema, jsondoc.AssertFormats())
)

// beside adds another embedded schema, by its $id, for a $ref to find.
func beside(doc []byte) jsondoc.Option {
	var head struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		panic("embedded schema is not JSON: " + err.Error())
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		panic("embedded schema " + head.ID + ": " + err.Error())
	}
	return func(c *jsonschema.Compiler) {
		if err := c.AddResource(head.ID, parsed); err != nil {
			panic("embedded schema " + head.ID + ": " + err.Error())
		}
	}
}
