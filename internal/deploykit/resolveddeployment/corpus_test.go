// deploy-kit's resolved-deployment corpus against the vendored schema and
// ResolvedDeployment. Refused by the generated types: a missing required
// field (missing-required, a Vault policy job with no address among them), a
// value of the wrong JSON type (wrong-type), a value outside an enum (enum)
// and a secret grant that is neither a path grant nor an engine grant (union:
// the type tries both branches and takes neither). Refused by the schema
// alone: a field the model does not have (unknown-field), because the
// generated UnmarshalJSON does not hold additionalProperties: false, and the
// rules across fields (rule: a blue-green switchover needs a release gate, a
// switchover needs a cutover), which are if/then conditions no generated type
// expresses. Every accepted document decodes into ResolvedDeployment and
// re-encodes to a document the schema accepts.
package resolveddeployment_test

import (
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/resolveddeployment"
)

func TestDeployKitCorpus(t *testing.T) {
	corpustest.Run[resolveddeployment.ResolvedDeployment](t, "resolved-deployment", corpustest.Expect{
		Breaks: map[string]corpustest.Means{
			"missing-required": corpustest.ByTypes,
			"wrong-type":       corpustest.ByTypes,
			"enum":             corpustest.ByTypes,
			"union":            corpustest.ByTypes,
			"unknown-field":    corpustest.BySchema,
			"rule":             corpustest.BySchema,
		},
	})
}
