package releaserecord

import (
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
)

// ArgoCDFactSchema is the JSON Schema of an Argo CD fact.
//
//go:embed schema/argocd-fact.schema.json
var ArgoCDFactSchema []byte

var argoCDFactSchema = jsondoc.MustCompile(ArgoCDFactSchema)

// ArgoCD is Argo CD's notifications, at POST /argocd/{cluster}.
type ArgoCD struct{}

var _ Pushed = ArgoCD{}

// Name is "argo-cd".
func (ArgoCD) Name() string { return "argo-cd" }

// Route is POST /argocd/{cluster}.
func (ArgoCD) Route() string { return "POST /argocd/{cluster}" }

type argoCDFact struct {
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	App            string `json:"app"`
	Env            string `json:"env"`
	ReleaseID      string `json:"releaseId"`
	RollbackOf     string `json:"rollbackOf"`
	Image          string `json:"image"`
	OperationPhase string `json:"operationPhase"`
	RetryCount     int64  `json:"retryCount"`
	Message        string `json:"message"`
	Revision       string `json:"revision"`
	RepoURL        string `json:"repoURL"`
	// StartedAt is optional: templates written before it render none.
	StartedAt string `json:"startedAt"`
}

// Decode reads an Application's fact, held to the schema: a failed or
// errored sync is a sync failure, and so is one running again after a
// failed attempt (retryCount above 0), which Argo CD says long before it
// gives up; a running or succeeded one that names its release starts that
// release's record.
func (ArgoCD) Decode(raw []byte) (Claim, error) {
	var b argoCDFact
	if err := argoCDFactSchema.DecodeStrict(raw, &b); err != nil {
		return Claim{}, fmt.Errorf("the Argo CD fact %w", err)
	}
	c := Claim{Namespace: b.Namespace, ReleaseID: b.ReleaseID, App: b.App, Env: b.Env, Revision: b.Revision}
	rel := Release{Kind: KindPromote, RollbackOf: b.RollbackOf, Image: b.Image, GitURL: b.RepoURL, GitRevision: b.Revision}
	if b.RollbackOf != "" {
		rel.Kind = KindRollback
	}
	c.Fact.Release = rel
	if b.StartedAt != "" {
		// The schema holds it to RFC 3339; the record holds UTC years
		// 0001 to 9999, which an offset can carry it out of.
		at, err := time.Parse(time.RFC3339, b.StartedAt)
		if err == nil && (at.UTC().Year() < 1 || at.UTC().Year() > 9999) {
			err = errors.New("out of the years 0001 to 9999 in UTC")
		}
		if err != nil {
			return Claim{}, fmt.Errorf("the Argo CD fact's startedAt %q: %w", clip(b.StartedAt), err)
		}
		c.Fact.Order.SyncStartedAt = at
	}
	running := b.OperationPhase == "Running" || b.OperationPhase == "Succeeded"
	switch {
	case b.App == "" || b.Env == "":
		c.Ignore = "the Application " + b.Name + " carries no app and env labels: not tracked"
	case b.OperationPhase == "Failed" || b.OperationPhase == "Error" || (b.OperationPhase == "Running" && b.RetryCount > 0):
		c.Fact.Phase, c.Fact.Message = PhaseSyncFailed, b.Message
	case running && b.ReleaseID != "":
		c.Fact.Phase = PhaseMerged
	default:
		c.Ignore = "a sync " + orNone(b.OperationPhase) + " of " + b.Name + " says nothing to record"
	}
	return c, nil
}

func orNone(s string) string {
	if s == "" {
		return "with no operation"
	}
	return s
}
