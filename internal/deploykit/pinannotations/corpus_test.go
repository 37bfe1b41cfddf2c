// deploy-kit's pin-annotations corpus against the vendored schema and
// PinAnnotations. Refused by the generated types: an annotation of the wrong
// JSON type (wrong-type). Refused by the schema alone: an annotation the
// model does not have (unknown-field), a pause missing one of its three keys
// (missing-required) and a Rollback that does not pause (union). The schema
// is a union of three closed objects (no annotation; the three pause keys;
// all five), and the generated UnmarshalJSON tries each branch without their
// additionalProperties: false, so its empty branch takes any object: only
// the schema holds the valid sets. Every accepted document decodes into
// PinAnnotations and re-encodes to a document the schema accepts.
package pinannotations_test

import (
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/pinannotations"
)

func TestDeployKitCorpus(t *testing.T) {
	corpustest.Run[pinannotations.PinAnnotations](t, "pin-annotations", corpustest.Expect{
		Breaks: map[string]corpustest.Means{
			"wrong-type":       corpustest.ByTypes,
			"unknown-field":    corpustest.BySchema,
			"missing-required": corpustest.BySchema,
			"union":            corpustest.BySchema,
		},
	})
}
