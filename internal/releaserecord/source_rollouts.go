package releaserecord

import (
	_ "embed"
	"fmt"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// RolloutsFactSchema is the JSON Schema of an Argo Rollouts fact.
//
//go:embed schema/rollouts-fact.schema.json
var RolloutsFactSchema []byte

var rolloutsFactSchema = jsondoc.MustCompile(RolloutsFactSchema)

// Rollouts is Argo Rollouts' notifications, at POST /facts/{cluster}.
type Rollouts struct{}

var _ Pushed = Rollouts{}

// Name is "argo-rollouts".
func (Rollouts) Name() string { return "argo-rollouts" }

// Route is POST /facts/{cluster}.
func (Rollouts) Route() string { return "POST /facts/{cluster}" }

type rolloutFact struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	ReleaseID          string `json:"releaseId"`
	Phase              string `json:"phase"`
	Aborted            bool   `json:"aborted"`
	PodTemplateHash    string `json:"podTemplateHash"`
	Generation         string `json:"generation"`
	ObservedGeneration string `json:"observedGeneration"`
	Message            string `json:"message"`
	// UID is optional: templates written before it render none.
	UID string `json:"uid"`
}

// Decode reads a Rollout's fact, held to the schema. Its generation orders
// the release: a later release of a Rollout changes its spec, so it is a
// later generation of it (of the same uid, where the fact names it).
func (Rollouts) Decode(raw []byte) (Claim, error) {
	var b rolloutFact
	if err := rolloutsFactSchema.DecodeStrict(raw, &b); err != nil {
		return Claim{}, fmt.Errorf("the Rollout fact %w", err)
	}
	c := Claim{Namespace: b.Namespace, ReleaseID: b.ReleaseID, Generation: b.Generation, ObservedGeneration: b.ObservedGeneration,
		Fact: Fact{Phase: Phase(b.Phase), Abort: b.Aborted, PodHash: b.PodTemplateHash, Message: b.Message,
			Order: Order{ObjectGeneration: ObjectGenerationOf("Rollout", b.Namespace, b.Name, b.UID, b.Generation)}}}
	if b.ReleaseID == "" {
		c.Ignore = "the Rollout " + b.Namespace + "/" + b.Name + " carries no release id: not tracked"
	}
	return c, nil
}
