package releasegate

import (
	"fmt"
	"maps"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Why a release is held, as the log and the metrics name it.
const (
	HeldStaleProof      = "stale-proof"
	HeldMigrationFailed = "migration-failed"
	HeldAnalysisFailed  = "analysis-failed"
)

// Why a migration is left applied, as the log and the metrics name it.
const (
	UndoFirstRelease     = "first-release"
	UndoNewCopyRunning   = "new-copy-running"
	UndoPrimariesMoved   = "primaries-moved"
	UndoNonTransactional = "non-transactional"
	UndoDownFailed       = "down-failed"
	// UndoSuperseded is a migration left applied by a release the
	// Application has moved on from: the render carries another revision
	// now, and only an operator can put the schema right.
	UndoSuperseded = "superseded"
)

// MigrationJob is a release Job as the round sees it: enough to start it with
// a patch that names the version read.
type MigrationJob struct {
	release.Job
	Namespace string
	// Application is the Job's app.kubernetes.io/part-of label; ManagedBy its
	// app.kubernetes.io/managed-by label.
	Application     string
	ManagedBy       string
	ResourceVersion string
	UID             string
	Suspended       bool
}

// MemberView is one member as the round read it: the barrier's view of it,
// and when Flagger last moved its Canary's phase.
type MemberView struct {
	release.MemberState
	// Transitioned is when the Canary's phase last changed (PhaseChangedAt).
	Transitioned time.Time
}

// ApplicationView is everything one round read about one gated Application.
type ApplicationView struct {
	Namespace, Application string
	Inputs                 *release.Inputs
	// InputsErr is why the inputs do not read.
	InputsErr error
	// Record is the gate's record; nil when there is none.
	Record    *release.Record
	RecordErr error
	// Members are the inputs' members, in their order.
	Members []MemberView
	// Jobs are the Application's Jobs the render wrote.
	Jobs []MigrationJob
	// DeploymentsUnread says the members' Deployments were not read: a round
	// reads them only for an Application that needs them.
	DeploymentsUnread bool
	// NewCopyPods counts the pods of each member's new copy; nil when not
	// read. The round reads them only for an undo that needs them.
	NewCopyPods map[string]int
	Now         time.Time
}

// JobStart names a Job to unsuspend and the version of it the gate read.
type JobStart struct {
	Namespace, Name, ResourceVersion, UID string
}

// Held is a held release: the pair it is reported as, and why.
type Held struct {
	Reason string
	// Cause says what holds it, in words, for the log.
	Cause   string
	Serving string
	Pinned  string
	Since   time.Time
	// Deadline is the inputs' gate deadline.
	Deadline time.Duration
}

// NotUndone is a migration left applied: the tag the down would return to
// ("" for a first release) and the condition that failed.
type NotUndone struct {
	Tag       string
	Condition string
	// Migrated is the tag of the release whose migration it is.
	Migrated string
}

// Plan is what a round does for one Application.
type Plan struct {
	// Record is the record after this round; Write says it differs from the
	// one read, Create that there was none.
	Record        release.Record
	Write, Create bool
	Warm          *Warm
	Start         *JobStart
	Undo          *JobStart
	Held          *Held
	NotUndone     *NotUndone
	// ReadDeployments asks the round to read the members' Deployments and
	// decide again; ReadNewCopies to count the new copies' pods.
	ReadDeployments bool
	ReadNewCopies   bool
	// ReadConfigs asks, with the Deployments, for the ConfigMaps of the
	// Application's namespace: a revision that may have come to serve has
	// its copies compared as the barrier compares them.
	ReadConfigs bool
	// Unanswerable is why the round could not decide for the Application;
	// whatever else the plan holds was decided before it.
	Unanswerable string
}

// Carried is the revision every member's Canary carries. ok is false while
// they disagree or one carries none (a render being applied); err names a
// Canary that is another Application's or carries two releases.
func Carried(application string, members []MemberView) (revision string, ok bool, err error) {
	for i, m := range members {
		if !m.HasCanary {
			return "", false, nil
		}
		app, rev, err := release.CanaryRelease(m.Canary)
		if err != nil {
			return "", false, err
		}
		if app != "" && app != application {
			return "", false, fmt.Errorf("Canary %s belongs to Application %s, not %s", m.Process, app, application)
		}
		if rev == "" || !release.IsRevision(rev) || (i > 0 && rev != revision) {
			return "", false, nil
		}
		revision = rev
	}
	return revision, len(members) > 0, nil
}

// Serves reports whether the Application serves the revision its Canaries
// carry: Flagger records every member as settled and every primary runs what
// its Deployment holds (the barrier's own test of a member that did not
// change), and the release's migration, where the inputs carry one, completed.
// A revision whose members did not change at all would otherwise serve before
// its migration ran, or before the render applied its Job, and so make its
// own proof stale and never start it.
func Serves(v ApplicationView, revision string) (bool, string) {
	for _, m := range v.Members {
		if ok, why := release.Unchanged(m.MemberState); !ok {
			return false, m.Process + " " + why
		}
	}
	if mig := v.Inputs.Migration; mig != nil {
		name := mig.Identity + "-" + release.RevisionTag(revision)
		up, ok := findJob(v.Jobs, name)
		if !ok {
			return false, "migration " + name + " is not applied yet"
		}
		if !up.Complete {
			return false, "migration " + up.Name + " has not completed"
		}
	}
	return true, ""
}

// canariesSettled reports whether Flagger records every member as settled,
// the part of Unchanged its Canary alone answers.
func canariesSettled(members []MemberView) bool {
	for _, m := range members {
		c := m.Canary
		if (c.Phase != flaggerv1.CanaryPhaseInitialized && c.Phase != flaggerv1.CanaryPhaseSucceeded) || c.LastAppliedSpec != c.LastPromotedSpec {
			return false
		}
	}
	return true
}

// primaryDigests is Flagger's digest of each member's primary.
func primaryDigests(members []MemberView) map[string]string {
	out := make(map[string]string, len(members))
	for _, m := range members {
		out[m.Process] = m.Canary.LastPromotedSpec
	}
	return out
}

// PrimariesMoved reports whether a primary's digest moved since the record
// named what serves, and which. A member without a digest on record is new
// since: the record holds one for every member of the revision that serves.
func PrimariesMoved(rec release.Record, members []MemberView) (bool, string) {
	for _, m := range members {
		was, ok := rec.Primaries[m.Process]
		if !ok {
			return true, m.Process + " has no digest on record"
		}
		if m.Canary.LastPromotedSpec != was {
			return true, m.Process + "'s primary moved since " + release.RevisionTag(rec.Serving) + " was recorded"
		}
	}
	return false, ""
}

// servingMembers are the members the record holds a digest for: those of
// the revision that serves. One without is new in the release, part of what
// a migration's proof is about rather than of what it was proven against.
func servingMembers(rec release.Record, members []MemberView) []MemberView {
	out := make([]MemberView, 0, len(members))
	for _, m := range members {
		if _, ok := rec.Primaries[m.Process]; ok {
			out = append(out, m)
		}
	}
	return out
}

// ProofHolds reports whether a migration may start: the record's serving
// revision is the inputs' testedAgainst and no primary's digest moved since.
// A release proven against nothing holds only where nothing serves.
func ProofHolds(mig *release.Migration, rec release.Record, members []MemberView) (bool, string) {
	if rec.Migrated != "" && rec.Migrated != rec.Pinned {
		return false, "the migration of " + release.RevisionTag(rec.Migrated) + " was left applied"
	}
	if mig.TestedAgainst == "" {
		if rec.Serving != "" {
			return false, "proven against nothing, but " + release.RevisionTag(rec.Serving) + " serves"
		}
		return true, ""
	}
	if rec.Serving != mig.TestedAgainst {
		serving := "nothing"
		if rec.Serving != "" {
			serving = release.RevisionTag(rec.Serving)
		}
		return false, "proven against " + release.RevisionTag(mig.TestedAgainst) + ", but " + serving + " serves"
	}
	serving := servingMembers(rec, members)
	if len(serving) == 0 {
		// Nothing of what the proof was made against is a member any more:
		// there is no primary to hold it to.
		return false, "no member of " + release.RevisionTag(rec.Serving) + " is on record among this release's members"
	}
	if moved, why := PrimariesMoved(rec, serving); moved {
		return false, why
	}
	return true, ""
}

// FailedSince reports whether Flagger failed a member carrying revision at or
// after since: a failure from before the gate first saw the revision is the
// previous release's.
func FailedSince(members []MemberView, revision string, since time.Time) (bool, string) {
	for _, m := range members {
		if !m.HasCanary || m.Canary.Phase != flaggerv1.CanaryPhaseFailed {
			continue
		}
		if _, rev, err := release.CanaryRelease(m.Canary); err != nil || rev != revision {
			continue
		}
		// The API server keeps a transition time to the second, the record
		// its first sight to the nanosecond: within that second, the failure
		// counts as this release's.
		if !m.Transitioned.Before(since.Truncate(time.Second)) {
			return true, m.Process
		}
	}
	return false, ""
}

func findJob(jobs []MigrationJob, name string) (MigrationJob, bool) {
	for _, j := range jobs {
		if j.Name == name {
			return j, true
		}
	}
	return MigrationJob{}, false
}

// ownJob finds the Job name the render wrote under identity for application.
func ownJob(jobs []MigrationJob, name, identity, application string) (MigrationJob, bool) {
	j, ok := findJob(jobs, name)
	if !ok || j.Identity != identity || j.Application != application || j.ManagedBy != release.ManagedBy || j.Scheduled {
		return MigrationJob{}, false
	}
	return j, true
}

func startOf(j MigrationJob) *JobStart {
	return &JobStart{Namespace: j.Namespace, Name: j.Name, ResourceVersion: j.ResourceVersion, UID: j.UID}
}

// Reconcile decides one round for one Application from what the round read. A
// migration left applied by a superseded release is reported from the
// record alone, even for an Application the round cannot decide for.
func Reconcile(v ApplicationView) Plan {
	p := reconcile(v)
	if p.Unanswerable != "" && p.NotUndone == nil {
		p.NotUndone = supersededOnRecord(v)
	}
	return p
}

// UnanswerablePlan is the plan for an Application the round cannot decide
// for: the cause, and a migration left applied by a superseded release where
// the record read names one.
func UnanswerablePlan(v ApplicationView, cause string) Plan {
	return Plan{Unanswerable: cause, NotUndone: supersededOnRecord(v)}
}

// supersededOnRecord is what superseded says of the record read, when one
// was read.
func supersededOnRecord(v ApplicationView) *NotUndone {
	if v.Record == nil || v.RecordErr != nil {
		return nil
	}
	return superseded(*v.Record)
}

func reconcile(v ApplicationView) Plan {
	if v.InputsErr != nil {
		return Plan{Unanswerable: v.InputsErr.Error()}
	}
	if v.RecordErr != nil {
		return Plan{Unanswerable: v.RecordErr.Error()}
	}
	var p Plan
	rec := release.Record{Namespace: v.Namespace, Application: v.Application}
	if v.Record != nil {
		rec = *v.Record
	}
	next := rec
	next.Primaries = maps.Clone(rec.Primaries)
	// The hold on record is this round's decision, not a memory: a release
	// that serves, is superseded or is no longer held loses it below.
	next.Held = nil
	// A member without a Canary leaves the round nothing to read its
	// release off: reported, so that a release held or a migration left
	// applied never goes quiet because a Canary went away.
	for _, m := range v.Members {
		if !m.HasCanary {
			return Plan{Unanswerable: "member " + m.Process + " has no Canary labelled " + release.LabelPartOf + "=" + v.Application}
		}
	}
	pinned, ok, err := Carried(v.Application, v.Members)
	if err != nil {
		return Plan{Unanswerable: err.Error()}
	}
	mig := v.Inputs.Migration
	if mig != nil && mig.Identity != v.Application+"-migration" {
		return Plan{Unanswerable: fmt.Sprintf("migration identity %s is not the Application's own %s-migration", mig.Identity, v.Application)}
	}
	if ok {
		serves := false
		if pinned != rec.Serving {
			// What already serves needs no second look; only a revision
			// that may have come to serve needs its primaries compared.
			if v.DeploymentsUnread && canariesSettled(v.Members) {
				return Plan{ReadDeployments: true, ReadConfigs: true}
			}
			serves, _ = Serves(v, pinned)
		}
		switch {
		case serves:
			next.Serving, next.Primaries, next.Pinned, next.Since = pinned, primaryDigests(v.Members), "", nil
			if next.Migrated == pinned {
				next.Migrated = "" // its schema is what serves now
			}
		case pinned == rec.Serving:
			next.Pinned, next.Since = "", nil
			// A change Flagger had not seen yet when the revision came to
			// serve (resources, probes) is promoted under the same revision:
			// the digests follow it, or the next release's proof would read
			// them as moved for good.
			if canariesSettled(v.Members) {
				next.Primaries = primaryDigests(v.Members)
			}
		case pinned != rec.Pinned:
			now := v.Now.UTC()
			next.Pinned, next.Since = pinned, &now
		}
		if next.Serving == pinned && next.ServingUnwarmed() {
			targets, err := WarmTargets(v.Members)
			p.Warm = &Warm{Revision: pinned, Targets: targets, Err: err}
		}
	}
	// A record is created only once it says something: one that names
	// nothing says what having none says.
	p.Record, p.Create = next, v.Record == nil
	p.Write = !release.SameRecord(rec, next)
	if !ok || next.Pinned == "" || next.Pinned != pinned {
		// Only a release the Canaries all carry is started, held or undone:
		// while a render is being applied they name no one release.
		p.NotUndone = superseded(p.Record)
		return p
	}
	decideRelease(&p, v, next, mig)
	p.Record.Held = heldRecord(p.Held)
	if p.NotUndone == nil {
		p.NotUndone = superseded(p.Record)
	}
	// The release's decision may have moved the record on (a migration
	// started or undone); only a record that differs from the one read is
	// written.
	p.Write = !release.SameRecord(rec, p.Record)
	return p
}

// heldRecord is a hold as the record keeps it, so that what reads the record
// (the release record) reads the gate's reason rather than guess it.
func heldRecord(h *Held) *release.HeldRecord {
	if h == nil {
		return nil
	}
	return &release.HeldRecord{Reason: h.Reason, Cause: h.Cause, Since: h.Since}
}

// superseded reports a migration left applied by a release that is no
// longer the one in flight (its pin reverted, or another release applied),
// every round until an operator clears it: no decision about the release in
// flight reports it any more. What its down would return to was in that
// release's inputs, which are gone, so the tag is left empty. nil when the
// record names no such migration.
func superseded(rec release.Record) *NotUndone {
	if rec.Migrated == "" || rec.Migrated == rec.Pinned {
		return nil
	}
	return &NotUndone{Condition: UndoSuperseded, Migrated: release.RevisionTag(rec.Migrated)}
}

// decideRelease decides a release in flight, next.Pinned applied but not
// serving: start its migration, hold it, undo it.
func decideRelease(p *Plan, v ApplicationView, next release.Record, mig *release.Migration) {
	deadline, _ := time.ParseDuration(v.Inputs.Deadline)
	hold := func(reason, cause string) {
		p.Held = &Held{Reason: reason, Cause: cause, Serving: next.Serving, Pinned: next.Pinned, Since: *next.Since, Deadline: deadline}
	}
	migrated := func() { p.Record.Migrated = next.Pinned }
	// A start recorded by an earlier round whose patch never landed: the Job
	// is still suspended, so nothing ran.
	notStarted := func() {
		if p.Record.Migrated == next.Pinned {
			p.Record.Migrated = ""
		}
	}
	failed, who := FailedSince(v.Members, next.Pinned, *next.Since)
	analysisFailed := func() { hold(HeldAnalysisFailed, "Flagger failed "+who) }
	if mig == nil {
		if failed {
			analysisFailed()
		}
		return
	}
	tag := release.RevisionTag(next.Pinned)
	up, ok := ownJob(v.Jobs, mig.Identity+"-"+tag, mig.Identity, v.Application)
	if !ok {
		// The render has not applied this revision's Job yet: nothing to
		// start or undo, but a release Flagger failed is held all the same.
		if failed {
			analysisFailed()
		}
		return
	}
	// A migration that started may have changed the schema, even one that
	// failed (its changesets commit one by one): it stays recorded until
	// its release serves or its down completes.
	if !up.Suspended {
		migrated()
	}
	switch {
	case up.Failed:
		hold(HeldMigrationFailed, "Job "+up.Name+" failed")
	case up.Suspended && failed:
		// Flagger gave the release up before its migration ran: nothing
		// to start, and nothing ran to undo.
		notStarted()
		analysisFailed()
		return
	case up.Suspended:
		if holds, why := ProofHolds(mig, next, v.Members); holds {
			p.Start = startOf(up)
			migrated()
		} else {
			notStarted()
			hold(HeldStaleProof, why)
		}
		return
	case !up.Complete:
		// Running: it is undone, if at all, once it ends.
		if failed {
			analysisFailed()
		}
		return
	case failed:
		analysisFailed()
	default:
		return
	}
	decideUndo(p, v, next, mig, tag)
}

// decideUndo decides whether a held release's migration, which ran, is undone:
// only when its down exists, was not run, the release is not a first one and
// holds no non-transactional changeset, every primary still runs the proven
// revision and every member's new copy has no pod left.
func decideUndo(p *Plan, v ApplicationView, next release.Record, mig *release.Migration, tag string) {
	refuse := func(condition string) {
		p.NotUndone = &NotUndone{Tag: release.RevisionTag(mig.TestedAgainst), Condition: condition, Migrated: tag}
	}
	if mig.TestedAgainst == "" {
		refuse(UndoFirstRelease)
		return
	}
	if mig.NonTransactional {
		refuse(UndoNonTransactional)
		return
	}
	name := mig.Identity + "-down-" + tag
	down, ok := ownJob(v.Jobs, name, mig.Identity, v.Application)
	switch {
	case !ok:
		p.Unanswerable = "down Job " + name + " is not there"
		return
	case down.Failed:
		refuse(UndoDownFailed)
		return
	case down.Complete:
		// Undone: the schema is the proven revision's again.
		if p.Record.Migrated == next.Pinned {
			p.Record.Migrated = ""
		}
		return
	case !down.Suspended:
		return // being undone
	}
	if next.Serving != mig.TestedAgainst {
		refuse(UndoPrimariesMoved)
		return
	}
	if moved, _ := PrimariesMoved(next, v.Members); moved {
		refuse(UndoPrimariesMoved)
		return
	}
	if v.DeploymentsUnread {
		p.ReadDeployments = true
		return
	}
	// Flagger puts the new spec on a primary when it starts promoting and
	// records its digest only once promoted: a promotion that failed half
	// way leaves a primary on the release's program under the old digest.
	// A member whose release changed only what is not its program (its
	// resources, its probes) reads the same; the undo is refused for it
	// too, as the round cannot tell the two apart.
	for _, m := range v.Members {
		if m.Canary.LastAppliedSpec == next.Primaries[m.Process] || m.Target == nil || m.Primary == nil {
			continue
		}
		if release.SameProgram(*m.Target, *m.Primary) == "" {
			refuse(UndoPrimariesMoved)
			return
		}
	}
	if v.NewCopyPods == nil {
		p.ReadNewCopies = true
		return
	}
	for _, m := range v.Members {
		if v.NewCopyPods[m.Process] > 0 {
			refuse(UndoNewCopyRunning)
			return
		}
	}
	p.Undo = startOf(down)
}
