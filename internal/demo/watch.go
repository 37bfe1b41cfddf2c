package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file watches what Flagger and the gate do and prints it as it
// happens: each Canary's phase and counts as Flagger records them, and every
// question Flagger asked the gate with the gate's answer, read from the
// gate's log. The story's expectations are read from the same.

var canaries = schema.GroupVersionResource{Group: "flagger.app", Version: "v1beta1", Resource: "canaries"}

// members' processes, in the order the transcript names them.
var processes = []string{"auth-api", "auth-ui"}

// answer is one question Flagger asked the gate and the gate's answer, as
// the gate logged it.
type answer struct {
	webhook, process, revision string
	// outcome is the gate's word for it: "yes", "not yet" or "cannot answer".
	outcome, reason string
	// at is when the gate answered.
	at time.Time
}

// same reports whether b is a's answer again, perhaps at another time.
func (a answer) same(b answer) bool {
	a.at, b.at = time.Time{}, time.Time{}
	return a == b
}

// status is the HTTP status the gate answered with for outcome.
func (a answer) status() int {
	switch a.outcome {
	case "yes":
		return http.StatusOK
	case "not yet":
		return http.StatusConflict
	default:
		return http.StatusServiceUnavailable
	}
}

// canaryState is what Flagger records on a Canary that the story follows.
type canaryState struct {
	process                  string
	phase                    string
	iterations, failedChecks int64
}

// observer is everything watched so far.
type observer struct {
	// logRead is how much of the gate's log has been read.
	logRead int
	answers []answer
	// states are the Canaries' states in the order they were seen.
	states []canaryState
	latest map[string]canaryState
	// last is the answer last printed per webhook and process; repeats
	// counts the same answer read again since, not printed again.
	last    map[string]answer
	repeats map[string]int
}

// mark is how far the watch has read; expectations look past it, so a
// step's own answers are told apart from an earlier step's.
type mark struct{ answers, states int }

func (t *teller) mark(ctx context.Context) mark {
	t.watch(ctx)
	return mark{len(t.seen.answers), len(t.seen.states)}
}

// watch reads the Canaries and the new part of the gate's log and prints
// what changed.
func (t *teller) watch(ctx context.Context) {
	o := &t.seen
	if o.latest == nil {
		o.latest, o.last, o.repeats = map[string]canaryState{}, map[string]answer{}, map[string]int{}
	}
	for _, p := range processes {
		c, err := t.dyn.Resource(canaries).Namespace(namespace).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			continue // not applied yet, or the API server is away: the waits say so
		}
		s := stateOf(p, c)
		if prev, ok := o.latest[p]; ok && prev == s {
			continue
		}
		o.latest[p] = s
		o.states = append(o.states, s)
		fmt.Fprintf(t.out, "    [Flagger] Canary %s: %s (iteration %d, failed checks %d)\n", p, s.phase, s.iterations, s.failedChecks)
	}
	if t.gate == nil {
		return
	}
	logs := t.gate.logs.String()
	end := strings.LastIndexByte(logs, '\n') + 1
	if end <= o.logRead {
		return
	}
	for _, line := range strings.Split(logs[o.logRead:end], "\n") {
		if a, ok := answerOf(line); ok {
			t.heard(a)
		}
	}
	o.logRead = end
}

// heard records an answer and prints it, unless it is the one last printed
// for the same webhook and process, which it only counts.
func (t *teller) heard(a answer) {
	o := &t.seen
	o.answers = append(o.answers, a)
	key := a.webhook + " " + a.process
	if last, ok := o.last[key]; ok && last.same(a) {
		o.repeats[key]++
		return
	}
	t.repeated(key)
	o.last[key] = a
	fmt.Fprintf(t.out, "    [Flagger → gate] %-11s %s at %s → %d %s\n", a.webhook, a.process, tag(a.revision), a.status(), a.reason)
}

// repeated prints how many times the answer last printed for key came again.
func (t *teller) repeated(key string) {
	o := &t.seen
	if n := o.repeats[key]; n > 0 {
		fmt.Fprintf(t.out, "    [Flagger → gate] %s: asked %d more time(s), the same answer\n", key, n)
	}
	o.repeats[key] = 0
}

// flush prints the repeats not printed yet, at the end of a chapter.
func (t *teller) flush() {
	for _, p := range processes {
		for _, w := range []string{"may-start", "checks", "may-promote", "rollback"} {
			t.repeated(w + " " + p)
		}
	}
}

func stateOf(process string, c *unstructured.Unstructured) canaryState {
	s := canaryState{process: process}
	s.phase, _, _ = unstructured.NestedString(c.Object, "status", "phase")
	s.iterations, _, _ = unstructured.NestedInt64(c.Object, "status", "iterations")
	s.failedChecks, _, _ = unstructured.NestedInt64(c.Object, "status", "failedChecks")
	if s.phase == "" {
		s.phase = "(no status yet)"
	}
	return s
}

// answerOf reads one line of the gate's log: an answer to a question about
// the demo's Application, or nothing.
func answerOf(line string) (answer, bool) {
	var l struct {
		Time                                                      time.Time
		Msg, Webhook, Namespace, Process, Revision, Reason, Cause string
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Webhook == "" || l.Namespace != namespace {
		return answer{}, false
	}
	switch l.Msg {
	case "yes", "not yet", "cannot answer":
		return answer{webhook: l.Webhook, process: l.Process, revision: l.Revision, outcome: l.Msg, reason: l.Reason + l.Cause, at: l.Time}, true
	}
	return answer{}, false
}

// expectAnswer waits until, since m, Flagger asked webhook for process at
// revision and the gate answered outcome with a reason holding reason, and
// returns the first such answer (zero when none came).
func (t *teller) expectAnswer(ctx context.Context, m mark, webhook, process, revision, outcome, reason string) answer {
	want := answer{webhook: webhook, process: process, revision: revision, outcome: outcome}
	what := fmt.Sprintf("Flagger asks %s for %s at %s and the gate answers %d %q", webhook, process, tag(revision), want.status(), reason)
	var found answer
	t.await(ctx, what, t.flaggerWait, func(context.Context) (string, bool, error) {
		for _, a := range t.seen.answers[m.answers:] {
			if a.webhook == webhook && a.process == process && a.revision == revision && a.outcome == outcome && strings.Contains(a.reason, reason) {
				found = a
				return "", true, nil
			}
		}
		return "", false, nil
	})
	return found
}

// expectPhase waits until, since m, Flagger recorded process in phase.
func (t *teller) expectPhase(ctx context.Context, m mark, process, phase string) {
	t.expectState(ctx, m, fmt.Sprintf("Flagger records %s %s", process, phase), func(s canaryState) bool {
		return s.process == process && s.phase == phase
	})
}

// expectState waits until, since m, Flagger recorded a state that holds.
func (t *teller) expectState(ctx context.Context, m mark, what string, holds func(canaryState) bool) {
	t.await(ctx, what, t.flaggerWait, func(context.Context) (string, bool, error) {
		for _, s := range t.seen.states[m.states:] {
			if holds(s) {
				return "", true, nil
			}
		}
		return "", false, nil
	})
}

// phaseNow is process's phase as last seen.
func (t *teller) phaseNow(process string) string { return t.seen.latest[process].phase }

// flaggerWait bounds a wait for Flagger to move a Canary: its analysis ticks
// every 10 s, and a release takes a dozen ticks.
const flaggerWait = 3 * time.Minute
