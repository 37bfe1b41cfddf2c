package releasepath

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

const (
	pin    = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	oldPin = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	revA   = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	revB   = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var created = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func program(image string) *release.Deployment {
	return &release.Deployment{Containers: []release.Container{{Name: "app", Image: image}}}
}

// member is a Canary of Application app at revision rev in phase, with its
// primary running what its Deployment holds when settled.
func member(process, app, rev string, phase flaggerv1.CanaryPhase, settled bool) Member {
	c := release.Canary{
		Name: process, Phase: phase, LastAppliedSpec: "s2", LastPromotedSpec: "s2",
		Webhooks: []map[string]string{{"application": app, "process": process, "revision": rev}},
	}
	primary := program("app:2")
	if !settled {
		c.LastPromotedSpec = "s1"
		primary = program("app:1")
	}
	return Member{Namespace: "auth-system", Iterations: 4, ChangedAt: created.Add(time.Minute),
		State: release.MemberState{Process: process, HasCanary: true, Canary: c, Target: program("app:2"), Primary: primary}}
}

func with(m Member, f func(*Member)) Member { f(&m); return m }

func applied(ready string) Unit {
	return Unit{AppliedRevision: "latest@" + pin, AttemptedRevision: "latest@" + pin, Ready: Condition{Status: ready, Reason: "ReconciliationSucceeded"}}
}

func gate(warmups map[string]Warmup) Gate { return Gate{Answered: true, Warmups: warmups} }

func TestDecide(t *testing.T) {
	base := Input{Project: "auth", Version: "1.4.0", RolloutDigest: pin, Pin: pin, DeploymentCreated: created, RolloutURL: "https://auth.example"}
	in := func(f func(*Input)) Input { i := base; f(&i); return i }
	settledA := member("auth-api", "auth", revA, flaggerv1.CanaryPhaseSucceeded, true)
	settledB := member("auth-ui", "auth", revA, flaggerv1.CanaryPhaseInitialized, true)
	warmed := gate(map[string]Warmup{"auth-system/auth": {Revision: revA, Warmed: true}})

	cases := []struct {
		name  string
		in    Input
		state string // "" = no write
		desc  string
	}{
		// Before Flux applies the pin there is nothing of the Reporter's to say.
		{"not applied yet: the old revision is applied", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: "latest@" + oldPin, AttemptedRevision: "latest@" + oldPin, Ready: Condition{Status: "True"}}
		}), "", ""},
		{"not applied, waiting on another unit: no failure", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: oldPin, AttemptedRevision: pin, Ready: Condition{Status: "False", Reason: "DependencyNotReady", Message: "dependency 'flux-system/project-data' is not ready"}}
		}), "", ""},
		// The unit and its source are two objects Flux applies one after the
		// other: until the source is pinned to the Rollout's digest, what
		// the cluster shows is the release before's, applied, ready and
		// failed alike.
		{"the unit carries the Rollout, its source the pin before: nothing", in(func(i *Input) {
			i.Pin, i.Unit = oldPin, Unit{AppliedRevision: "latest@" + oldPin, AttemptedRevision: "latest@" + oldPin, Ready: Condition{Status: "True"}}
		}), "", ""},
		{"the source pinned ahead of the unit's Rollout: nothing", in(func(i *Input) {
			i.RolloutDigest, i.Unit = oldPin, applied("True")
		}), "", ""},
		{"the pin before failing to apply is not this Rollout's failure", in(func(i *Input) {
			i.Pin, i.Unit = oldPin, Unit{AppliedRevision: oldPin, AttemptedRevision: oldPin, Ready: Condition{Status: "False", Reason: "BuildFailed"}}
		}), "", ""},
		// failure: Flux could not apply.
		{"Flux could not apply this release", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: oldPin, AttemptedRevision: pin, Ready: Condition{Status: "False", Reason: "BuildFailed", Message: "kustomize build failed:\n  accumulating resources"}}
		}), StateFailure, "Flux could not apply auth 1.4.0: BuildFailed: kustomize build failed: accumulating resources"},
		{"the source cannot fetch or verify the pin: the unit never attempts it", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: "latest@" + oldPin, AttemptedRevision: "latest@" + oldPin, Ready: Condition{Status: "True"}}
			i.Source = Condition{Status: "False", Reason: "OCIArtifactPullFailed", Message: "failed to pull artifact:\n  manifest unknown"}
		}), StateFailure, "Flux could not apply auth 1.4.0: OCIArtifactPullFailed: failed to pull artifact: manifest unknown"},
		{"the source still fetching the pin is no failure", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: "latest@" + oldPin, AttemptedRevision: "latest@" + oldPin, Ready: Condition{Status: "True"}}
			i.Source = Condition{Status: "Unknown", Reason: "Progressing"}
		}), "", ""},
		{"a failure on an earlier attempt is not this release's", in(func(i *Input) {
			i.Unit = Unit{AppliedRevision: oldPin, AttemptedRevision: oldPin, Ready: Condition{Status: "False", Reason: "BuildFailed"}}
		}), "", ""},
		{"applied, then not Ready for a health check", in(func(i *Input) {
			i.Unit = applied("False")
			i.Unit.Ready.Reason, i.Unit.Ready.Message = "HealthCheckFailed", "timeout waiting for: [Deployment/auth-system/auth-api status: 'InProgress']"
		}), StateFailure, "Flux could not apply auth 1.4.0: HealthCheckFailed: timeout waiting for: [Deployment/auth-system/auth-api status: 'InProgress']"},
		{"Flux reconciling again after a failure it reported: nothing until it says how", in(func(i *Input) {
			i.Unit = applied("Unknown")
			i.Unit.Ready.Reason = "Progressing"
			i.Members = []Member{with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseProgressing, false), func(m *Member) { m.State.Canary.Iterations = 2 })}
			i.Latest = &Status{State: StateFailure, EnvironmentURL: i.RolloutURL, Description: "Flux could not apply auth 1.4.0: HealthCheckFailed: timeout"}
		}), "", ""},
		{"Flux retrying the same failure: the time it waited is no new stage", in(func(i *Input) {
			i.Unit = applied("False")
			i.Unit.Ready.Reason, i.Unit.Ready.Message = "HealthCheckFailed", "health check failed after 5m0.012345678s: timeout waiting for: [Deployment/auth-system/auth-api status: 'InProgress']"
			i.Latest = &Status{State: StateFailure, EnvironmentURL: i.RolloutURL, Description: clipDescription(
				"Flux could not apply auth 1.4.0: HealthCheckFailed: health check failed: timeout waiting for: [Deployment/auth-system/auth-api status: 'InProgress']")}
		}), "", ""},
		// No blue-green member.
		{"applied and ready, no member: success", in(func(i *Input) { i.Unit = applied("True") }),
			StateSuccess, "auth 1.4.0 applied by Flux and ready"},
		{"applied, health checks still running, no member: in progress", in(func(i *Input) {
			i.Unit = applied("Unknown")
		}), StateInProgress, "applied by Flux"},
		// Members not through.
		{"a member in analysis: checks n/m", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseProgressing, false), func(m *Member) { m.State.Canary.Iterations = 2 }), settledB}
		}), StateInProgress, "applied by Flux; auth-api checks 2/4"},
		{"boundary: every iteration done, still Progressing", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseProgressing, false), func(m *Member) { m.State.Canary.Iterations = 4 })}
		}), StateInProgress, "applied by Flux; auth-api checks 4/4"},
		{"members at the barrier, promoting, and not started", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{
				member("auth-api", "auth", revA, flaggerv1.CanaryPhaseWaitingPromotion, false),
				member("auth-ui", "auth", revA, flaggerv1.CanaryPhasePromoting, false),
				member("auth-worker", "auth", revA, flaggerv1.CanaryPhaseFinalising, false),
				member("auth-cron", "auth", revA, flaggerv1.CanaryPhaseInitialized, false),
				{Namespace: "auth-system", State: release.MemberState{Process: "auth-gone"}},
			}
		}), StateInProgress, "applied by Flux; auth-api waits for the other members, auth-ui promoting, auth-worker promoting, auth-cron waits for Flagger and 1 more"},
		{"boundary: Succeeded but the primary does not run the Deployment yet", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(settledA, func(m *Member) { m.State.Primary = program("app:1") })}
		}), StateInProgress, "applied by Flux; auth-api waits for Flagger"},
		// Rolled back.
		{"a member rolled back after the Deployment was created", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{settledB, with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseFailed, false), func(m *Member) {
				m.Message = "Canary analysis failed,\nDeployment scaled to zero."
			})}
		}), StateFailure, "auth-api rolled back: Canary analysis failed, Deployment scaled to zero."},
		{"boundary: failed the same second the Deployment was created", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseFailed, false), func(m *Member) { m.ChangedAt = created; m.Message = "halted" })}
		}), StateFailure, "auth-api rolled back: halted"},
		{"boundary: failed before the Deployment was created (an earlier release)", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(member("auth-api", "auth", revA, flaggerv1.CanaryPhaseFailed, false), func(m *Member) { m.ChangedAt = created.Add(-time.Second) })}
		}), StateInProgress, "applied by Flux; auth-api waits for Flagger"},
		// Promoted: the gate's warmup.
		{"every member through, no warmup recorded yet", in(func(i *Input) {
			i.Unit, i.Members, i.Gate = applied("True"), []Member{settledA, settledB}, gate(map[string]Warmup{})
		}), StateInProgress, "promoted; the Release Gate is warming up auth"},
		{"boundary: warmed up at the previous revision", in(func(i *Input) {
			i.Unit, i.Members = applied("True"), []Member{settledA, settledB}
			i.Gate = gate(map[string]Warmup{"auth-system/auth": {Revision: revB, Warmed: true}})
		}), StateInProgress, "promoted; the Release Gate is warming up auth"},
		{"the gate does not answer: in progress, never failed", in(func(i *Input) {
			i.Unit, i.Members = applied("True"), []Member{settledA}
		}), StateInProgress, "promoted; the Release Gate is warming up auth"},
		{"warmed up at this revision: success", in(func(i *Input) {
			i.Unit, i.Members, i.Gate = applied("True"), []Member{settledA, settledB}, warmed
		}), StateSuccess, "auth 1.4.0 promoted and warmed up"},
		{"two Applications: one warmed, one still warming", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{settledA, with(member("billing-api", "billing", revB, flaggerv1.CanaryPhaseSucceeded, true), func(m *Member) { m.Namespace = "billing-system" })}
			i.Gate = warmed
		}), StateInProgress, "promoted; the Release Gate is warming up billing"},
		{"the warmup met a 5xx", in(func(i *Input) {
			i.Unit, i.Members = applied("True"), []Member{settledA}
			i.Gate = gate(map[string]Warmup{"auth-system/auth": {Revision: revA, Failed: &WarmupFailure{Request: "auth.example/login", Status: 502}}})
		}), StateFailure, "auth promoted, but its warmup failed: auth.example/login answered 502"},
		{"the warmup met no answer", in(func(i *Input) {
			i.Unit, i.Members = applied("True"), []Member{settledA}
			i.Gate = gate(map[string]Warmup{"auth-system/auth": {Revision: revA, Failed: &WarmupFailure{Request: "auth.example/", Status: 0}}})
		}), StateFailure, "auth promoted, but its warmup failed: auth.example/ got no answer"},
		{"a Canary the gate does not gate needs no warmup", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(settledA, func(m *Member) { m.State.Canary.Webhooks = nil })}
			i.Gate = gate(nil)
		}), StateSuccess, "auth 1.4.0 promoted and warmed up"},
		{"a Canary whose webhooks name two releases is no warmup read", in(func(i *Input) {
			i.Unit = applied("True")
			i.Members = []Member{with(settledA, func(m *Member) {
				m.State.Canary.Webhooks = append(m.State.Canary.Webhooks, map[string]string{"application": "auth", "process": "auth-api", "revision": revB})
			})}
			i.Gate = gate(nil)
		}), StateInProgress, "promoted; the Canary of auth-api names two releases, so no warmup can be read"},
		// What the latest status says.
		{"the same status again is no write", in(func(i *Input) {
			i.Unit = applied("True")
			i.Latest = &Status{State: StateSuccess, Description: "auth 1.4.0 applied by Flux and ready", EnvironmentURL: "https://auth.example"}
		}), "", ""},
		{"the same stage, another rollout URL, is a write", in(func(i *Input) {
			i.Unit = applied("Unknown")
			i.Latest = &Status{State: StateInProgress, Description: "applied by Flux", EnvironmentURL: "https://old.example"}
		}), StateInProgress, "applied by Flux"},
		{"a failure is not final: Flux retries, nothing until it says how", in(func(i *Input) {
			i.Unit = applied("Unknown")
			i.Latest = &Status{State: StateFailure, Description: "Flux could not apply auth 1.4.0: BuildFailed: x"}
		}), "", ""},
		{"a failure is not final: the retry passed", in(func(i *Input) {
			i.Unit = applied("True")
			i.Latest = &Status{State: StateFailure, Description: "Flux could not apply auth 1.4.0: BuildFailed: x"}
		}), StateSuccess, "auth 1.4.0 applied by Flux and ready"},
		{"success takes nothing more", in(func(i *Input) {
			i.Unit = applied("False")
			i.Unit.Ready.Reason = "HealthCheckFailed"
			i.Latest = &Status{State: StateSuccess}
		}), "", ""},
		{"inactive takes nothing more", in(func(i *Input) { i.Unit = applied("True"); i.Latest = &Status{State: StateInactive} }), "", ""},
		{"error takes nothing more", in(func(i *Input) { i.Unit = applied("True"); i.Latest = &Status{State: StateError} }), "", ""},
		{"a failed warmup is the last word, even with the gate down", in(func(i *Input) {
			i.Unit, i.Members = applied("True"), []Member{settledA}
			i.Latest = &Status{State: StateFailure, Description: "auth promoted, but its warmup failed: auth.example/ answered 500"}
		}), "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in)
			if tc.state == "" {
				if d.Write {
					t.Fatalf("wrote %+v (%s)", d.Status, d.Why)
				}
				return
			}
			if !d.Write || d.Status.State != tc.state || d.Status.Description != tc.desc {
				t.Fatalf("got write=%v %s %q (%s)\nwant %s %q", d.Write, d.Status.State, d.Status.Description, d.Why, tc.state, tc.desc)
			}
			if d.Status.EnvironmentURL != tc.in.RolloutURL {
				t.Fatalf("environment_url %q", d.Status.EnvironmentURL)
			}
			// Written once, the same input writes nothing more.
			again := tc.in
			again.Latest = &d.Status
			if Decide(again).Write {
				t.Fatal("the status it wrote would be written again")
			}
		})
	}
}

func TestDescriptionsKeepToGitHubsLimit(t *testing.T) {
	long := strings.Repeat("é", 200)
	d := Decide(Input{Project: "auth", Version: "1.0.0", RolloutDigest: pin, Pin: pin, Unit: Unit{AttemptedRevision: pin, Ready: Condition{Status: "False", Reason: "BuildFailed", Message: long}}})
	if n := utf8.RuneCountInString(d.Status.Description); n != MaxDescription || !strings.HasSuffix(d.Status.Description, "…") {
		t.Fatalf("%d characters: %q", n, d.Status.Description)
	}
	if clipDescription(strings.Repeat("x", 140)) != strings.Repeat("x", 140) {
		t.Fatal("140 characters were clipped")
	}
}

func TestRevisionDigest(t *testing.T) {
	for rev, want := range map[string]string{"latest@" + pin: pin, pin: pin, "v1@sha256:x@" + pin: pin, "": ""} {
		if got := RevisionDigest(rev); got != want {
			t.Errorf("%q: %q", rev, got)
		}
	}
}
