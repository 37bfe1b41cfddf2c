package demo

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
		{"Flagger promotes both members", promoteBoth},
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

func whatServes(_ context.Context, t *teller) error {
	t.say("examples/demo/serving.yaml holds the Application as it runs: both members Succeeded,")
	t.say("each primary running what its Deployment holds, migration %s complete.", "auth-migration-"+tag(servingRevision))
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
	t.say("a pod at %s asks may-promote for auth-api", outsiderAddress)
	t.answer(ctx, outsiderAddress, "/may-promote", []byte(`{}`), http.StatusForbidden, "Flagger")
	return nil
}

func migrationRuns(ctx context.Context, t *teller) error {
	job := "auth-migration-" + tag(releaseRevision)
	t.say("This gate does not start migrations; the demo unsuspends %s as an operator would.", job)
	if _, err := t.kube.BatchV1().Jobs(namespace).Patch(ctx, job, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("start Job %s: %w", job, err)
	}
	if err := t.completeJob(ctx, job); err != nil {
		return err
	}
	t.ask(ctx, "auth-api", "may-start", http.StatusOK, "every step")
	t.ask(ctx, "auth-ui", "may-start", http.StatusOK, "every step")
	return nil
}

// iterate plays Flagger's analysis iterations of process from the first
// counted one to the last, each asking checks, then waiting for promotion.
func (t *teller) iterate(ctx context.Context, process string, from, to int) error {
	for i := from; i <= to; i++ {
		t.say("iteration %d of 4:", i)
		t.ask(ctx, process, "checks", http.StatusOK, "")
		if err := t.canaryStatus(ctx, process, map[string]any{"iterations": i}); err != nil {
			return err
		}
	}
	t.say("Flagger counted 4 passed iterations; %s waits for promotion", process)
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
	if err := t.iterate(ctx, "auth-api", 1, 4); err != nil {
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
	return nil
}

// where prints how to look at what the story left behind.
func (t *teller) where() {
	t.title("Everything is still running")
	t.say("the gate's answers    POST %s/may-start|checks|may-promote (from Flagger's address %s)", t.gate.url, flaggerAddress)
	t.say("the gate's log        %s", t.gate.logFile)
	t.say("the cluster           export KUBECONFIG=%s", t.kubeconfig)
	t.say("                      kubectl -n %s get canaries,deployments,jobs,pods", namespace)
}
