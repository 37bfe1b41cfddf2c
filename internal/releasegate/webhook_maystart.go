package releasegate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// mayStart answers confirm-rollout: may the member's new copy start.
type mayStart struct{ g *Gate }

func (mayStart) route() string { return WebhookMayStart }

// shows that the question needs the namespace's ConfigMaps, to compare the
// new copy's with Flagger's copies; it is not noted (routeOptions.noted).
func (mayStart) shows() routeOptions { return routeOptions{configMaps: true} }

// read reads, beside the common reads, the Application's Jobs, the
// namespace's Deployments and the gate's record of what serves: a yes starts
// the member's current template, so the answer must know whose it is.
func (w mayStart) read(ctx context.Context, q release.Question) decide {
	return w.g.readSteps(ctx, q, w.g.readDeployments(ctx, q)).answer
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

// jobTag matches the 12 hex digits a release Job's name ends in.
var jobTag = regexp.MustCompile(`^[a-f0-9]{12}$`)

// isReleaseJob reports whether j is a release Job of its identity, named
// <identity>-<tag>; down Jobs (<identity>-down-<tag>) and scheduled ones are not.
func isReleaseJob(j release.Job) bool {
	if j.Scheduled || j.Identity == "" {
		return false
	}
	tag, ok := strings.CutPrefix(j.Name, j.Identity+"-")
	return ok && jobTag.MatchString(tag)
}

// MayStart answers confirm-rollout: yes once the member's Deployment holds
// this revision's template (TemplateOfRevision) and every step of this
// revision has completed. Every identity that has a release Job of the
// Application is a step, and so is the inputs' migration before its first
// Job exists; each step's Job of this revision must be there and complete.
func MayStart(q release.Question, in *release.Inputs, jobs []release.Job, render Render) Answer {
	if a, ok := TemplateOfRevision(q, render); !ok {
		return a
	}
	steps := map[string]bool{}
	if in.Migration != nil {
		steps[in.Migration.Identity] = true
	}
	byName := make(map[string]release.Job, len(jobs))
	for _, j := range jobs {
		byName[j.Name] = j
		if isReleaseJob(j) {
			steps[j.Identity] = true
		}
	}
	if len(steps) == 0 {
		return yes("Application %s has no release step", q.Application)
	}
	identities := make([]string, 0, len(steps))
	for id := range steps {
		identities = append(identities, id)
	}
	slices.Sort(identities)
	var waiting []string
	for _, id := range identities {
		name := id + "-" + q.Tag()
		j, ok := byName[name]
		switch {
		case !ok || j.Identity != id:
			waiting = append(waiting, "job "+name+" not applied")
		case j.Failed:
			waiting = append(waiting, "job "+name+" failed")
		case !j.Complete:
			waiting = append(waiting, "job "+name+" not complete")
		}
	}
	if len(waiting) > 0 {
		return notYet("waiting for %s", list(waiting))
	}
	return yes("every step of %s completed (%s)", q.Tag(), list(identities))
}

// Render is what /may-start reads of the asking member's render: the revision
// the gate's record says serves, the member's Canary, its Deployment and its
// primary, and the ConfigMaps whose data Flagger has not copied to the
// primary yet (MovedConfigs).
type Render struct {
	// Serving is the revision the record says serves; "" when the record
	// names none or is not there.
	Serving string
	Canary  release.Canary
	// Target and Primary are the Deployments <process> and
	// <process>-primary; nil when not there.
	Target, Primary *release.Deployment
	MovedConfigs    []string
}

// TemplateOfRevision answers whether the template of the asking member's
// Deployment belongs to the revision asked, before /may-start lets Flagger
// start it: a yes starts the Deployment's current template, whatever revision
// the Canary's webhooks name. Flux applies Deployments before custom
// resources, so for a while a Deployment can hold a newer render's template
// while its Canary still carries the revision before; a yes then would start
// new code on the old schema. ok is false with the answer that holds.
//
//   - A template that carries RevisionAnnotation belongs to that revision.
//   - At the revision that serves, the Deployment must run what its primary
//     runs (images, commands, arguments, environment, and the ConfigMaps it
//     takes environment from): anything else is a render not wholly applied,
//     or an edit by hand.
//   - At any other revision without the annotation, the template must not
//     have been written after the Canary's webhooks last were: a later write
//     is a newer render (or a hand) over a release still waiting to start.
//     Where the API server's record of the writes (managed fields) says
//     neither when, the gate cannot tell, and holds.
func TemplateOfRevision(q release.Question, r Render) (Answer, bool) {
	waiting := func(format string, args ...any) (Answer, bool) {
		return notYet("waiting for the render: "+format, args...), false
	}
	if r.Target == nil {
		return waiting("%s has no Deployment %s", q.Process, q.Process)
	}
	marked := r.Target.TemplateRevision
	if marked != "" && marked != q.Revision {
		return waiting("%s's template is revision %s's, but its Canary carries %s", q.Process, tagOrValue(marked), q.Tag())
	}
	if q.Revision == r.Serving {
		switch {
		case r.Primary == nil:
			return waiting("%s has no primary %s to compare with", q.Process, q.Process+release.PrimarySuffix)
		case release.SameProgram(*r.Target, *r.Primary) != "" || len(r.MovedConfigs) > 0:
			return waiting("%s changed but its Canary still carries %s, which serves", q.Process, q.Tag())
		}
		return Answer{}, true
	}
	if marked == q.Revision {
		return Answer{}, true
	}
	written, hooked := r.Target.TemplateWrittenAt, r.Canary.WebhooksWrittenAt
	switch {
	case written.IsZero() || hooked.IsZero():
		return waiting("the API server does not say when %s's template and its Canary were written, so the template cannot be told to be %s's", q.Process, q.Tag())
	case written.After(hooked):
		return waiting("%s's template was written after its Canary carried %s (%s, Canary %s)",
			q.Process, q.Tag(), written.UTC().Format(time.RFC3339), hooked.UTC().Format(time.RFC3339))
	}
	return Answer{}, true
}

// tagOrValue shortens a revision to its tag for a reply, and clips anything
// else an annotation may hold.
func tagOrValue(revision string) string {
	if t := release.RevisionTag(revision); t != "" {
		return t
	}
	return fmt.Sprintf("%q", release.Clip(strings.TrimSpace(revision)))
}
