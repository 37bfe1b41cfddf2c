// deploy-kit's composition-lock corpus against the vendored schema and
// CompositionLock. Refused by the generated types: a missing required field
// (missing-required), a value of the wrong JSON type (wrong-type) and a kind
// other than CompositionLock (enum: the type checks the constant). Refused by
// the schema alone: a field the model does not have (unknown-field), because
// the generated UnmarshalJSON does not hold additionalProperties: false.
// Every accepted document decodes into CompositionLock and re-encodes to a
// document the schema accepts, but one: the corpus and the schema were taken
// at different commits (see third_party/deploy-kit/REF), and the corpus
// accepts an isolated participant with no refused fragment, which the schema
// (and so the type) requires; the test holds that disagreement until a
// refresh mends it.
package compositionlock_test

import (
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/compositionlock"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
)

func TestDeployKitCorpus(t *testing.T) {
	corpustest.Run[compositionlock.CompositionLock](t, "composition-lock", corpustest.Expect{
		Breaks: map[string]corpustest.Means{
			"missing-required": corpustest.ByTypes,
			"wrong-type":       corpustest.ByTypes,
			"enum":             corpustest.ByTypes,
			"unknown-field":    corpustest.BySchema,
		},
		Disagree: map[string]string{
			"a participant that published nothing, isolated with no fragment to name": "the corpus and the schema come from different commits, and the schema's Isolation requires refused",
		},
	})
}
