package releasegate

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/release"

	"k8s.io/apimachinery/pkg/labels"
)

const (
	rev     = "sha256:b87d7fecf08d4ac6b91ac3ca9ac84b10a193d9a90a32929e194a2650ea2e8cca"
	tag     = "b87d7fecf08d"
	prevRev = "sha256:2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
)

var ask = release.Question{Namespace: "auth-system", Application: "auth", Process: "auth-api", Revision: rev}

func inputs(migration bool) *release.Inputs {
	in := &release.Inputs{
		Endpoint: "http://release-gate.delivery-system.svc.cluster.local:8080",
		Deadline: "1800s",
		Analysis: release.Analysis{Interval: "30s", Iterations: 4, Threshold: 3},
		Members: []release.Member{
			{Process: "auth-api", Readiness: release.Readiness{Path: "/ready", Port: 8081}, Checks: []string{"error-rate", "latency"}},
			{Process: "auth-ui", Readiness: release.Readiness{Path: "/", Port: 8080}},
		},
	}
	if migration {
		in.Migration = &release.Migration{Identity: "auth-migration", TestedAgainst: prevRev}
	}
	return in
}

func hooks(app, revision string) []map[string]string {
	md := map[string]string{"application": app, "process": "x", "revision": revision}
	return []map[string]string{md, md, md}
}

func canary(name, phase string) release.Canary {
	return release.Canary{Name: name, Webhooks: hooks("auth", rev), Phase: phase, LastAppliedSpec: "a", LastPromotedSpec: "a"}
}

func want(t *testing.T, got Answer, outcome Outcome, reason string) {
	t.Helper()
	if got.Outcome != outcome || !strings.Contains(got.Reason, reason) {
		t.Fatalf("answer %d %q, want %d containing %q", got.Outcome, got.Reason, outcome, reason)
	}
}

func TestIsFlagger(t *testing.T) {
	flagger := release.Pod{Name: "flagger-1", IPs: []string{"10.0.0.7"}, Running: true, ServiceAccount: "flagger"}
	mod := func(f func(*release.Pod)) []release.Pod { p := flagger; f(&p); return []release.Pod{p} }
	cases := []struct {
		name string
		addr string
		pods []release.Pod
		ok   bool
	}{
		{"a running Flagger pod's address", "10.0.0.7", []release.Pod{flagger}, true},
		{"the same address mapped into IPv6", "::ffff:10.0.0.7", []release.Pod{flagger}, true},
		{"another address", "10.0.0.8", []release.Pod{flagger}, false},
		{"no Flagger pod", "10.0.0.7", nil, false},
		{"a pod not Running", "10.0.0.7", mod(func(p *release.Pod) { p.Running = false }), false},
		{"a terminating pod", "10.0.0.7", mod(func(p *release.Pod) { p.Terminating = true }), false},
		{"a pod on the host network", "10.0.0.7", mod(func(p *release.Pod) { p.HostNetwork = true }), false},
		{"a pod under another ServiceAccount", "10.0.0.7", mod(func(p *release.Pod) { p.ServiceAccount = "default" }), false},
		{"a pod's second address", "fd00::7", mod(func(p *release.Pod) { p.IPs = append(p.IPs, "fd00::7") }), true},
		{"a pod with an address that does not parse", "10.0.0.7", mod(func(p *release.Pod) { p.IPs = []string{"x"} }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsFlagger(netip.MustParseAddr(c.addr), c.pods, "flagger"); got != c.ok {
				t.Fatalf("IsFlagger = %v, want %v", got, c.ok)
			}
		})
	}
	if IsFlagger(netip.Addr{}, []release.Pod{flagger}, "flagger") {
		t.Fatal("the zero address passed")
	}
}

func TestIdentify(t *testing.T) {
	in := inputs(false)
	cases := []struct {
		name    string
		q       release.Question
		c       release.Canary
		found   bool
		outcome Outcome
		reason  string
	}{
		{"a member asking at the revision its Canary carries", ask, canary("auth-api", release.PhaseProgressing), true, Yes, ""},
		{"a process that is no member", release.Question{Namespace: "auth-system", Application: "auth", Process: "billing", Revision: rev}, release.Canary{}, false, Unanswerable, "no member"},
		{"a Canary that is not there", ask, release.Canary{}, false, NotYet, "does not carry revision " + tag},
		{"a replaced render reads the same as a missing Canary", ask, release.Canary{Name: "auth-api", Webhooks: hooks("auth", prevRev)}, true, NotYet, "Canary auth-api does not carry revision " + tag},
		{"a Canary of another Application", ask, release.Canary{Name: "auth-api", Webhooks: hooks("billing", rev)}, true, Unanswerable, "belongs to Application billing"},
		{"a Canary whose webhooks carry two releases", ask, release.Canary{Name: "auth-api", Webhooks: append(hooks("auth", rev), map[string]string{"application": "auth", "revision": prevRev})}, true, Unanswerable, "two releases"},
		{"a Canary without the gate's webhooks", ask, release.Canary{Name: "auth-api", Webhooks: []map[string]string{{}}}, true, NotYet, "does not carry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := Identify(c.q, in, c.c, c.found)
			if c.outcome == Yes {
				if !ok {
					t.Fatalf("refused: %+v", a)
				}
				return
			}
			if ok {
				t.Fatal("identified")
			}
			want(t, a, c.outcome, c.reason)
		})
	}
}

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
	c := canary("auth-api", release.PhaseSucceeded)
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

func pod(name string, ready bool, restarts int) release.Pod {
	return release.Pod{Name: name, Ready: ready, Restarts: restarts, Running: true, Labels: map[string]string{"app.kubernetes.io/instance": "auth-api"}}
}

func TestChecks(t *testing.T) {
	cases := []struct {
		name    string
		pods    []release.Pod
		outcome Outcome
		reason  string
	}{
		{"a new copy with no pod", nil, NotYet, "has no pod"},
		{"a pod not ready", []release.Pod{pod("a", true, 0), pod("b", false, 0)}, NotYet, "pod b not ready (1 of 2 ready)"},
		{"a pod that restarted", []release.Pod{pod("a", true, 0), pod("b", true, 1)}, NotYet, "pod b restarted 1 times"},
		{"every pod ready, none restarted", []release.Pod{pod("a", true, 0), pod("b", true, 0)}, Yes, "2 pods ready"},
		{"the only pod ready but being deleted: no pod", []release.Pod{deleting(pod("a", true, 0))}, NotYet, "has no pod"},
		{"a pod being deleted is not counted ready", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 0)), pod("c", false, 0)},
			NotYet, "pod c not ready (1 of 2 ready)"},
		{"a pod being deleted beside ready ones is left out", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 0))}, Yes, "1 pods ready"},
		{"a pod being deleted still counts its restarts against a yes", []release.Pod{pod("a", true, 0), deleting(pod("b", true, 2))},
			NotYet, "pod b restarted 2 times"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, Checks(ask, c.pods), c.outcome, c.reason) })
	}
}

// deleting is p with a deletion timestamp: Terminating until its kubelet confirms.
func deleting(p release.Pod) release.Pod { p.Terminating = true; return p }

func container(image string, env ...release.EnvVar) release.Container {
	return release.Container{Name: "app", Image: image, Command: []string{"/app"}, Args: []string{"serve"}, Env: env}
}

func deployment(name string, cs ...release.Container) *release.Deployment {
	return &release.Deployment{Name: name, Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": name}), Containers: cs}
}

// barrier builds the two members of auth for the barrier: the asking auth-api
// and the other member auth-ui.
func barrier(own release.Canary, other release.MemberState) []release.MemberState {
	return []release.MemberState{{Process: "auth-api", Canary: own, HasCanary: true, Asked: rev}, other}
}

func ui(phase, asked string) release.MemberState {
	return release.MemberState{Process: "auth-ui", Canary: canary("auth-ui", phase), HasCanary: true, Asked: asked}
}

func unchangedUI() release.MemberState {
	m := ui(release.PhaseSucceeded, "")
	m.Target = deployment("auth-ui", container("ui:1"))
	m.Primary = deployment("auth-ui-primary", container("ui:1"))
	return m
}

func TestMayPromote(t *testing.T) {
	waiting := canary("auth-api", release.PhaseWaitingPromotion)
	analysed := canary("auth-api", release.PhaseProgressing)
	analysed.Iterations = 4
	midway := canary("auth-api", release.PhaseProgressing)
	midway.Iterations = 2
	changedUI := unchangedUI()
	changedUI.Target = deployment("auth-ui", container("ui:2"))
	unpromotedUI := unchangedUI()
	unpromotedUI.Canary.LastAppliedSpec = "b"
	initialisedUI := unchangedUI()
	initialisedUI.Canary.Phase = release.PhaseInitialized
	noPrimaryUI := unchangedUI()
	noPrimaryUI.Primary = nil
	noTargetUI := unchangedUI()
	noTargetUI.Target = nil
	otherRevUI := ui(release.PhaseWaitingPromotion, rev)
	otherRevUI.Canary.Webhooks = hooks("auth", prevRev)
	otherAppUI := ui(release.PhaseWaitingPromotion, rev)
	otherAppUI.Canary.Webhooks = hooks("billing", rev)

	cases := []struct {
		name    string
		members []release.MemberState
		outcome Outcome
		reason  string
	}{
		{"every member passed for this revision", barrier(waiting, ui(release.PhaseWaitingPromotion, rev)), Yes, "barrier open"},
		{"a member past promotion counts as passed", barrier(waiting, ui(release.PhasePromoting, rev)), Yes, "barrier open"},
		{"a member finalising counts as passed", barrier(waiting, ui(release.PhaseFinalising, rev)), Yes, "barrier open"},
		{"a member promoted at this revision counts as passed", barrier(waiting, ui(release.PhaseSucceeded, rev)), Yes, "barrier open"},
		{"the asking member analysed with every iteration counted", barrier(analysed, ui(release.PhaseWaitingPromotion, rev)), Yes, "barrier open"},
		{"the asking member still analysed", barrier(midway, ui(release.PhaseWaitingPromotion, rev)), NotYet, "auth-api is Progressing (2 of 4 iterations)"},
		{"another member still analysed", barrier(waiting, ui(release.PhaseProgressing, rev)), NotYet, "auth-ui is Progressing"},
		{"another member failed", barrier(waiting, ui(release.PhaseFailed, rev)), NotYet, "auth-ui is Failed"},
		{"a waiting member that has not asked at this revision", barrier(waiting, ui(release.PhaseWaitingPromotion, prevRev)), NotYet, "auth-ui is WaitingPromotion but has not asked at " + tag},
		{"a waiting member after the gate restarted", barrier(waiting, ui(release.PhaseWaitingPromotion, "")), NotYet, "has not asked"},
		{"a member that did not change", barrier(waiting, unchangedUI()), Yes, "barrier open"},
		{"a member initialised and unchanged", barrier(waiting, initialisedUI), Yes, "barrier open"},
		{"a member whose Deployment just changed, a tick ahead of Flagger", barrier(waiting, changedUI), NotYet, "primary does not run what its Deployment holds (container app image)"},
		{"a member whose spec Flagger has not promoted", barrier(waiting, unpromotedUI), NotYet, "has a spec Flagger has not promoted"},
		{"a member with no primary", barrier(waiting, noPrimaryUI), NotYet, "has no primary auth-ui-primary"},
		{"a member with no Deployment", barrier(waiting, noTargetUI), NotYet, "has no Deployment auth-ui"},
		{"a member with no Canary", barrier(waiting, release.MemberState{Process: "auth-ui"}), NotYet, "auth-ui has no Canary"},
		{"a member whose Canary carries another revision", barrier(waiting, otherRevUI), NotYet, "auth-ui does not carry revision " + tag},
		{"a member whose Canary is another Application's", barrier(waiting, otherAppUI), Unanswerable, "belongs to Application billing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, MayPromote(ask, inputs(false), c.members), c.outcome, c.reason) })
	}
}

func TestRollback(t *testing.T) {
	own := func(phase string, pods ...release.Pod) release.MemberState {
		return release.MemberState{Process: "auth-api", Canary: canary("auth-api", phase), HasCanary: true, Pods: pods}
	}
	other := func(phase string, pods ...release.Pod) []release.MemberState {
		m := ui(phase, rev)
		m.Pods = pods
		return []release.MemberState{m}
	}
	otherRev := other(release.PhaseFailed)
	otherRev[0].Canary.Webhooks = hooks("auth", prevRev)
	otherApp := other(release.PhaseProgressing)
	otherApp[0].Canary.Webhooks = hooks("billing", rev)
	cases := []struct {
		name    string
		own     release.MemberState
		others  []release.MemberState
		outcome Outcome
		reason  string
	}{
		{"own pod restarted 3 times while analysed", own(release.PhaseProgressing, pod("a", false, 3)), nil, Yes, "pod a of new copy auth-api restarted 3 times"},
		{"own pods restarted less than 3 times", own(release.PhaseProgressing, pod("a", true, 2)), other(release.PhaseProgressing), NotYet, "can still pass"},
		{"another member failed at this revision", own(release.PhaseProgressing, pod("a", true, 0)), other(release.PhaseFailed), Yes, "auth-ui failed its analysis"},
		{"another member's pod restarted 3 times", own(release.PhaseProgressing, pod("a", true, 0)), other(release.PhaseProgressing, pod("u", true, 4)), Yes, "pod u of new copy auth-ui restarted 4 times"},
		{"another member failed at another revision", own(release.PhaseProgressing, pod("a", true, 0)), otherRev, NotYet, "can still pass"},
		{"another member failed at this revision without asking anything (its copy never became ready)", own(release.PhaseProgressing, pod("a", true, 0)),
			func() []release.MemberState { m := other(release.PhaseFailed); m[0].Asked = ""; return m }(), Yes, "auth-ui failed its analysis"},
		{"another member's Canary belongs to another Application", own(release.PhaseProgressing, pod("a", true, 0)), otherApp, Unanswerable, "Canary auth-ui belongs to Application billing"},
		{"at the barrier with a ready new copy", own(release.PhaseWaitingPromotion, pod("a", true, 0)), other(release.PhaseFailed), Yes, "auth-ui failed"},
		{"at the barrier without a ready new copy", own(release.PhaseWaitingPromotion, pod("a", false, 5)), other(release.PhaseFailed), NotYet, "waits at the barrier without a ready new copy"},
		{"at the barrier with no pod", own(release.PhaseWaitingPromotion), other(release.PhaseFailed), NotYet, "without a ready new copy"},
		{"waiting to start", own(release.PhaseWaiting, pod("a", false, 5)), other(release.PhaseFailed), NotYet, "auth-api is Waiting, neither analysed nor at the barrier"},
		{"succeeded", own(release.PhaseSucceeded), other(release.PhaseFailed), NotYet, "neither analysed"},
		{"failed already", own(release.PhaseFailed), nil, NotYet, "neither analysed"},
		{"without a phase", own(""), nil, NotYet, "without a phase"},
		{"own pod being deleted still counts its restarts", own(release.PhaseProgressing, deleting(pod("a", true, 3))), nil, Yes, "pod a of new copy auth-api restarted 3 times"},
		{"another member's pod being deleted still counts its restarts", own(release.PhaseProgressing, pod("a", true, 0)),
			other(release.PhaseProgressing, deleting(pod("u", true, 3))), Yes, "pod u of new copy auth-ui restarted 3 times"},
		{"at the barrier with only a pod being deleted: no ready new copy", own(release.PhaseWaitingPromotion, deleting(pod("a", true, 0))),
			other(release.PhaseFailed), NotYet, "without a ready new copy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, Rollback(ask, c.own, c.others), c.outcome, c.reason) })
	}
}

func TestListKeepsReasonsShort(t *testing.T) {
	got := list([]string{"a", "b", "c", "d", "e", "f", "g"})
	if got != "a; b; c; d; e; and 2 more" {
		t.Fatalf("list = %q", got)
	}
}
