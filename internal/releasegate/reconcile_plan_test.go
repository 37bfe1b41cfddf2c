package releasegate

import (
	"errors"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

const otherRev = "sha256:9c1e5f7a3b5d7f9a1c3e5a7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f"

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// mv is a member as a round reads it: its Canary carrying rev, its
// Deployment and primary running target and primary images.
func mv(process string, phase flaggerv1.CanaryPhase, digest, target, primary string) MemberView {
	c := release.Canary{Name: process, Webhooks: hooks("auth", rev), Phase: phase, LastAppliedSpec: digest, LastPromotedSpec: digest}
	return MemberView{MemberState: release.MemberState{
		Process: process, Canary: c, HasCanary: true,
		Target: deployment(process, container(target)), Primary: deployment(process+"-primary", container(primary)),
	}}
}

func mjob(name string, suspended, complete, failed bool) MigrationJob {
	return MigrationJob{
		Job:       release.Job{Name: name, Identity: "auth-migration", Complete: complete, Failed: failed},
		Namespace: "auth-system", Application: "auth", ManagedBy: release.ManagedBy,
		ResourceVersion: "41", UID: "uid-" + name, Suspended: suspended,
	}
}

const (
	upJob   = "auth-migration-" + tag
	downJob = "auth-migration-down-" + tag
)

// scene is auth at revision rev, proven against prevRev, which the record
// says serves: auth-api's new copy is being analysed, auth-ui did not change,
// and both migration Jobs wait suspended.
func scene(edits ...func(v *ApplicationView)) ApplicationView {
	since := t0.Add(-time.Hour)
	v := ApplicationView{
		Namespace: "auth-system", Application: "auth", Inputs: inputs(true),
		Record: &release.Record{
			Namespace: "auth-system", Application: "auth", Serving: prevRev,
			Primaries: map[string]string{"auth-api": "api-1", "auth-ui": "ui-1"},
			Pinned:    rev, Since: &since,
			Warmup: &release.WarmupRecord{Revision: prevRev, Warmed: true},
		},
		Members: []MemberView{
			mv("auth-api", flaggerv1.CanaryPhaseProgressing, "api-1", "api:2", "api:1"),
			mv("auth-ui", flaggerv1.CanaryPhaseSucceeded, "ui-1", "ui:1", "ui:1"),
		},
		Jobs: []MigrationJob{mjob(upJob, true, false, false), mjob(downJob, true, false, false)},
		Now:  t0,
	}
	v.Members[0].Canary.LastAppliedSpec = "api-2"
	for _, e := range edits {
		e(&v)
	}
	return v
}

// promoted puts auth-api where Flagger leaves it after promoting rev.
func promoted(v *ApplicationView) {
	m := &v.Members[0]
	m.Canary.Phase, m.Canary.LastAppliedSpec, m.Canary.LastPromotedSpec = flaggerv1.CanaryPhaseSucceeded, "api-2", "api-2"
	m.Primary = deployment("auth-api-primary", container("api:2"))
}

// migrated completes rev's migration, which an earlier round recorded as
// started.
func migrated(v *ApplicationView) {
	v.Jobs[0] = mjob(upJob, false, true, false)
	v.Record.Migrated = rev
}

func failedAt(at time.Time) func(v *ApplicationView) {
	return func(v *ApplicationView) {
		v.Members[0].Canary.Phase = flaggerv1.CanaryPhaseFailed
		v.Members[0].Transitioned = at
	}
}

func TestReconcileRecordsWhatServes(t *testing.T) {
	cases := []struct {
		name    string
		view    ApplicationView
		serving string
		pinned  string
		write   bool
		warm    bool
	}{
		{"every member settled, every primary runs its Deployment, the migration complete: rev serves",
			scene(promoted, migrated), rev, "", true, true},
		{"a primary that does not run what its Deployment holds: not yet",
			scene(migrated, func(v *ApplicationView) {
				promoted(v)
				v.Members[0].Primary = deployment("auth-api-primary", container("api:1"))
			}),
			prevRev, rev, false, false},
		{"a member Flagger has not settled: not yet",
			scene(migrated), prevRev, rev, false, false},
		{"a spec Flagger has not promoted: not yet",
			scene(migrated, promoted, func(v *ApplicationView) { v.Members[0].Canary.LastAppliedSpec = "api-3" }), prevRev, rev, false, false},
		{"members unchanged but the revision's migration not complete: not yet",
			scene(func(v *ApplicationView) {
				v.Members[0] = mv("auth-api", flaggerv1.CanaryPhaseSucceeded, "api-1", "api:1", "api:1")
				v.Jobs[0].Suspended, v.Record.Migrated = false, rev
			}),
			prevRev, rev, false, false},
		{"members unchanged and the revision's migration Job not applied yet: not yet",
			scene(func(v *ApplicationView) {
				v.Members[0] = mv("auth-api", flaggerv1.CanaryPhaseSucceeded, "api-1", "api:1", "api:1")
				v.Jobs = nil
			}),
			prevRev, rev, false, false},
		{"Canaries carrying two revisions (a render being applied): nothing moves",
			scene(func(v *ApplicationView) { v.Members[1].Canary.Webhooks = hooks("auth", otherRev) }), prevRev, rev, false, false},
		{"a revision seen for the first time is recorded as pinned",
			scene(func(v *ApplicationView) { v.Record.Pinned, v.Record.Since = "", nil }), prevRev, rev, true, false},
		{"a revision that serves and was warmed: nothing to write",
			scene(promoted, migrated, func(v *ApplicationView) {
				v.Record = &release.Record{Namespace: "auth-system", Application: "auth", Serving: rev,
					Primaries: map[string]string{"auth-api": "api-2", "auth-ui": "ui-1"}, Warmup: &release.WarmupRecord{Revision: rev, Warmed: true}}
			}), rev, "", false, false},
		{"a revision that serves and was never warmed is warmed once",
			scene(promoted, migrated, func(v *ApplicationView) {
				v.Record = &release.Record{Namespace: "auth-system", Application: "auth", Serving: rev,
					Primaries: map[string]string{"auth-api": "api-2", "auth-ui": "ui-1"}}
			}), rev, "", false, true},
		{"no record and nothing serving: a first release is recorded",
			scene(func(v *ApplicationView) { v.Record = nil; v.Inputs.Migration = nil }), "", rev, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if p.Unanswerable != "" {
				t.Fatalf("unanswerable: %s", p.Unanswerable)
			}
			if p.Record.Serving != c.serving || p.Record.Pinned != c.pinned || p.Write != c.write || (p.Warm != nil) != c.warm {
				t.Fatalf("serving %q pinned %q write %v warm %v; want %q %q %v %v",
					release.RevisionTag(p.Record.Serving), release.RevisionTag(p.Record.Pinned), p.Write, p.Warm != nil,
					release.RevisionTag(c.serving), release.RevisionTag(c.pinned), c.write, c.warm)
			}
			if c.serving == rev && p.Record.Primaries["auth-api"] != "api-2" {
				t.Fatalf("the primaries' digests were not recorded: %v", p.Record.Primaries)
			}
			if (p.Record.Pinned == "") != (p.Record.Since == nil) {
				t.Fatalf("pinned %q with since %v", p.Record.Pinned, p.Record.Since)
			}
		})
	}
	// The first sight of a revision is when the round saw it.
	p := Reconcile(scene(func(v *ApplicationView) { v.Record.Pinned, v.Record.Since = otherRev, &t0 }))
	if p.Record.Since == nil || !p.Record.Since.Equal(t0) || !p.Write {
		t.Fatalf("a new pinned revision: since %v write %v", p.Record.Since, p.Write)
	}
}

func TestReconcileStartsTheMigrationOnlyUnderProof(t *testing.T) {
	cases := []struct {
		name  string
		view  ApplicationView
		start bool
		held  string
	}{
		{"serving is testedAgainst and no primary moved: started", scene(), true, ""},
		{"another revision serves: held, stale proof",
			scene(func(v *ApplicationView) { v.Record.Serving = otherRev }), false, HeldStaleProof},
		{"nothing serves but the proof names a revision: held",
			scene(func(v *ApplicationView) { v.Record.Serving = "" }), false, HeldStaleProof},
		{"a primary's digest moved since: held",
			scene(func(v *ApplicationView) { v.Members[1].Canary.LastPromotedSpec = "ui-2" }), false, HeldStaleProof},
		{"a member new in the release, so with no digest on record: started",
			scene(func(v *ApplicationView) { delete(v.Record.Primaries, "auth-ui") }), true, ""},
		{"no member on record at all: held",
			scene(func(v *ApplicationView) { v.Record.Primaries = nil }), false, HeldStaleProof},
		{"proven against nothing where nothing serves: started",
			scene(func(v *ApplicationView) { v.Record = nil; v.Inputs.Migration.TestedAgainst = "" }), true, ""},
		{"proven against nothing where something serves: held",
			scene(func(v *ApplicationView) { v.Inputs.Migration.TestedAgainst = "" }), false, HeldStaleProof},
		{"a Job under another identity is never started",
			scene(func(v *ApplicationView) { v.Jobs[0].Identity = "other-migration" }), false, ""},
		{"a Job of another Application is never started",
			scene(func(v *ApplicationView) { v.Jobs[0].Application = "other" }), false, ""},
		{"a Job the render did not write is never started",
			scene(func(v *ApplicationView) { v.Jobs[0].ManagedBy = "someone" }), false, ""},
		{"a Job a CronJob made is never started",
			scene(func(v *ApplicationView) { v.Jobs[0].Scheduled = true }), false, ""},
		{"a Job already running is left alone",
			scene(func(v *ApplicationView) { v.Jobs[0].Suspended = false }), false, ""},
		{"no Job of this revision yet: nothing",
			scene(func(v *ApplicationView) { v.Jobs = nil }), false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if p.Unanswerable != "" {
				t.Fatalf("unanswerable: %s", p.Unanswerable)
			}
			if (p.Start != nil) != c.start {
				t.Fatalf("start %+v, want %v", p.Start, c.start)
			}
			if p.Start != nil && (p.Start.Name != upJob || p.Start.ResourceVersion != "41" || p.Start.UID != "uid-"+upJob) {
				t.Fatalf("start names %+v", p.Start)
			}
			gotHeld := ""
			if p.Held != nil {
				gotHeld = p.Held.Reason
				if p.Held.Pinned != rev || p.Held.Deadline != 1800*time.Second {
					t.Fatalf("held %+v", p.Held)
				}
			}
			if gotHeld != c.held {
				t.Fatalf("held %q, want %q", gotHeld, c.held)
			}
			if p.Undo != nil || p.NotUndone != nil {
				t.Fatalf("a migration that never ran is undone: %+v %+v", p.Undo, p.NotUndone)
			}
		})
	}
	if p := Reconcile(scene(func(v *ApplicationView) { v.Inputs.Migration.Identity = "billing-migration" })); !strings.Contains(p.Unanswerable, "not the Application's own") {
		t.Fatalf("a migration under another identity: %+v", p)
	}
}

// A revision that came to serve before Flagger promoted a change it carries
// (one Flagger had not seen yet) keeps its record's digests current: they
// follow the promotion once Flagger settles, and stay while it has not.
func TestReconcileKeepsServingDigestsCurrent(t *testing.T) {
	servingEarly := func(v *ApplicationView) {
		v.Record = &release.Record{Namespace: "auth-system", Application: "auth", Serving: rev,
			Primaries: map[string]string{"auth-api": "api-1", "auth-ui": "ui-1"}, Warmup: &release.WarmupRecord{Revision: rev, Warmed: true}}
	}
	p := Reconcile(scene(promoted, migrated, servingEarly))
	if !p.Write || p.Record.Primaries["auth-api"] != "api-2" || p.Record.Serving != rev {
		t.Fatalf("after Flagger promoted: write %v, record %+v", p.Write, p.Record)
	}
	p = Reconcile(scene(migrated, servingEarly))
	if p.Write || p.Record.Primaries["auth-api"] != "api-1" {
		t.Fatalf("while Flagger analyses: write %v, record %+v", p.Write, p.Record)
	}
}

func TestReconcileHeldReasons(t *testing.T) {
	cases := []struct {
		name string
		view ApplicationView
		held string
	}{
		{"the migration failed", scene(func(v *ApplicationView) { v.Jobs[0] = mjob(upJob, false, false, true) }), HeldMigrationFailed},
		{"Flagger failed a member after the gate first saw the revision", scene(migrated, failedAt(t0.Add(-time.Minute))), HeldAnalysisFailed},
		{"a failure from before that is the previous release's", scene(migrated, failedAt(t0.Add(-2*time.Hour))), ""},
		{"a failed member carrying another revision is not this release's",
			scene(migrated, failedAt(t0), func(v *ApplicationView) { v.Members[0].Canary.Webhooks = hooks("auth", otherRev) }), ""},
		{"an Application without migration whose member failed", scene(failedAt(t0), func(v *ApplicationView) { v.Inputs.Migration = nil }), HeldAnalysisFailed},
		{"an Application without migration being analysed", scene(func(v *ApplicationView) { v.Inputs.Migration = nil }), ""},
		{"Flagger failed a member before the migration started", scene(failedAt(t0.Add(-time.Minute))), HeldAnalysisFailed},
		{"the migration running", scene(func(v *ApplicationView) { v.Jobs[0].Suspended = false }), ""},
		{"Flagger failed a member while the migration runs", scene(failedAt(t0), func(v *ApplicationView) { v.Jobs[0].Suspended = false }), HeldAnalysisFailed},
		{"Flagger failed a member before the render applied the migration", scene(failedAt(t0), func(v *ApplicationView) { v.Jobs = nil }), HeldAnalysisFailed},
		{"Flagger failed a member within the second the gate first saw the revision",
			scene(migrated, failedAt(t0.Add(-time.Hour)), func(v *ApplicationView) { since := t0.Add(-time.Hour + 400*time.Millisecond); v.Record.Since = &since }), HeldAnalysisFailed},
		{"the migration done, analysis under way", scene(migrated), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if p.Unanswerable != "" {
				t.Fatalf("unanswerable: %s", p.Unanswerable)
			}
			got := ""
			if p.Held != nil {
				got = p.Held.Reason
				if p.Held.Serving != prevRev || !p.Held.Since.Equal(*c.view.Record.Since) {
					t.Fatalf("held pair %+v", p.Held)
				}
			}
			if got != c.held {
				t.Fatalf("held %q, want %q (%+v)", got, c.held, p)
			}
		})
	}
}

// The round writes its hold into the record, so the release record reads the
// reason rather than guess it: set when a release is first held, kept (and
// not written again) while it stays held for the same cause, and cleared once
// it is not held.
func TestReconcileRecordsItsHold(t *testing.T) {
	since := t0.Add(-time.Hour)
	holding := func(reason, cause string) func(v *ApplicationView) {
		return func(v *ApplicationView) {
			v.Record.Held = &release.HeldRecord{Reason: reason, Cause: cause, Since: since}
		}
	}
	stale := func(v *ApplicationView) { v.Record.Serving = otherRev }
	staleCause := "proven against " + release.RevisionTag(prevRev) + ", but " + release.RevisionTag(otherRev) + " serves"
	failedCause := "Flagger failed auth-api"
	cases := []struct {
		name          string
		view          ApplicationView
		reason, cause string
		write         bool
	}{
		{"first held: set", scene(stale), HeldStaleProof, staleCause, true},
		{"held for the same cause: kept, not written", scene(stale, holding(HeldStaleProof, staleCause)), HeldStaleProof, staleCause, false},
		{"held for another reason: rewritten",
			scene(holding(HeldStaleProof, staleCause), func(v *ApplicationView) { v.Jobs[0] = mjob(upJob, false, false, true) }),
			HeldMigrationFailed, "Job " + upJob + " failed", true},
		{"Flagger failed it: set", scene(migrated, failedAt(t0)), HeldAnalysisFailed, failedCause, true},
		{"its migration undone: still held, as the plan says", scene(migrated, failedAt(t0), holding(HeldAnalysisFailed, failedCause),
			func(v *ApplicationView) { v.Jobs[1] = mjob(downJob, false, true, false) }), HeldAnalysisFailed, failedCause, true},
		{"the proof holds again: cleared", scene(holding(HeldStaleProof, staleCause)), "", "", true},
		{"it serves: cleared", scene(promoted, migrated, holding(HeldStaleProof, staleCause)), "", "", true},
		{"superseded by another revision: cleared", scene(migrated, holding(HeldAnalysisFailed, failedCause), func(v *ApplicationView) {
			for i := range v.Members {
				v.Members[i].Canary.Webhooks = hooks("auth", otherRev)
			}
		}), "", "", true},
		{"a render being applied: no release decided, none held", scene(holding(HeldAnalysisFailed, failedCause), func(v *ApplicationView) {
			v.Members[0].Canary.Webhooks = hooks("auth", otherRev)
		}), "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if p.Unanswerable != "" {
				t.Fatalf("unanswerable: %s", p.Unanswerable)
			}
			if p.Write != c.write {
				t.Fatalf("write %v, want %v (%+v)", p.Write, c.write, p.Record)
			}
			got := p.Record.Held
			if c.reason == "" {
				if got != nil || p.Held != nil {
					t.Fatalf("held on record %+v, in the plan %+v; want neither", got, p.Held)
				}
				return
			}
			if got == nil || got.Reason != c.reason || got.Cause != c.cause || !got.Since.Equal(since) {
				t.Fatalf("held on record %+v, want %s: %s since %s", got, c.reason, c.cause, since)
			}
			// The record says what the plan logs and reports, in its words.
			if p.Held == nil || got.Reason != p.Held.Reason || got.Cause != p.Held.Cause || !got.Since.Equal(p.Held.Since) {
				t.Fatalf("record %+v, plan %+v", got, p.Held)
			}
			if _, err := release.DecodeRecord("auth-system", "auth", release.EncodeRecord(p.Record)); err != nil {
				t.Fatalf("the record written does not read: %v", err)
			}
		})
	}
}

// A release Flagger failed before its migration ran starts no migration and
// undoes none.
func TestReconcileStartsNoMigrationForAFailedRelease(t *testing.T) {
	p := Reconcile(scene(failedAt(t0.Add(-time.Minute))))
	if p.Start != nil || p.Undo != nil || p.Held == nil || p.Held.Reason != HeldAnalysisFailed {
		t.Fatalf("plan %+v, want held for the failed analysis with nothing started or undone", p)
	}
	if p := Reconcile(scene()); p.Start == nil {
		t.Fatalf("the same release not failed started nothing: %+v", p)
	}
}

func TestReconcileUndoesOnlyUnderEveryCondition(t *testing.T) {
	heldAfterMigration := func(edits ...func(v *ApplicationView)) ApplicationView {
		return scene(append([]func(v *ApplicationView){migrated, failedAt(t0), func(v *ApplicationView) {
			v.NewCopyPods = map[string]int{"auth-api": 0, "auth-ui": 0}
		}}, edits...)...)
	}
	prevTag := release.RevisionTag(prevRev)
	cases := []struct {
		name      string
		view      ApplicationView
		undo      bool
		condition string
		read      bool
	}{
		{"held, migrated, no new copy left, primaries on the proven revision, transactional: undone", heldAfterMigration(), true, "", false},
		{"the migration failed and everything else holds: undone",
			heldAfterMigration(func(v *ApplicationView) {
				v.Jobs[0] = mjob(upJob, false, false, true)
				v.Members[0].Canary.Phase = flaggerv1.CanaryPhaseProgressing
			}), true, "", false},
		{"the new copies not counted yet: the round reads them",
			heldAfterMigration(func(v *ApplicationView) { v.NewCopyPods = nil }), false, "", true},
		{"a new copy still has a pod", heldAfterMigration(func(v *ApplicationView) { v.NewCopyPods["auth-api"] = 1 }), false, UndoNewCopyRunning, false},
		{"a primary moved", heldAfterMigration(func(v *ApplicationView) { v.Members[1].Canary.LastPromotedSpec = "ui-2" }), false, UndoPrimariesMoved, false},
		{"another revision serves", heldAfterMigration(func(v *ApplicationView) { v.Record.Serving = otherRev }), false, UndoPrimariesMoved, false},
		// Flagger gives a new member's primary the release's code at once,
		// without analysis: the schema the down restores would be under it.
		{"a member new in the release", heldAfterMigration(func(v *ApplicationView) { delete(v.Record.Primaries, "auth-ui") }), false, UndoPrimariesMoved, false},
		// Flagger puts the new spec on the primary when it starts promoting
		// and records its digest only once promoted: a promotion that
		// failed half way leaves the release's program on the primary.
		{"a primary on the release's program under the old digest",
			heldAfterMigration(func(v *ApplicationView) {
				v.Members[0].Primary = deployment("auth-api-primary", container("api:2"))
				v.DeploymentsUnread = false
			}), false, UndoPrimariesMoved, false},
		{"a non-transactional changeset", heldAfterMigration(func(v *ApplicationView) { v.Inputs.Migration.NonTransactional = true }), false, UndoNonTransactional, false},
		{"a first release has no down",
			heldAfterMigration(func(v *ApplicationView) { v.Inputs.Migration.TestedAgainst = ""; v.Record.Serving = "" }), false, UndoFirstRelease, false},
		{"the down itself failed", heldAfterMigration(func(v *ApplicationView) { v.Jobs[1] = mjob(downJob, false, false, true) }), false, UndoDownFailed, false},
		{"the down completed: nothing more", heldAfterMigration(func(v *ApplicationView) { v.Jobs[1] = mjob(downJob, false, true, false) }), false, "", false},
		{"the down running: nothing more", heldAfterMigration(func(v *ApplicationView) { v.Jobs[1].Suspended = false }), false, "", false},
		{"a down under another identity is never started",
			heldAfterMigration(func(v *ApplicationView) { v.Jobs[1].Identity = "x-migration" }), false, "", false},
		{"not held: nothing is undone", scene(migrated, func(v *ApplicationView) { v.NewCopyPods = map[string]int{} }), false, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if (p.Undo != nil) != c.undo || p.ReadNewCopies != c.read {
				t.Fatalf("undo %+v read %v; want %v %v (%+v)", p.Undo, p.ReadNewCopies, c.undo, c.read, p)
			}
			if p.Undo != nil && (p.Undo.Name != downJob || p.Undo.ResourceVersion != "41") {
				t.Fatalf("undo names %+v", p.Undo)
			}
			got := ""
			if p.NotUndone != nil {
				got = p.NotUndone.Condition
				wantTag := prevTag
				if c.condition == UndoFirstRelease {
					wantTag = ""
				}
				if p.NotUndone.Tag != wantTag {
					t.Fatalf("not undone names tag %q, want %q", p.NotUndone.Tag, wantTag)
				}
			}
			if got != c.condition {
				t.Fatalf("condition %q, want %q", got, c.condition)
			}
		})
	}
	if p := Reconcile(heldAfterMigration(func(v *ApplicationView) { v.Jobs = v.Jobs[:1] })); !strings.Contains(p.Unanswerable, "down Job") || p.Held == nil {
		t.Fatalf("a held release without its down: %+v", p)
	}
}

func TestReconcileUnanswerable(t *testing.T) {
	cases := []struct {
		name, cause string
		view        ApplicationView
	}{
		{"inputs that do not read", "bad inputs", scene(func(v *ApplicationView) { v.InputsErr = errors.New("bad inputs") })},
		{"a record that does not read", "bad record", scene(func(v *ApplicationView) { v.RecordErr = errors.New("bad record") })},
		{"a Canary of another Application", "belongs to Application billing",
			scene(func(v *ApplicationView) { v.Members[1].Canary.Webhooks = hooks("billing", rev) })},
		{"a Canary carrying two releases", "two releases",
			scene(func(v *ApplicationView) {
				v.Members[1].Canary.Webhooks = append(hooks("auth", rev), hooks("auth", otherRev)...)
			})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if !strings.Contains(p.Unanswerable, c.cause) || p.Write || p.Start != nil {
				t.Fatalf("plan %+v, want unanswerable %q and nothing done", p, c.cause)
			}
		})
	}
	// A member with no Canary carries nothing: nothing moves, and the
	// Application is reported, so a release held does not go quiet.
	p := Reconcile(scene(failedAt(t0), func(v *ApplicationView) { v.Members[1].HasCanary = false }))
	if !strings.Contains(p.Unanswerable, "auth-ui has no Canary") || p.Write || p.Start != nil || p.Held != nil {
		t.Fatalf("a member without a Canary: %+v", p)
	}
	// A migration a superseded release left applied is known from the
	// record alone: reported even when nothing else can be decided.
	p = Reconcile(scene(func(v *ApplicationView) {
		v.Record.Pinned, v.Record.Migrated = otherRev, rev
		v.Members[1].HasCanary = false
	}))
	if p.Unanswerable == "" || p.NotUndone == nil || p.NotUndone.Condition != UndoSuperseded || p.NotUndone.Migrated != tag {
		t.Fatalf("a superseded migration while unanswerable: %+v", p)
	}
}

// A first round over an Application whose Canaries name no one release yet
// writes no record: it would say what having none says.
func TestReconcileCreatesNoEmptyRecord(t *testing.T) {
	p := Reconcile(scene(func(v *ApplicationView) {
		v.Record = nil
		v.Members[1].Canary.Webhooks = hooks("auth", otherRev)
	}))
	if p.Write || !p.Create || p.Unanswerable != "" {
		t.Fatalf("plan %+v", p)
	}
}

func TestReconcileReadsDeploymentsOnlyWhenNeeded(t *testing.T) {
	unread := func(v *ApplicationView) { v.DeploymentsUnread = true }
	cases := []struct {
		name string
		view ApplicationView
		read bool
	}{
		{"every Canary settled on a revision that does not serve yet: read them", scene(promoted, migrated, unread), true},
		{"a member still analysed: the Canaries alone say it does not serve", scene(migrated, unread), false},
		{"the revision already serves: no second look",
			scene(promoted, migrated, unread, func(v *ApplicationView) { v.Record.Serving, v.Record.Pinned, v.Record.Since = rev, "", nil }), false},
		{"an undo that looks for the new copies",
			scene(migrated, failedAt(t0), unread), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			if p.ReadDeployments != c.read {
				t.Fatalf("read deployments %v, want %v (%+v)", p.ReadDeployments, c.read, p)
			}
			if c.read && (p.Start != nil || p.Undo != nil) {
				t.Fatalf("a plan that still needs the Deployments acts: %+v", p)
			}
		})
	}
}

// A migration that ran is recorded until its release serves or its down
// completes; while a migration of another release is recorded, no later
// migration starts under a proof against what serves.
func TestReconcileRecordsAMigrationLeftApplied(t *testing.T) {
	nextTag := release.RevisionTag(otherRev)
	// superseded: rev's migration ran and was left applied, and the render
	// now carries otherRev, proven against prevRev like rev was.
	superseded := func(v *ApplicationView) {
		v.Record.Migrated = rev
		for i := range v.Members {
			v.Members[i].Canary.Webhooks = hooks("auth", otherRev)
		}
		v.Jobs = []MigrationJob{mjob("auth-migration-"+nextTag, true, false, false), mjob("auth-migration-down-"+nextTag, true, false, false)}
	}
	cases := []struct {
		name     string
		view     ApplicationView
		migrated string
		write    bool
		start    bool
		held     string
	}{
		{"a migration the round starts is recorded with the start", scene(), rev, true, true, ""},
		{"a migration found running is recorded", scene(func(v *ApplicationView) { v.Jobs[0].Suspended = false }), rev, true, false, ""},
		{"one found failed is recorded too: its changesets may have committed",
			scene(func(v *ApplicationView) { v.Jobs[0] = mjob(upJob, false, false, true) }), rev, true, false, HeldMigrationFailed},
		{"its release serving clears it", scene(promoted, migrated), "", true, false, ""},
		{"its down complete clears it",
			scene(migrated, failedAt(t0), func(v *ApplicationView) { v.Jobs[1] = mjob(downJob, false, true, false) }), "", true, false, HeldAnalysisFailed},
		{"a later release is held while it stands, whatever its own proof says", scene(superseded), rev, true, false, HeldStaleProof},
		{"a start whose patch did not land is made again", scene(func(v *ApplicationView) { v.Record.Migrated = rev }), rev, false, true, ""},
		{"a start that never landed is forgotten once Flagger fails the release",
			scene(failedAt(t0), func(v *ApplicationView) { v.Record.Migrated = rev }), "", true, false, HeldAnalysisFailed},
		{"once undone, later rounds write nothing",
			scene(failedAt(t0), func(v *ApplicationView) {
				v.Jobs = []MigrationJob{mjob(upJob, false, true, false), mjob(downJob, false, true, false)}
				// The hold as the earlier round recorded it.
				v.Record.Held = &release.HeldRecord{Reason: HeldAnalysisFailed, Cause: "Flagger failed auth-api", Since: *v.Record.Since}
			}), "", false, false, HeldAnalysisFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Reconcile(c.view)
			held := ""
			if p.Held != nil {
				held = p.Held.Reason
			}
			if p.Record.Migrated != c.migrated || p.Write != c.write || (p.Start != nil) != c.start || held != c.held {
				t.Fatalf("migrated %q write %v start %v held %q; want %q %v %v %q",
					release.RevisionTag(p.Record.Migrated), p.Write, p.Start != nil, held, release.RevisionTag(c.migrated), c.write, c.start, c.held)
			}
		})
	}
	p := Reconcile(scene(superseded))
	if p.Held == nil || !strings.Contains(p.Held.Cause, "migration of "+tag+" was left applied") {
		t.Fatalf("held %+v, want the cause named", p.Held)
	}
	// Whether another release is applied or the pin went back to what
	// serves, the migration left applied is reported every round.
	reverted := func(v *ApplicationView) {
		v.Record.Migrated = rev
		for i := range v.Members {
			v.Members[i].Canary.Webhooks = hooks("auth", prevRev)
		}
	}
	for name, view := range map[string]ApplicationView{"superseded": scene(superseded), "reverted": scene(reverted)} {
		want := NotUndone{Condition: UndoSuperseded, Migrated: tag}
		if p := Reconcile(view); p.NotUndone == nil || *p.NotUndone != want || p.Record.Migrated != rev {
			t.Errorf("%s: not undone %+v, migrated %q; want %+v", name, p.NotUndone, release.RevisionTag(p.Record.Migrated), want)
		}
	}
}
