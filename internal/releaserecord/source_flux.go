package releaserecord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// The annotations beside the Rollout ones that make a unit's release a
// rollback: the release id it undoes, and why.
const (
	AnnotationRollbackOf     = "delivery.jorisjonkers.dev/rollback-of"
	AnnotationRollbackReason = "delivery.jorisjonkers.dev/rollback-reason"
)

// FluxReader is what the Flux look reads of the release path: the units,
// their sources and members (releasepath.Kube reads them).
type FluxReader interface {
	Units(ctx context.Context, namespace string) ([]releasepath.UnitObject, error)
	Source(ctx context.Context, namespace, name string) (releasepath.Source, error)
	Member(ctx context.Context, canary types.NamespacedName) (releasepath.Member, error)
}

// GateWarmups reads the Release Gate's warmup records
// (releasepath.GateClient reads them over the gate's GET /releases).
type GateWarmups interface {
	Releases(ctx context.Context) (map[string]releasepath.Warmup, error)
}

// Flux is this product's path: the Projects' Flux units in Namespace with
// the Rollout annotations, their OCIRepositories, the Canaries of their
// inventory and the Release Gate's warmups, read through the release path's
// read model, as the Reporter reads them, so both services see a release
// the same way.
type Flux struct {
	Namespace    string
	Cluster, Env string
	Kube         FluxReader
	Gate         GateWarmups
	// Origins reads where a unit's artifacts came from, for the record's
	// gitRevision; nil leaves it "".
	Origins Origins
	// Holds reads the gate's word on each pinned release with members; nil
	// says nothing of holds.
	Holds  Holds
	Logger *slog.Logger

	mu sync.Mutex
	// skipped keeps why each unit was last skipped, so it is logged once.
	skipped map[string]string
}

var _ Observed = (*Flux)(nil)

// Name is "flux".
func (f *Flux) Name() string { return "flux" }

// FluxUnit is what one look saw of a Project's unit.
type FluxUnit struct {
	Unit    releasepath.UnitObject
	Rollout releasepath.Rollout
	// Source is the unit's OCIRepository; zero when it is missing or not
	// pinned to a digest.
	Source  releasepath.Source
	Members []releasepath.Member
	Gate    releasepath.Gate
	// Origin is where the unit's artifacts came from (GitRevision).
	Origin Origin
	// Namespace is the unit's, for the objects the release moved.
	Namespace string
	// Held is the gate's word on the release its members carry (why it
	// holds it, "" not held); nil when no word was read.
	Held *string
}

// Observe reads every unit, its source and members, and the gate once
// when a unit needs it, and says what each shows.
func (f *Flux) Observe(ctx context.Context) ([]Fact, error) {
	units, err := f.Kube.Units(ctx, f.Namespace)
	if err != nil {
		return nil, err
	}
	var facts []Fact
	var gate *releasepath.Gate
	var failed error
	for _, u := range units {
		rollout, err := releasepath.RolloutOf(u.Annotations)
		if errors.Is(err, releasepath.ErrNoRollout) {
			continue
		}
		if err == nil && u.SourceKind != "OCIRepository" {
			err = fmt.Errorf("the unit applies a %s, not an OCIRepository", u.SourceKind)
		}
		if err != nil {
			f.skip(ctx, u.Name, err.Error())
			continue
		}
		view := FluxUnit{Unit: u, Rollout: rollout, Namespace: f.Namespace}
		if view.Source, err = f.Kube.Source(ctx, u.Source.Namespace, u.Source.Name); err != nil && !errors.Is(err, releasepath.ErrNotFound) {
			failed = errors.Join(failed, err)
			continue
		}
		if f.Origins != nil {
			if view.Origin, err = f.Origins.Origin(ctx, f.Namespace, u); err != nil {
				failed = errors.Join(failed, err)
				continue
			}
		}
		for _, c := range u.Canaries {
			m, err := f.Kube.Member(ctx, c)
			if err != nil {
				failed = errors.Join(failed, err)
				continue
			}
			view.Members = append(view.Members, m)
		}
		if gate == nil && len(view.Members) > 0 && view.Source.Pin != "" {
			g := releasepath.Gate{}
			if f.Gate != nil {
				g.Warmups, err = f.Gate.Releases(ctx)
				g.Answered = err == nil
			}
			gate = &g
		}
		if gate != nil {
			view.Gate = *gate
		}
		if f.Holds != nil && len(view.Members) > 0 && view.Source.Pin != "" && view.Source.Pin == rollout.Digest {
			reason, known, err := f.Holds.Held(ctx, view.Members)
			if err != nil {
				failed = errors.Join(failed, err)
				continue
			}
			if known {
				view.Held = &reason
			}
		}
		unitFacts, err := FluxFacts(view, f.Cluster, f.Env)
		if err != nil {
			f.skip(ctx, u.Name, err.Error())
			continue
		}
		f.skip(ctx, u.Name, "")
		facts = append(facts, unitFacts...)
	}
	return facts, failed
}

// skip logs why a unit is skipped once, until the reason changes; "" says
// it is read again.
func (f *Flux) skip(ctx context.Context, unit, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.skipped == nil {
		f.skipped = map[string]string{}
	}
	if f.skipped[unit] == why {
		return
	}
	f.skipped[unit] = why
	if why != "" {
		f.Logger.LogAttrs(ctx, slog.LevelWarn, "unit skipped", slog.String("unit", unit), slog.String("why", why))
	}
}

// FluxFacts is what a unit shows, as facts: the Rollout's release merged,
// then at most one of a sync failure (the unit, or before it applies the pin
// its source, not Ready on the release, from its first failed attempt),
// Progressing before the unit records the pin applied (it attempted the
// pin and a Canary analyses), Degraded with the abort flag (a
// Canary Flagger failed), Healthy (releasepath.Decide's test: every member
// settled and promoted and warmed up, or a unit without members applied and
// Ready), Degraded without it (promoted, but the warmup failed), or
// Progressing (applied, and not through). The pod hash is each member's
// Flagger lastAppliedSpec, on Healthy and Degraded facts alone: while a
// release progresses or fails to sync its members' specs move one by one.
func FluxFacts(u FluxUnit, cluster, env string) ([]Fact, error) {
	facts, err := fluxFacts(u, cluster, env)
	if err != nil || u.Held == nil || len(facts) < 2 {
		return facts, err
	}
	// The gate's word comes last, after the phase it speaks beside: a
	// release that turned healthy in this look is held by no gate.
	return append(facts, Fact{Release: facts[0].Release, Phase: PhaseHeld, Held: *u.Held}), nil
}

func fluxFacts(u FluxUnit, cluster, env string) ([]Fact, error) {
	id, err := NewReleaseID(u.Unit.Project, u.Rollout.Version, cluster, env)
	if err != nil {
		return nil, err
	}
	rel := Release{ID: id, Kind: KindPromote, Image: u.Rollout.Digest, GitURL: "https://github.com/" + u.Rollout.Repository.String(),
		GitRevision: GitRevision(u), Objects: unitObjects(u)}
	if of := u.Unit.Annotations[AnnotationRollbackOf]; of != "" {
		target, err := ParseReleaseID(of)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", AnnotationRollbackOf, err)
		}
		rel.Kind, rel.RollbackOf, rel.RollbackReason = KindRollback, target.String(), oneLine(u.Unit.Annotations[AnnotationRollbackReason])
	}
	merged := Fact{Release: rel, Phase: PhaseMerged}
	if u.Origin.SourcePin != "" && u.Origin.SourcePin == u.Rollout.Digest {
		merged.Order.ObjectGeneration = u.Origin.SourceGeneration
	}
	facts := []Fact{merged}
	in := releasepath.Input{Project: u.Unit.Project, Version: u.Rollout.Version, RolloutDigest: u.Rollout.Digest, Pin: u.Source.Pin,
		Source: u.Source.Ready, Unit: u.Unit.Unit, Members: u.Members, Gate: u.Gate, RolloutURL: u.Rollout.URL}
	phase := func(p Phase) Fact { return Fact{Release: rel, Phase: p, PodHash: podHash(u.Members)} }
	ready := u.Unit.Unit.Ready
	fluxFailed := in.FluxFailed()
	if !in.Pinned() {
		return facts, nil
	}
	syncFailed := func(why releasepath.Condition) []Fact {
		return append(facts, Fact{Release: rel, Phase: PhaseSyncFailed, Message: why.Reason + ": " + why.Message})
	}
	if !in.Applied() {
		switch {
		case fluxFailed:
			return syncFailed(ready), nil
		case u.Source.Ready.Status == "False":
			return syncFailed(u.Source.Ready), nil
		case u.Origin.SourceFailure.Pin == u.Source.Pin && u.Origin.SourceFailure.Status == "False":
			return syncFailed(u.Origin.SourceFailure.Condition), nil
		case releasepath.RevisionDigest(u.Unit.Unit.AttemptedRevision) == u.Source.Pin && analysing(u.Members):
			// Flux records a revision as applied only once its health
			// checks pass, which waits on the Canaries' analyses: a Canary
			// analysing the attempted pin is the release progressing.
			return append(facts, Fact{Release: rel, Phase: PhaseProgressing}), nil
		}
		return facts, nil
	}
	for _, m := range u.Members {
		if m.State.HasCanary && m.State.Canary.Phase == flaggerv1.CanaryPhaseFailed {
			f := phase(PhaseDegraded)
			f.Abort, f.At, f.Message = true, m.ChangedAt, m.State.Process+" rolled back: "+m.Message
			return append(facts, f), nil
		}
	}
	if fluxFailed {
		return syncFailed(ready), nil
	}
	d := releasepath.Decide(in)
	switch {
	case !d.Write:
		return facts, nil
	case d.Status.State == releasepath.StateSuccess:
		return append(facts, phase(PhaseHealthy)), nil
	case d.Status.State == releasepath.StateFailure:
		f := phase(PhaseDegraded)
		f.Message = d.Status.Description
		return append(facts, f), nil
	}
	return append(facts, Fact{Release: rel, Phase: PhaseProgressing}), nil
}

// analysingPhases are Flagger's phases of a Canary taking a new spec
// through its analysis or promotion.
var analysingPhases = []flaggerv1.CanaryPhase{flaggerv1.CanaryPhaseProgressing, flaggerv1.CanaryPhaseWaiting, flaggerv1.CanaryPhaseWaitingPromotion,
	flaggerv1.CanaryPhasePromoting, flaggerv1.CanaryPhaseFinalising}

// analysing reports whether a member's Canary is in one of them.
func analysing(members []releasepath.Member) bool {
	for _, m := range members {
		if m.State.HasCanary && slices.Contains(analysingPhases, m.State.Canary.Phase) {
			return true
		}
	}
	return false
}

// unitObjects are the objects a unit's release moves: the unit, and the
// Canaries of its inventory.
func unitObjects(u FluxUnit) string {
	var objects []string
	if u.Namespace != "" {
		objects = append(objects, "Kustomization/"+u.Namespace+"/"+u.Unit.Name)
	}
	for _, c := range u.Unit.Canaries {
		objects = append(objects, "Canary/"+c.Namespace+"/"+c.Name)
	}
	return ObjectsOf(objects)
}

// podHash joins each member's lastAppliedSpec, by member.
func podHash(members []releasepath.Member) string {
	var parts []string
	for _, m := range members {
		if m.State.HasCanary && m.State.Canary.LastAppliedSpec != "" {
			parts = append(parts, m.State.Process+"="+m.State.Canary.LastAppliedSpec)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
