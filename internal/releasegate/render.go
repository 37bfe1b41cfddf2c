package releasegate

import (
	"fmt"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

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
