package view

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/said"
)

// DefaultStuckAfter is STUCK_AFTER's default: how long a module on a node
// may go without progress before it is stuck.
const DefaultStuckAfter = 10 * time.Minute

// Place is one module on one node.
type Place = bus.Place

// State is where a module on a node stands.
type State string

// The states of a place.
const (
	// StateMoving: the have is not yet the want, and it moved within
	// STUCK_AFTER.
	StateMoving State = "moving"
	// StateSettled: the have is the want's fingerprint and composition,
	// running and healthy.
	StateSettled State = "settled"
	// StateStuck: not settled, and nothing moved for STUCK_AFTER.
	StateStuck State = "stuck"
)

// Cell is one place as the view judges it.
type Cell struct {
	Place
	Want  bus.Want
	Have  *bus.Have // nil when the node wrote none
	State State
	// Since is the last progress: the later of the want's and the have's
	// time.
	Since time.Time
}

// Picture is the whole delivery at one moment.
type Picture struct {
	// Revision is source.main's; "" when CI wrote none.
	Revision string
	// Delivered is whether every want of every module the revision names
	// is that module's fingerprint there and every such have equals its
	// want, running and healthy.
	Delivered bool
	Cells     []Cell
}

// Judge is the picture of src, the wants and the haves at now. A place is
// one a want names; a have no want names is not judged.
func Judge(src Source, wants map[Place]bus.Want, haves map[Place]bus.Have, now time.Time, stuckAfter time.Duration) Picture {
	p := Picture{Revision: src.Revision}
	for place, w := range wants {
		c := Cell{Place: place, Want: w, Since: w.At}
		if h, ok := haves[place]; ok {
			c.Have = &h
			if h.At.After(c.Since) {
				c.Since = h.At
			}
		}
		switch {
		case c.Have != nil && c.Have.Digest == w.Digest && c.Have.RunsHealthy(w.Fingerprint):
			c.State = StateSettled
		case now.Sub(c.Since) >= stuckAfter:
			c.State = StateStuck
		default:
			c.State = StateMoving
		}
		p.Cells = append(p.Cells, c)
	}
	slices.SortFunc(p.Cells, func(a, b Cell) int {
		return cmp.Or(cmp.Compare(a.Module, b.Module), cmp.Compare(a.Node, b.Node))
	})
	p.Delivered = delivered(src, p.Cells)
	return p
}

// delivered holds a revision to every place of every module it names; a
// module it names that no node wants is not delivered anywhere.
func delivered(src Source, cells []Cell) bool {
	if src.Revision == "" {
		return false
	}
	wanted := map[string]bool{}
	for _, c := range cells {
		fp, named := src.Modules[c.Module]
		if !named {
			continue
		}
		if c.Want.Fingerprint != fp || c.State != StateSettled {
			return false
		}
		wanted[c.Module] = true
	}
	return len(wanted) == len(src.Modules)
}

// Kind is what an event says.
type Kind string

// The kinds of event, each on mesh.events.<kind>.
const (
	KindDelivered Kind = "delivered"
	KindMoving    Kind = "moving"
	KindSettled   Kind = "settled"
	KindStuck     Kind = "stuck"
)

// Event is one thing the view says, once: a revision delivered, or a place
// moving, settled or stuck at one composition.
type Event struct {
	What        Kind      `json:"kind"`
	Revision    string    `json:"revision,omitempty"`
	Node        string    `json:"node,omitempty"`
	Module      string    `json:"module,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Digest      string    `json:"digest,omitempty"`
	Since       time.Time `json:"since"`
}

// ID is what makes the event once: per revision, or per place at one
// composition and kind.
func (e Event) ID() string { return said.ID(e) }

// Kind is the event's kind, for its subject (said.Event).
func (e Event) Kind() string { return string(e.What) }

// Names make it once: the revision, or the node, module and composition.
func (e Event) Names() []string {
	if e.What == KindDelivered {
		return []string{e.Revision}
	}
	return []string{e.Node, e.Module, e.Digest}
}

// Attrs are its log line's fields.
func (e Event) Attrs() []slog.Attr {
	return []slog.Attr{slog.String("revision", e.Revision), slog.String("node", e.Node), slog.String("module", e.Module),
		slog.String("fingerprint", e.Fingerprint), slog.String("digest", e.Digest), slog.Time("since", e.Since)}
}

// Events is what a picture has to say; the view says each one whose ID it
// has not said before.
func Events(p Picture) []Event {
	var out []Event
	for _, c := range p.Cells {
		out = append(out, Event{What: Kind(c.State), Node: c.Node, Module: c.Module,
			Fingerprint: c.Want.Fingerprint, Digest: c.Want.Digest, Since: c.Since})
	}
	if p.Delivered {
		var since time.Time
		for _, c := range p.Cells {
			if c.Since.After(since) {
				since = c.Since
			}
		}
		out = append(out, Event{What: KindDelivered, Revision: p.Revision, Since: since})
	}
	return out
}
