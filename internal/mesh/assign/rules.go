package assign

import (
	"cmp"
	"slices"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// DefaultOnlineWindow is how recently a node must have written a have to
// count as online, and so to be a canary.
const DefaultOnlineWindow = 2 * time.Minute

// Place is one module on one node, the bus's own key of a want or a have.
type Place = bus.Place

// Version is one build of a module.
type Version struct{ Module, Fingerprint string }

// Composition is a composition for a node that exists and verified against
// the trusted keys, with the digest of its envelope.
type Composition struct {
	Node, Module, Fingerprint string
	Digest                    string
}

// Input is everything the rules read, as plain values.
type Input struct {
	Now time.Time
	// OnlineWindow is DefaultOnlineWindow when zero.
	OnlineWindow  time.Duration
	Registrations []bus.Registration
	Builds        []bus.Build
	Holds         []bus.Hold
	Grants        []bus.Grant
	// Compositions are the verified ones only; one that does not verify is
	// not here, so rule 7 fails for it.
	Compositions []Composition
	Wants        map[Place]bus.Want
	Haves        map[Place]bus.Have
}

// Write is a want the rules give that the bus does not hold yet.
type Write struct {
	Place
	Want bus.Want
}

// Decide is the wants to write: for every module's node whose want the
// rules own (or that has none), the module's newest done build that is not
// held, when all seven rules hold for it there:
//
//  1. the build of the fingerprint is done;
//  2. the fingerprint is not held;
//  3. the node is the module's canary, or the canary (or the node itself)
//     runs the fingerprint healthy; a build a node rolled back from is, on
//     that node alone, as if held;
//  4. at most step other nodes are ahead of what the canary proved (step 0: no bound);
//  5. every provider of the module runs healthy on the node;
//  6. the grant exists;
//  7. the composition for the node at the fingerprint exists and verified.
//
// A want a put or the operator's hand owns is never written over, and one
// equal to what the rules give is not written again. Where a rule fails the
// node keeps the want it has. The writes are ordered by node, then module.
func Decide(in Input) []Write {
	window := in.OnlineWindow
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	newest := map[string][]bus.Build{}
	for _, b := range in.Builds {
		if b.State == bus.BuildDone {
			newest[b.Module] = append(newest[b.Module], b)
		}
	}
	held := set(in.Holds, func(h bus.Hold) Version { return Version{h.Module, h.Fingerprint} })
	granted := set(in.Grants, func(g bus.Grant) Version { return Version{g.Module, g.Fingerprint} })
	composed := make(map[Composition]string, len(in.Compositions))
	for _, c := range in.Compositions {
		composed[Composition{Node: c.Node, Module: c.Module, Fingerprint: c.Fingerprint}] = c.Digest
	}
	online := map[string]bool{}
	for p, h := range in.Haves {
		if !h.At.Before(in.Now.Add(-window)) {
			online[p.Node] = true
		}
	}

	var writes []Write
	for _, reg := range in.Registrations {
		fingerprint, ok := target(newest[reg.Module], held)
		if !ok {
			continue // rules 1 and 2: no done build that is not held
		}
		nodes := slices.Sorted(slices.Values(reg.Nodes))
		canary, hasCanary := "", false
		for _, n := range nodes {
			if online[n] {
				canary, hasCanary = n, true
				break
			}
		}
		if !hasCanary {
			continue // rule 3: no canary, so no node may move
		}
		// Rule 4 counts the nodes besides the canary that want the
		// fingerprint and do not run it healthy yet: the ones ahead of what
		// the canary proved, still proving it themselves.
		ahead := 0
		if reg.Step > 0 {
			for _, n := range nodes {
				p := Place{Node: n, Module: reg.Module}
				if w, ok := in.Wants[p]; n != canary && ok && w.Fingerprint == fingerprint && !in.Haves[p].RunsHealthy(fingerprint) {
					ahead++
				}
			}
		}
		for _, n := range nodes {
			p := Place{Node: n, Module: reg.Module}
			current, has := in.Wants[p]
			if has && current.Owner != bus.OwnerRules {
				continue // a put's or the hand's
			}
			fingerprint := fingerprint
			if back := in.Haves[p].RolledBackFrom(); back == fingerprint {
				// The build failed its health on this node, which went back
				// by itself: the node is given the newest build besides it,
				// as if it were held here alone.
				if fingerprint, ok = target(newest[reg.Module], withHeld(held, Version{reg.Module, back})); !ok {
					continue
				}
			}
			if n != canary && !in.Haves[Place{Node: canary, Module: reg.Module}].RunsHealthy(fingerprint) && !in.Haves[p].RunsHealthy(fingerprint) {
				continue // rule 3; a node that runs it healthy already risks nothing
			}
			if !granted[Version{reg.Module, fingerprint}] {
				continue // rule 6
			}
			digest, ok := composed[Composition{Node: n, Module: reg.Module, Fingerprint: fingerprint}]
			if !ok {
				continue // rule 7
			}
			next := bus.Want{Fingerprint: fingerprint, Digest: digest, Owner: bus.OwnerRules, At: in.Now}
			if has && current.Same(next) {
				continue
			}
			if !providersHealthy(in.Haves, n, reg.Providers) {
				continue // rule 5
			}
			if n != canary && reg.Step > 0 && !in.Haves[p].RunsHealthy(fingerprint) {
				if ahead >= reg.Step {
					continue // rule 4
				}
				if !has || current.Fingerprint != fingerprint {
					ahead++
				}
			}
			writes = append(writes, Write{Place: p, Want: next})
		}
	}
	slices.SortFunc(writes, func(a, b Write) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Module, b.Module))
	})
	return writes
}

// target is the newest of a module's done builds that is not held: a hold
// on the newest takes every node back to the one before it, canary first.
// Builds at the same time are ordered by fingerprint, so the choice never
// depends on the order they were read in.
func target(done []bus.Build, held map[Version]bool) (string, bool) {
	var best bus.Build
	found := false
	for _, b := range done {
		if held[Version{b.Module, b.Fingerprint}] {
			continue
		}
		if !found || b.At.After(best.At) || b.At.Equal(best.At) && b.Fingerprint > best.Fingerprint {
			best, found = b, true
		}
	}
	return best.Fingerprint, found
}

func providersHealthy(haves map[Place]bus.Have, node string, providers []string) bool {
	for _, p := range providers {
		h, ok := haves[Place{Node: node, Module: p}]
		if !ok || !h.RunsHealthy(h.Fingerprint) {
			return false
		}
	}
	return true
}

// withHeld is held and one version more, held beside it.
func withHeld(held map[Version]bool, v Version) map[Version]bool {
	out := make(map[Version]bool, len(held)+1)
	for k := range held {
		out[k] = true
	}
	out[v] = true
	return out
}

func set[T any](items []T, key func(T) Version) map[Version]bool {
	s := make(map[Version]bool, len(items))
	for _, it := range items {
		s[key(it)] = true
	}
	return s
}
