package releasegate

import (
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

func job(name, identity string, complete, failed bool) release.Job {
	return release.Job{Name: name, Identity: identity, Complete: complete, Failed: failed}
}

func TestMayStart(t *testing.T) {
	cases := []struct {
		name      string
		migration bool
		jobs      []release.Job
		outcome   Outcome
		reason    string
	}{
		{"an Application that never ran a step starts at once", false, nil, Yes, "no release step"},
		{"the inputs' migration is a step before its first Job exists", true, nil, NotYet, "job auth-migration-" + tag + " not applied"},
		{"a step whose Job of this revision completed", true, []release.Job{job("auth-migration-"+tag, "auth-migration", true, false)}, Yes, "every step of " + tag + " completed"},
		{"a step whose Job of this revision has not completed", true, []release.Job{job("auth-migration-"+tag, "auth-migration", false, false)}, NotYet, "not complete"},
		{"a step whose Job of this revision failed", true, []release.Job{job("auth-migration-"+tag, "auth-migration", false, true)}, NotYet, "failed"},
		{"an identity that ran a release Job before is a step", false, []release.Job{job("seed-2f4a6c8e0b2d", "seed", true, false)}, NotYet, "job seed-" + tag + " not applied"},
		{"every step complete", true, []release.Job{
			job("seed-2f4a6c8e0b2d", "seed", true, false), job("seed-"+tag, "seed", true, false),
			job("auth-migration-"+tag, "auth-migration", true, false),
		}, Yes, "auth-migration; seed"},
		{"a down Job is never a step", false, []release.Job{job("auth-migration-down-"+tag, "auth-migration", false, false)}, Yes, "no release step"},
		{"a Job a CronJob created is never a step", false, []release.Job{{Name: "backup-293847561234", Identity: "backup", Scheduled: true}}, Yes, "no release step"},
		{"a Job named for another identity is not the step's Job", true, []release.Job{job("auth-migration-"+tag, "other", true, false)}, NotYet, "not applied"},
		{"a Job whose name has no tag is not a release Job", false, []release.Job{job("seed-latest", "seed", false, false)}, Yes, "no release step"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want(t, MayStart(ask, inputs(c.migration), c.jobs, appliedRender()), c.outcome, c.reason)
		})
	}
}

func TestMayStartHoldsATemplateNotTheRevisions(t *testing.T) {
	// Every step of the revision completed, yet the template is a newer
	// render's: the render's hold comes first.
	r := appliedRender()
	r.Serving = rev
	want(t, MayStart(ask, inputs(true), []release.Job{job("auth-migration-"+tag, "auth-migration", true, false)}, r),
		NotYet, "waiting for the render: auth-api changed but its Canary still carries "+tag+", which serves")
	// With no step at all, too.
	want(t, MayStart(ask, inputs(false), nil, r), NotYet, "waiting for the render")
}

// writtenCanary is auth-api's Canary at rev, its webhooks written at hooked.
func writtenCanary(hooked time.Time) release.Canary {
	c := canary("auth-api", flaggerv1.CanaryPhaseSucceeded)
	c.WebhooksWrittenAt = hooked
	return c
}

// appliedRender is revision rev's render wholly applied over prevRev, which
// serves: auth-api's Deployment holds a new image, written a second before
// its Canary's webhooks.
func appliedRender() Render {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	target := deployment("auth-api", container("api:2"))
	target.TemplateWrittenAt = at.Add(-time.Second)
	return Render{Serving: prevRev, Canary: writtenCanary(at), Target: target, Primary: deployment("auth-api-primary", container("api:1"))}
}

func TestTemplateOfRevision(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	render := func(edit func(r *Render)) Render { r := appliedRender(); edit(&r); return r }
	cases := []struct {
		name    string
		render  Render
		applied bool
		reason  string
	}{
		{"a render wholly applied: the Deployment was written before its Canary", appliedRender(), true, ""},
		{"written in the same second as its Canary", render(func(r *Render) { r.Target.TemplateWrittenAt = at }), true, ""},
		{"at a revision not serving, a template written after its Canary is a newer render's",
			render(func(r *Render) { r.Target.TemplateWrittenAt = at.Add(time.Second) }), false,
			"waiting for the render: auth-api's template was written after its Canary carried " + tag},
		{"no record of when the template was written: the gate cannot tell",
			render(func(r *Render) { r.Target.TemplateWrittenAt = time.Time{} }), false, "cannot be told to be " + tag + "'s"},
		{"no record of when the Canary was written: the gate cannot tell",
			render(func(r *Render) { r.Canary.WebhooksWrittenAt = time.Time{} }), false, "cannot be told"},
		{"no record of what serves changes nothing of the rule",
			render(func(r *Render) { r.Serving = ""; r.Target.TemplateWrittenAt = at.Add(time.Second) }), false, "written after its Canary"},
		{"at the revision that serves, a Deployment that no longer runs what its primary runs",
			render(func(r *Render) { r.Serving = rev }), false,
			"waiting for the render: auth-api changed but its Canary still carries " + tag + ", which serves"},
		{"at the revision that serves, even when the template was written before its Canary",
			render(func(r *Render) { r.Serving = rev; r.Target.TemplateWrittenAt = at.Add(-time.Hour) }), false, "which serves"},
		{"at the revision that serves, a ConfigMap the environment comes from that Flagger has not copied",
			render(func(r *Render) {
				r.Serving = rev
				r.Target = deployment("auth-api", container("api:1"))
				r.MovedConfigs = []string{"auth-api-env"}
			}), false, "which serves"},
		{"at the revision that serves, a Deployment that runs what its primary runs",
			render(func(r *Render) {
				r.Serving = rev
				r.Target = deployment("auth-api", container("api:1"))
				r.Target.TemplateWrittenAt = at.Add(time.Hour)
			}), true, ""},
		{"at the revision that serves, no primary to compare with",
			render(func(r *Render) { r.Serving = rev; r.Primary = nil }), false, "has no primary auth-api-primary"},
		{"no Deployment", render(func(r *Render) { r.Target = nil }), false, "auth-api has no Deployment auth-api"},
		{"a template marked with the revision asked belongs to it, whenever it was written",
			render(func(r *Render) { r.Target.TemplateRevision = rev; r.Target.TemplateWrittenAt = at.Add(time.Hour) }), true, ""},
		{"a template marked with another revision is that revision's",
			render(func(r *Render) { r.Target.TemplateRevision = prevRev }), false,
			"auth-api's template is revision 2f4a6c8e0b2d's, but its Canary carries " + tag},
		{"a mark that is no revision is no mark of this one",
			render(func(r *Render) { r.Target.TemplateRevision = "latest" }), false, `revision "latest"'s`},
		{"a template marked with the revision that serves still runs what its primary runs or holds",
			render(func(r *Render) { r.Serving = rev; r.Target.TemplateRevision = rev }), false, "which serves"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := TemplateOfRevision(ask, c.render)
			if ok != c.applied {
				t.Fatalf("applied %v (%q), want %v", ok, got.Reason, c.applied)
			}
			if !ok {
				want(t, got, NotYet, c.reason)
			}
		})
	}
}
