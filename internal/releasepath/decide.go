package releasepath

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Deployment status states: where a release stands, as the Reporter writes it
// on the Rollout's GitHub Deployment and the release record reads it as a
// phase.
const (
	StateInProgress = "in_progress"
	StateSuccess    = "success"
	StateFailure    = "failure"
	StateInactive   = "inactive"
	StateError      = "error"
)

// MaxDescription is GitHub's limit on a status's description, in characters;
// the release record says a failure in the same words, so within it too.
const MaxDescription = 140

// couldNotApplyPrefix opens the description of every failure Flux reports
// for a release.
func couldNotApplyPrefix(project, version string) string {
	return fmt.Sprintf("Flux could not apply %s %s: ", project, version)
}

// warmupFailed is the phrase of the status a failed warmup leaves; the gate
// never rolls back, so that status is the release's last word.
const warmupFailed = "promoted, but its warmup failed"

// Status is a Deployment status: its state, description and environment URL.
type Status struct {
	State, Description, EnvironmentURL string
}

// Input is everything one decision reads, as plain values.
type Input struct {
	Project, Version string
	// RolloutDigest is the pin the Rollout moved the source to.
	RolloutDigest string
	// Pin is the digest the unit's source is pinned to (spec.ref.digest).
	Pin string
	// Source is the source's Ready condition about the spec pinning Pin;
	// empty while the source controller has not seen that spec.
	Source  Condition
	Unit    Unit
	Members []Member
	Gate    Gate
	// DeploymentCreated is when the Rollout's Deployment was created.
	DeploymentCreated time.Time
	// RolloutURL is the release's environment URL; "" for none.
	RolloutURL string
	// Latest is the Deployment's latest status; nil when it has none.
	Latest *Status
}

// Decision is what to write: Write is false when nothing is, and Why says
// why either way, for the log.
type Decision struct {
	Write  bool
	Status Status
	Why    string
}

// Final reports whether a status takes nothing more: success, inactive and
// error are GitHub's last words, and a failed warmup is the release's.
func Final(s *Status) bool {
	if s == nil {
		return false
	}
	switch s.State {
	case StateSuccess, StateInactive, StateError:
		return true
	case StateFailure:
		return strings.Contains(s.Description, warmupFailed)
	}
	return false
}

// Pinned reports whether the unit's source is pinned to the Rollout's
// digest. The workflow writes both, but Flux applies the unit and its source
// one after the other: until both moved, what the cluster shows is another
// release's.
func (in Input) Pinned() bool {
	return in.Pin != "" && in.Pin == in.RolloutDigest
}

// Applied reports whether Flux applied the Rollout's release.
func (in Input) Applied() bool {
	return in.Pinned() && RevisionDigest(in.Unit.AppliedRevision) == in.Pin
}

// FluxFailed reports whether Flux's last attempt at the pin failed: the unit
// is not Ready for a reason other than waiting on a unit it depends on
// (DependencyNotReady: waiting, not failing), and it attempted the pin.
func (in Input) FluxFailed() bool {
	return in.Unit.Ready.Status == string(metav1.ConditionFalse) && in.Unit.Ready.Reason != meta.DependencyNotReadyReason &&
		RevisionDigest(in.Unit.AttemptedRevision) == in.Pin
}

// Decide says where the Rollout's release stands on the path, as the status
// its Deployment should carry now, and whether that is a write: only a
// status that differs from the latest is. The release record reads the same
// decision as its phase (no latest status: every decision that says
// something is a write).
func Decide(in Input) Decision {
	if Final(in.Latest) {
		return Decision{Why: "the Deployment's latest status " + in.Latest.State + " is final"}
	}
	want, ok := stage(in)
	if !ok {
		return Decision{Why: want.Description}
	}
	want.Description = clipDescription(want.Description)
	want.EnvironmentURL = in.RolloutURL
	if in.Latest != nil && *in.Latest == want {
		return Decision{Status: want, Why: "the Deployment already says so"}
	}
	return Decision{Write: true, Status: want, Why: "the release moved"}
}

// stage is the status the cluster shows; ok is false when it shows nothing
// to say yet (Status.Description then says why).
func stage(in Input) (Status, bool) {
	fluxFailed := in.FluxFailed()
	couldNotApply := func(why Condition) Status {
		return Status{State: StateFailure,
			Description: couldNotApplyPrefix(in.Project, in.Version) + why.Reason + ": " + withoutElapsed(oneLine(why.Message))}
	}
	if !in.Pinned() {
		return Status{Description: "the source is pinned to " + in.Pin + ", not yet to the Rollout's " + in.RolloutDigest}, false
	}
	failedToApply := couldNotApply(in.Unit.Ready)
	if !in.Applied() {
		switch {
		case fluxFailed:
			return failedToApply, true
		case in.Source.Status == "False":
			// The source cannot fetch or verify the pin, so the unit goes on
			// applying the release before and never attempts this one.
			return couldNotApply(in.Source), true
		}
		return Status{Description: "Flux has not applied " + in.Pin + " yet"}, false
	}
	for _, m := range in.Members {
		if m.State.HasCanary && m.State.Canary.Phase == flaggerv1.CanaryPhaseFailed && !m.ChangedAt.Before(in.DeploymentCreated) {
			return Status{State: StateFailure, Description: fmt.Sprintf("%s rolled back: %s", m.State.Process, oneLine(m.Message))}, true
		}
	}
	if fluxFailed {
		return failedToApply, true
	}
	if in.Unit.Ready.Status == "Unknown" && in.Latest != nil && in.Latest.State == StateFailure &&
		strings.HasPrefix(in.Latest.Description, couldNotApplyPrefix(in.Project, in.Version)) {
		// Flux failed this release after applying it (its health checks, or
		// a later build or apply of the same revision), and reconciles
		// again, Ready Unknown meanwhile: it records a revision as applied
		// only with Ready True, so Unknown here is always that retry. No
		// stage moved until it says how that went.
		return Status{Description: "Flux is reconciling " + in.Pin + " again after it failed"}, false
	}
	if len(in.Members) == 0 {
		if in.Unit.Ready.Status == "True" {
			return Status{State: StateSuccess, Description: fmt.Sprintf("%s %s applied by Flux and ready", in.Project, in.Version)}, true
		}
		return Status{State: StateInProgress, Description: "applied by Flux"}, true
	}
	var waiting []string
	for _, m := range in.Members {
		if through, _ := release.Unchanged(m.State); !through {
			waiting = append(waiting, m.State.Process+" "+memberStage(m))
		}
	}
	if len(waiting) > 0 {
		return Status{State: StateInProgress, Description: listWithin("applied by Flux; ", waiting)}, true
	}
	return warmupStage(in), true
}

// memberStage says where a member that is not through stands.
func memberStage(m Member) string {
	if !m.State.HasCanary {
		return "waits for Flagger"
	}
	switch c := m.State.Canary; c.Phase {
	case flaggerv1.CanaryPhaseProgressing:
		return fmt.Sprintf("checks %d/%d", c.Iterations, m.Iterations)
	case flaggerv1.CanaryPhaseWaitingPromotion:
		return "waits for the other members"
	case flaggerv1.CanaryPhasePromoting, flaggerv1.CanaryPhaseFinalising:
		return "promoting"
	default:
		return "waits for Flagger"
	}
}

// warmupStage is the status once every member is through: the gate's warmup
// of each member's Application at the revision its Canary carries decides.
func warmupStage(in Input) Status {
	revisions := map[string]string{}
	for _, m := range in.Members {
		app, rev, err := release.CanaryRelease(m.State.Canary)
		if err != nil {
			// Webhooks naming two releases leave no revision whose warmup
			// could be read: the release stays in progress, not success.
			return Status{State: StateInProgress, Description: "promoted; the Canary of " + m.State.Process + " names two releases, so no warmup can be read"}
		}
		if app == "" {
			continue // a Canary the gate does not gate has nothing to warm up
		}
		revisions[m.Namespace+"/"+app] = rev
	}
	keys := make([]string, 0, len(revisions))
	for k := range revisions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var warming []string
	for _, key := range keys {
		app := key[strings.Index(key, "/")+1:]
		w, ok := in.Gate.Warmups[key]
		switch {
		case !in.Gate.Answered || !ok || w.Revision != revisions[key]:
			warming = append(warming, app)
		case w.Failed != nil:
			answered := fmt.Sprintf("answered %d", w.Failed.Status)
			if w.Failed.Status == 0 {
				answered = "got no answer"
			}
			return Status{State: StateFailure, Description: fmt.Sprintf("%s %s: %s %s", app, warmupFailed, oneLine(w.Failed.Request), answered)}
		case !w.Warmed:
			warming = append(warming, app)
		}
	}
	if len(warming) > 0 {
		return Status{State: StateInProgress, Description: listWithin("promoted; the Release Gate is warming up ", warming)}
	}
	return Status{State: StateSuccess, Description: fmt.Sprintf("%s %s promoted and warmed up", in.Project, in.Version)}
}

// listWithin joins items after prefix within GitHub's limit, naming as many
// as fit and counting the rest, so that no name is cut in half.
func listWithin(prefix string, items []string) string {
	for shown := len(items); shown > 0; shown-- {
		s := prefix + strings.Join(items[:shown], ", ")
		if rest := len(items) - shown; rest > 0 {
			s += fmt.Sprintf(" and %d more", rest)
		}
		if utf8.RuneCountInString(s) <= MaxDescription {
			return s
		}
	}
	return prefix + strings.Join(items, ", ") // clipped by the caller
}

// clipDescription keeps a description within GitHub's 140 characters.
func clipDescription(s string) string {
	if utf8.RuneCountInString(s) <= MaxDescription {
		return s
	}
	r := []rune(s)
	return string(r[:MaxDescription-1]) + "…"
}

// oneLine folds a message from the cluster onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// elapsed is the time Flux says it waited ("health check failed after
// 5m0.0047s: ..."), which differs on every retry of the same failure.
var elapsed = regexp.MustCompile(` after (\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+:`)

// withoutElapsed drops that time, so a failure Flux retries reads the same
// and the Deployment is not written again while its stage has not moved.
func withoutElapsed(message string) string { return elapsed.ReplaceAllString(message, ":") }
