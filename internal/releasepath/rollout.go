package releasepath

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// The Rollout annotations on a Project's unit (rollout-annotations.schema.json).
const (
	AnnotationPrefix     = "estate.jorisjonkers.dev/rollout-"
	AnnotationRepository = AnnotationPrefix + "repository"
	AnnotationVersion    = AnnotationPrefix + "version"
	AnnotationDigest     = AnnotationPrefix + "digest"
	AnnotationURL        = AnnotationPrefix + "url"
)

// RolloutAnnotationsSchema is the JSON Schema of the Rollout annotations.
//
//go:embed rollout-annotations.schema.json
var RolloutAnnotationsSchema []byte

var rolloutSchema = jsondoc.MustCompile(RolloutAnnotationsSchema)

// Rollout is the release a unit's pin carries: where its Deployment lives,
// the version it releases and where the release is reached.
type Rollout struct {
	Repository githubapp.Repository
	Version    string
	// Digest is what the workflow pinned the unit's source to with it.
	Digest string
	// URL is the rollout URL; "" when the unit names none.
	URL string
}

// ErrNoRollout marks a unit that carries no Rollout annotation at all.
var ErrNoRollout = errors.New("the unit carries no " + AnnotationPrefix + "* annotation")

// RolloutOf reads the Rollout annotations among a unit's annotations. It
// returns ErrNoRollout when there are none, and an error naming the first
// fault when they do not hold to the schema.
func RolloutOf(annotations map[string]string) (Rollout, error) {
	doc := map[string]any{}
	for k, v := range annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			doc[k] = v
		}
	}
	if len(doc) == 0 {
		return Rollout{}, ErrNoRollout
	}
	if err := rolloutSchema.Validate(doc); err != nil {
		return Rollout{}, fmt.Errorf("the Rollout annotations do not hold to the schema: %w", err)
	}
	repo, err := githubapp.ParseRepository(annotations[AnnotationRepository])
	if err != nil {
		return Rollout{}, fmt.Errorf("%s: %w", AnnotationRepository, err)
	}
	return Rollout{Repository: repo, Version: annotations[AnnotationVersion], Digest: annotations[AnnotationDigest],
		URL: annotations[AnnotationURL]}, nil
}
