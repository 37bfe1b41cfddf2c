package demo

import (
	"context"
	"net/http"

	"github.com/JorisJonkers-dev/delivery/internal/probe"
)

// chapter is one part of the story. It returns an error only when the demo
// itself cannot go on (the API server refused a write); an answer the story
// did not expect is noted and the story goes on.
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
		{"Flagger analyses auth-api", analyseAPI},
		{"Flagger analyses auth-ui; the barrier opens", analyseUI},
		{"Flagger promotes both members; the gate records what serves", promoteBoth},
		{"Flux applies revision " + tag(staleRevision) + ", whose proof is stale", staleRelease},
	}
}

// tell plays the chapters in order, stopping only when one cannot go on.
func (t *teller) tell(ctx context.Context, chapters []chapter) {
	for _, c := range chapters {
		t.chapter++
		t.title("%d. %s", t.chapter, c.title)
		if err := c.play(ctx, t); err != nil {
			t.miss("%s: %v", c.title, err)
			return
		}
	}
}

func whatServes(ctx context.Context, t *teller) error {
	t.say("examples/demo/serving.yaml holds the Application as it runs: both members Succeeded,")
	t.say("each primary running what its Deployment holds, migration %s complete.", "auth-migration-"+tag(servingRevision))
	t.say("Every 15 s the gate tends every gated Application; its first round records what serves:")
	t.awaitRecord(ctx, "the record says "+tag(servingRevision)+" serves", func(r record) bool { return r.Serving == servingRevision })
	return nil
}

func newRender(ctx context.Context, t *teller) error {
	if err := t.apply(ctx, examples+"/release-"+tag(releaseRevision)+".yaml"); err != nil {
		return err
	}
	t.say("Flagger sees both Deployments changed and asks before it starts either:")
	t.ask(ctx, "auth-api", "may-start", http.StatusConflict, "auth-migration-"+tag(releaseRevision))
	t.ask(ctx, "auth-ui", "may-start", http.StatusConflict, "auth-migration-"+tag(releaseRevision))
	for _, p := range []string{"auth-api", "auth-ui"} {
		if err := t.canaryStatus(ctx, p, map[string]any{"phase": "Waiting"}); err != nil {
			return err
		}
	}
	t.say("Flagger records both Canaries as Waiting. A caller that is not Flagger is refused:")
	t.askFrom(ctx, outsiderAddress, "auth-api", "may-promote", http.StatusForbidden, "Flagger")
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
	t.say("next round weighs that proof against the cluster; what it did:")
	t.awaitStarted(ctx, job)
	if err := t.completeJob(ctx, job); err != nil {
		return err
	}
	t.ask(ctx, "auth-api", "may-start", http.StatusOK, "every step")
	t.ask(ctx, "auth-ui", "may-start", http.StatusOK, "every step")
	return nil
}

// apiOwnRequests is what one iteration's own traffic sends auth-api's new
// copy: its Canary's two paths and its readiness path, probe.Rounds times.
const apiOwnRequests = (2 + 1) * probe.Rounds

// analysisIterations is the Canaries' spec.analysis.iterations.
const analysisIterations = 4

// iterate plays Flagger's analysis iterations from to of process, each
// asking checks; after the last the member waits for promotion.
func (t *teller) iterate(ctx context.Context, process string, from, to int) error {
	for i := from; i <= to; i++ {
		t.say("iteration %d of %d:", i, analysisIterations)
		t.ask(ctx, process, "checks", http.StatusOK, "")
		if err := t.canaryStatus(ctx, process, map[string]any{"iterations": i}); err != nil {
			return err
		}
	}
	if to < analysisIterations {
		return nil
	}
	t.say("Flagger counted %d passed iterations; %s waits for promotion", to, process)
	return t.canaryStatus(ctx, process, map[string]any{"phase": "WaitingPromotion"})
}

func analyseAPI(ctx context.Context, t *teller) error {
	if err := t.analyse(ctx, "auth-api"); err != nil {
		return err
	}
	if err := t.startPods(ctx, "auth-api", 2); err != nil {
		return err
	}
	t.ask(ctx, "auth-api", "checks", http.StatusConflict, "not ready")
	if err := t.readyPods(ctx, "auth-api"); err != nil {
		return err
	}
	api := t.members.get("auth-api")
	before := api.requests.Load()
	if err := t.iterate(ctx, "auth-api", 1, 1); err != nil {
		return err
	}
	answered := api.requests.Load() - before
	t.shows("(auth-api's new copy answered %d requests from the gate)", answered)
	if answered != apiOwnRequests {
		t.miss("the gate sent auth-api's new copy %d requests, not %d: each of its paths %d times", answered, apiOwnRequests, probe.Rounds)
	}
	t.say("auth-api's new copy starts answering 503 on /api/session:")
	api.failOn("/api/session")
	t.ask(ctx, "auth-api", "checks", http.StatusConflict, "own traffic")
	api.failOn("")
	if err := t.canaryStatus(ctx, "auth-api", map[string]any{"failedChecks": 1}); err != nil {
		return err
	}
	t.say("Flagger counts 1 failed check of the 3 it tolerates; the copy recovers.")
	if err := t.iterate(ctx, "auth-api", 2, 4); err != nil {
		return err
	}
	t.say("auth-api asks to be promoted while auth-ui has not been analysed:")
	t.ask(ctx, "auth-api", "may-promote", http.StatusConflict, "auth-ui")
	return nil
}

func analyseUI(ctx context.Context, t *teller) error {
	if err := t.analyse(ctx, "auth-ui"); err != nil {
		return err
	}
	if err := t.startPods(ctx, "auth-ui", 1); err != nil {
		return err
	}
	if err := t.readyPods(ctx, "auth-ui"); err != nil {
		return err
	}
	if err := t.iterate(ctx, "auth-ui", 1, 4); err != nil {
		return err
	}
	t.ask(ctx, "auth-ui", "may-promote", http.StatusOK, "barrier open")
	t.say("auth-api asks again at its next tick:")
	t.ask(ctx, "auth-api", "may-promote", http.StatusOK, "barrier open")
	return nil
}

func promoteBoth(ctx context.Context, t *teller) error {
	for _, p := range []string{"auth-api", "auth-ui"} {
		if err := t.promote(ctx, p); err != nil {
			return err
		}
	}
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
	if err := t.apply(ctx, examples+"/release-"+tag(staleRevision)+".yaml"); err != nil {
		return err
	}
	job := "auth-migration-" + tag(staleRevision)
	t.ask(ctx, "auth-api", "may-start", http.StatusConflict, job)
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
	t.say("the gate's answers    POST %s/may-start|checks|may-promote (from Flagger's address %s)", t.gate.url, flaggerAddress)
	t.say("what serves, held     curl %s/releases", t.gate.url)
	t.say("the gate's metrics    curl --interface %s %s/metrics   (the scraper's address)", scraperAddress, t.gate.url)
	t.say("the gate's log        %s", t.gate.logFile)
	t.say("the cluster           export KUBECONFIG=%s", t.kubeconfig)
	t.say("                      kubectl -n %s get canaries,deployments,jobs,pods", namespace)
}
