package agent

import (
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// Running is what a node runs of a module, as its disk says.
type Running struct {
	Fingerprint string `json:"fingerprint"`
	Digest      string `json:"digest"`
}

// RolledBack is a version the node went back from because it did not pass
// its health in time, why, and when.
type RolledBack struct {
	Running
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Action is what the agent does about a want.
type Action string

// The actions.
const (
	// ActionNone: the want is what runs, or there is nothing yet to apply.
	ActionNone Action = "none"
	// ActionApply: lay the composition down and switch to it.
	ActionApply Action = "apply"
	// ActionRefuse: never apply it; the have says why.
	ActionRefuse Action = "refuse"
)

// Offer is the composition the node's bucket holds for the want's
// fingerprint: found or not, its digest, and whether its envelope
// verified against the trusted keys (Unverified says why not).
//
// Revision is the entry's revision in the bucket and Runs the revision of
// the entry of what runs (0 when it is gone or was written again since):
// only the operator writes the bucket, so they order the compositions as it
// composed them. RunsHeld says what runs is held, which sends the nodes back.
type Offer struct {
	Found      bool
	Digest     string
	Unverified string
	Revision   uint64
	Runs       uint64
	RunsHeld   bool
}

// Decide is what a want asks of a node: nothing when it runs the want's
// fingerprint and composition, or when the node went back from that very
// composition after the want was written (a want written since tries it
// again); else, once the composition is there, apply it only when it is
// the very one the want names, it verified, and it is not older than what
// runs unless a put, a hand or a hold on what runs asks for that (rollback
// protection: whoever can write a want cannot move a node back to any
// version ever signed). The want's owner is the one the bus proves
// (ProvenOwner), never the one it says alone.
func Decide(want bus.Want, running Running, offer Offer, back RolledBack) (Action, string) {
	switch {
	case want.Fingerprint == running.Fingerprint && want.Digest == running.Digest:
		return ActionNone, "runs what the want names"
	case want.Fingerprint == back.Fingerprint && want.Digest == back.Digest && !want.At.After(back.At):
		return ActionNone, "rolled back from " + want.Fingerprint + " after the want was written"
	case !offer.Found:
		return ActionNone, "no composition for " + want.Fingerprint + " yet"
	case offer.Digest != want.Digest:
		return ActionRefuse, "the composition's digest " + offer.Digest + " is not the want's " + want.Digest
	case offer.Unverified != "":
		return ActionRefuse, "the composition does not verify: " + offer.Unverified
	case offer.Runs > offer.Revision && !offer.RunsHeld && !goesBack(want.Owner):
		return ActionRefuse, "the composition is older than the one that runs, and neither a put, a hand nor a hold asks to go back"
	}
	return ActionApply, "the want names " + want.Fingerprint
}

// goesBack says the want's owner may send a node to an older composition:
// the operator's put or hand, never the rules or an owner not known.
func goesBack(owner bus.Owner) bool {
	return owner == bus.OwnerHand || strings.HasPrefix(string(owner), "put:")
}

// ProvenOwner is who owns a want as far as the bus proves it, which is what
// Decide is to be given: a put's or a hand's only when the operator's seal
// (nil for none) names that very want, its fingerprint, composition and
// owner; the rules otherwise. The assigner's credential writes wants and
// may say any owner in them, but no part's may write a seal.
func ProvenOwner(want bus.Want, seal *bus.Want) bus.Owner {
	if seal == nil || !goesBack(want.Owner) || !seal.Same(want) {
		return bus.OwnerRules
	}
	return want.Owner
}
