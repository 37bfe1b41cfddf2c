package agent

import (
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
type Offer struct {
	Found      bool
	Digest     string
	Unverified string
}

// Decide is what a want asks of a node: nothing when it runs the want's
// fingerprint and composition, or when the node went back from that very
// composition after the want was written (a want written since tries it
// again); else, once the composition is there, apply it only when it is
// the very one the want names and it verified.
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
	}
	return ActionApply, "the want names " + want.Fingerprint
}
