package releasegate

import (
	"context"
	"errors"
	"fmt"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"k8s.io/apimachinery/pkg/labels"
)

// mayStart reads, beside the common reads, the Application's Jobs, the
// namespace's Deployments and the gate's record of what serves: a yes starts
// the member's current template, so the answer must know whose it is.
func (g *Gate) mayStart(ctx context.Context, q release.Question) func(asked) (Answer, error) {
	steps := g.readSteps(ctx, q, g.readDeployments(ctx, q))
	return steps.answer
}

// stepReads are the reads MayStart's rule needs: the namespace's
// Deployments (the answer's one list of them, shared with the webhook's own
// decision), the Application's Jobs and the revision the record says serves.
type stepReads struct {
	deployments *future[[]release.Deployment]
	jobs        *future[[]release.Job]
	serving     *future[string]
}

func (g *Gate) readSteps(ctx context.Context, q release.Question, deployments *future[[]release.Deployment]) stepReads {
	sel := labels.SelectorFromSet(labels.Set{release.LabelPartOf: q.Application, release.LabelManagedBy: release.ManagedBy})
	return stepReads{
		deployments: deployments,
		jobs: async(func() ([]release.Job, error) {
			js, err := g.cluster.Jobs(ctx, q.Namespace, sel)
			if err != nil {
				return nil, fmt.Errorf("list the Jobs of %s/%s: %w", q.Namespace, q.Application, err)
			}
			return js, nil
		}),
		serving: async(func() (string, error) { return g.servingRevision(ctx, q) }),
	}
}

// answer is MayStart's: the asking member's Deployment holds the revision's
// template and every step of the revision completed. /checks and
// /may-promote are held to it too, since Flagger restarts an analysis
// without asking confirm-rollout when a template changes under it: a newer
// render landing mid-analysis must neither pass nor be promoted before its
// own steps ran.
func (s stepReads) answer(a asked) (Answer, error) {
	ds, err := s.deployments.get()
	if err != nil {
		return Answer{}, err
	}
	js, err := s.jobs.get()
	if err != nil {
		return Answer{}, err
	}
	r := Render{Canary: a.own, Target: deploymentNamed(ds, a.q.Process), Primary: deploymentNamed(ds, a.q.Process+release.PrimarySuffix)}
	if r.Serving, err = s.serving.get(); err != nil {
		return Answer{}, err
	}
	if r.Target != nil && r.Primary != nil {
		r.MovedConfigs = release.MovedConfigs(*r.Target, *r.Primary, release.ConfigsByName(a.configMaps))
	}
	return MayStart(a.q, a.in, js, r), nil
}

// servingRevision is the revision the gate's record of q's Application says
// serves: "" when there is no record yet. A record that does not decode is a
// question the gate cannot answer, as it is for a round.
func (g *Gate) servingRevision(ctx context.Context, q release.Question) (string, error) {
	name := release.RecordConfigMap(q.Namespace, q.Application)
	cm, err := g.cluster.ConfigMap(ctx, g.config.GateNamespace, name)
	switch {
	case errors.Is(err, release.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the record %s/%s: %w", g.config.GateNamespace, name, err)
	}
	r, err := release.DecodeRecord(q.Namespace, q.Application, cm.Data)
	if err != nil {
		return "", err
	}
	return r.Serving, nil
}
