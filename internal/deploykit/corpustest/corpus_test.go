package corpustest_test

import (
	"maps"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/deploykit/clusterstate"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/compositionlock"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/corpustest"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/pinannotations"
	"github.com/JorisJonkers-dev/delivery/internal/deploykit/resolveddeployment"
)

// TestDeployKitCorpus holds each vendored schema and the Go type generated
// from it to every document of deploy-kit's corpus for that schema. Each row
// says which breaks the generated type refuses itself and which only the
// schema refuses, and why; every accepted document decodes into the type and
// re-encodes to a document the schema accepts.
func TestDeployKitCorpus(t *testing.T) {
	// object is what the generated type of an object refuses itself: a
	// missing required field, a value of the wrong JSON type and a value
	// outside an enum or constant. Only the schema refuses a field the model
	// does not have, because the generated UnmarshalJSON does not hold
	// additionalProperties: false.
	object := map[string]corpustest.Means{
		"missing-required": corpustest.ByTypes,
		"wrong-type":       corpustest.ByTypes,
		"enum":             corpustest.ByTypes,
		"unknown-field":    corpustest.BySchema,
	}
	for _, c := range []struct {
		schema string
		run    func(*testing.T, string, corpustest.Expect)
		expect corpustest.Expect
	}{
		// ClusterState refuses what any object type refuses, its kind being
		// the constant it checks.
		{"cluster-state-snapshot", corpustest.Run[clusterstate.ClusterState], corpustest.Expect{Breaks: object}},
		// CompositionLock refuses what any object type refuses. The corpus
		// and the schema were taken at different commits (see
		// third_party/deploy-kit/REF), and the corpus accepts an isolated
		// participant with no refused fragment, which the schema (and so the
		// type) requires; the row holds that disagreement until a refresh
		// mends it.
		{"composition-lock", corpustest.Run[compositionlock.CompositionLock], corpustest.Expect{
			Breaks: object,
			Disagree: map[string]string{
				"a participant that published nothing, isolated with no fragment to name": "the corpus and the schema come from different commits, and the schema's Isolation requires refused",
			},
		}},
		// PinAnnotations refuses an annotation of the wrong JSON type. The
		// schema is a union of three closed objects (no annotation; the three
		// pause keys; all five), and the generated UnmarshalJSON tries each
		// branch without their additionalProperties: false, so its empty
		// branch takes any object: only the schema refuses an annotation the
		// model does not have, a pause missing one of its three keys and a
		// Rollback that does not pause.
		{"pin-annotations", corpustest.Run[pinannotations.PinAnnotations], corpustest.Expect{
			Breaks: map[string]corpustest.Means{
				"wrong-type":       corpustest.ByTypes,
				"unknown-field":    corpustest.BySchema,
				"missing-required": corpustest.BySchema,
				"union":            corpustest.BySchema,
			},
		}},
		// ResolvedDeployment refuses what any object type refuses (its
		// missing required fields count a Vault policy job with no address)
		// and a secret grant that is neither a path grant nor an engine grant
		// (the type tries both branches and takes neither). Only the schema
		// refuses the rules across fields (a blue-green switchover needs a
		// release gate, a switchover needs a cutover), which are if/then
		// conditions no generated type expresses.
		{"resolved-deployment", corpustest.Run[resolveddeployment.ResolvedDeployment], corpustest.Expect{
			Breaks: with(object, map[string]corpustest.Means{"union": corpustest.ByTypes, "rule": corpustest.BySchema}),
		}},
	} {
		t.Run(c.schema, func(t *testing.T) { c.run(t, c.schema, c.expect) })
	}
}

// with is breaks and more, more winning where both name a break.
func with(breaks, more map[string]corpustest.Means) map[string]corpustest.Means {
	all := maps.Clone(breaks)
	maps.Copy(all, more)
	return all
}
