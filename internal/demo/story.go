package demo

import (
	"context"
	"net/http"
	"time"
)

// chapter is one part of the story. It returns an error only when the demo
// itself cannot go on (the API server refused a write); a step that did not
// happen as the story expects is noted and the story goes on.
type chapter struct {
	title string
	play  func(ctx context.Context, t *teller) error
}

// story is the release, chapter by chapter. A capability of the gate, or a
// service added to the demo, is one more chapter or one more step in one.
func story() []chapter {
	return []chapter{
		{"What serves today: auth at " + tag(servingRevision), whatServes},
		{"Flux applies revision " + tag(releaseRevision) + ": a schema migration, a new auth-api and a new auth-ui", newRender},
		{"The migration runs", migrationRuns},
		{"Flagger analyses both new copies; auth-ui's fails at first, and the barrier holds auth-api", analyse},
		{"auth-ui recovers; the barrier opens and Flagger promotes both", promoteBoth},
		{"Flux applies revision " + tag(staleRevision) + ", whose proof is stale", staleRelease},
	}
}

// tell plays the chapters in order, stopping only when one cannot go on.
func (t *teller) tell(ctx context.Context, chapters []chapter) {
	for _, c := range chapters {
		t.chapter++
		t.title("%d. %s", t.chapter, c.title)
		err := c.play(ctx, t)
		t.flush()
		if err != nil {
			t.miss("%s: %v", c.title, err)
			return
		}
	}
}

func whatServes(ctx context.Context, t *teller) error {
	m := t.mark(ctx)
	if err := t.applyRender(ctx, examples+"/serving.yaml", nil); err != nil {
		return err
	}
	t.say("Flagger initializes each Canary: it makes the -primary Deployment from the member's")
	t.say("template and scales the member's own Deployment to zero. What it recorded:")
	for _, p := range processes {
		t.expectPhase(ctx, m, p, "Initialized")
	}
	t.primaries(ctx)
	t.say("Every 15 s the gate reconciles every gated Application; its round records what serves:")
	t.awaitRecord(ctx, "the record says "+tag(servingRevision)+" serves", func(r record) bool { return r.Serving == servingRevision })
	return nil
}

func newRender(ctx context.Context, t *teller) error {
	t.say("auth-ui's new copy will answer 503 on /sign-in until chapter 5.")
	t.members.get("auth-ui").failOn("/sign-in")
	m := t.mark(ctx)
	file := examples + "/release-" + tag(releaseRevision) + ".yaml"
	err := t.applyRender(ctx, file, func() {
		t.say("Flux applies custom resources last. For a moment the Deployments hold the new templates")
		t.say("while the Canaries still carry %s, whose steps all completed. Flagger asks anyway:", tag(servingRevision))
		t.expectAnswer(ctx, m, "may-start", "auth-api", servingRevision, "not yet", "waiting for the render")
		t.noPodOfNewTemplates(ctx)
	})
	if err != nil {
		return err
	}
	t.say("Flagger asks again at the new revision; the gate holds both until the migration completes:")
	for _, p := range processes {
		t.expectAnswer(ctx, m, "may-start", p, releaseRevision, "not yet", "auth-migration-"+tag(releaseRevision))
		t.expectPhase(ctx, m, p, "Waiting")
	}
	t.askAsOutsider(ctx, "auth-api", "may-promote")
	return nil
}

func migrationRuns(ctx context.Context, t *teller) error {
	job := "auth-migration-" + tag(releaseRevision)
	serving, err := t.recordServing(ctx)
	if err != nil {
		return err
	}
	proven, err := t.testedAgainst(ctx)
	if err != nil {
		return err
	}
	t.say("The migration was tested against %s; the record says %s serves. The gate's", proven, serving)
	t.say("round weighs that proof against the cluster; what it did:")
	m := t.mark(ctx)
	t.awaitStarted(ctx, job)
	t.say("The scheduler places the Job's pod on kwok's node, which runs it to completion:")
	t.awaitComplete(ctx, job)
	t.say("At its next tick Flagger asks again, and starts the analysis:")
	done, err := t.completedAt(ctx, job)
	if err != nil {
		return err
	}
	for _, p := range processes {
		yes := t.expectAnswer(ctx, m, "may-start", p, releaseRevision, "yes", "every step")
		if !yes.at.IsZero() && (done.IsZero() || yes.at.Before(done)) {
			t.miss("the gate let %s start at %s, before %s completed at %s", p, yes.at.Format(time.TimeOnly), job, done.Format(time.TimeOnly))
		}
		t.expectPhase(ctx, m, p, "Progressing")
	}
	return nil
}

func analyse(ctx context.Context, t *teller) error {
	m := t.mark(ctx)
	api := t.members.get("auth-api")
	before := api.requests.Load()
	t.say("Each tick Flagger asks checks; the gate sends its own traffic to the new copy:")
	t.expectAnswer(ctx, m, "checks", "auth-api", releaseRevision, "yes", "")
	t.shows("(auth-api's new copy has answered %d requests from the gate)", api.requests.Load()-before)
	t.expectAnswer(ctx, m, "checks", "auth-ui", releaseRevision, "not yet", "own traffic")
	t.expectState(ctx, m, "Flagger counts a failed check on auth-ui", func(s canaryState) bool {
		return s.process == "auth-ui" && s.failedChecks > 0
	})
	t.say("auth-api passes its iterations and asks to be promoted while auth-ui has not passed:")
	t.expectPhase(ctx, m, "auth-api", "WaitingPromotion")
	t.expectAnswer(ctx, m, "may-promote", "auth-api", releaseRevision, "not yet", "barrier closed: auth-ui")
	t.shows("auth-api's primary runs %s", t.image(ctx, "auth-api-primary"))
	if t.phaseNow("auth-api") != "WaitingPromotion" {
		t.miss("auth-api went %s while auth-ui had not passed", t.phaseNow("auth-api"))
	}
	return nil
}

func promoteBoth(ctx context.Context, t *teller) error {
	t.members.get("auth-ui").failOn("")
	m := t.mark(ctx)
	t.say("auth-ui's new copy answers again; once it passes, the barrier opens for both:")
	for _, p := range processes {
		t.expectAnswer(ctx, m, "may-promote", p, releaseRevision, "yes", "barrier open")
	}
	for _, p := range processes {
		t.expectPhase(ctx, m, p, "Succeeded")
	}
	t.primaries(ctx)
	t.say("Flagger asks nothing after promotion. The gate's next round reads the members and their")
	t.say("primaries; what it recorded (no public host reaches the demo's Application, so its warmup")
	t.say("sends no request):")
	t.awaitRecord(ctx, "the record says "+tag(releaseRevision)+" serves, warmed", func(r record) bool {
		return r.Serving == releaseRevision && r.Warmup != nil && r.Warmup.Revision == releaseRevision && r.Warmup.Warmed
	})
	t.releases(ctx, func(r record) bool { return r.Serving == releaseRevision })
	return nil
}

func staleRelease(ctx context.Context, t *teller) error {
	m := t.mark(ctx)
	if err := t.applyRender(ctx, examples+"/release-"+tag(staleRevision)+".yaml", nil); err != nil {
		return err
	}
	job := "auth-migration-" + tag(staleRevision)
	t.expectAnswer(ctx, m, "may-start", "auth-api", staleRevision, "not yet", job)
	serving, err := t.recordServing(ctx)
	if err != nil {
		return err
	}
	proven, err := t.testedAgainst(ctx)
	if err != nil {
		return err
	}
	t.say("Its migration was tested against %s, but the record says %s serves. The gate's next", proven, serving)
	t.say("round weighs that proof; what it did, and what its log, /metrics and /releases say:")
	t.await(ctx, "the gate holds "+tag(staleRevision), t.roundWait, func(context.Context) (string, bool, error) {
		line := t.gate.logLine(`"msg":"release held"`, staleRevision)
		return "gate log: " + line, line != "", nil
	})
	// The schema untouched: neither this release's up nor any down ran.
	for _, name := range []string{job, "auth-migration-down-" + tag(staleRevision), "auth-migration-down-" + tag(releaseRevision)} {
		suspended, err := t.jobSuspended(ctx, name)
		if err != nil {
			return err
		}
		t.shows("Job %s: suspend %v", name, suspended)
		if !suspended {
			t.miss("the gate started %s while the release is held", name)
		}
	}
	if phase := t.phaseNow("auth-api"); phase != "Waiting" {
		t.miss("auth-api is %s while its release is held, not Waiting", phase)
	}
	t.say("GET /metrics from the scraper's address %s:", scraperAddress)
	t.metrics(ctx, scraperAddress, http.StatusOK, `reason="stale-proof"`)
	t.say("GET /metrics from %s, which is no scraper's pod:", outsiderAddress)
	t.metrics(ctx, outsiderAddress, http.StatusForbidden, "")
	t.releases(ctx, func(r record) bool { return r.Pinned == staleRevision && r.Serving == releaseRevision })
	return nil
}

// where prints how to look at what the story left behind; once, it says
// everything stops now.
func (t *teller) where(once bool) {
	if once {
		t.title("Where everything ran (--once: stopping now)")
	} else {
		t.title("Everything is still running")
	}
	t.say("the gate's answers    its log, every question Flagger asked: %s", t.gate.logFile)
	t.say("what serves, held     curl %s/releases", t.gate.url)
	t.say("the gate's metrics    curl --interface %s %s/metrics   (the scraper's address)", scraperAddress, t.gate.url)
	t.say("the cluster           export KUBECONFIG=%s", t.kubeconfig)
	t.say("                      kubectl -n %s get canaries,deployments,jobs,pods", namespace)
}

// primaries prints what each member's primary runs beside what its own
// Deployment holds, and notes a primary that does not run its member's
// template once Flagger has finished with it.
func (t *teller) primaries(ctx context.Context) {
	for _, p := range processes {
		primary, target := t.image(ctx, p+"-primary"), t.image(ctx, p)
		t.shows("%s-primary runs %s", p, primary)
		if primary != target {
			t.miss("%s-primary runs %s, not its member's %s", p, primary, target)
		}
	}
}

// noPodOfNewTemplates notes a pod of a new template that started while its
// Canary still carried the revision that serves.
func (t *teller) noPodOfNewTemplates(ctx context.Context) {
	for _, p := range processes {
		image := t.image(ctx, p)
		pods, err := t.podsRunning(ctx, image)
		if err != nil {
			t.miss("%v", err)
			continue
		}
		t.shows("pods running %s's new template: %d", p, len(pods))
		if len(pods) > 0 {
			t.miss("pod %s of %s's new template started before its release", pods[0], p)
		}
	}
}
