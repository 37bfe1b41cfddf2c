// deploy-kit's cluster-state-snapshot corpus against the vendored schema and
// ClusterState. Refused by the generated types: a missing required field
// (missing-required), a value of the wrong JSON type (wrong-type) and a kind
// other than ClusterState (enum: the type checks the constant). Refused by
// the schema alone: a field the model does not have (unknown-field), because
// the generated UnmarshalJSON does not hold additionalProperties: false.
// Every accepted document decodes into ClusterState and re-encodes to a
// document the schema accepts.
package clusterstate_test

import (
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/clusterstate"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
)

func TestDeployKitCorpus(t *testing.T) {
	corpustest.Run[clusterstate.ClusterState](t, "cluster-state-snapshot", corpustest.Expect{
		Breaks: map[string]corpustest.Means{
			"missing-required": corpustest.ByTypes,
			"wrong-type":       corpustest.ByTypes,
			"enum":             corpustest.ByTypes,
			"unknown-field":    corpustest.BySchema,
		},
	})
}
