package view

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
)

// DefaultStuckAfter is STUCK_AFTER's default: how long a module on a node
// may go without progress before it is stuck.
const DefaultStuckAfter = 10 * time.Minute

// DefaultOnlineWindow is ONLINE_WINDOW's default, the assigner's: a node
// that wrote a have this recently is online.
const DefaultOnlineWindow = 2 * time.Minute

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
	// Since is the last progress: the later of the want's time and when
	// the have last changed (a heartbeat is no progress).
	Since time.Time
}

// Picture is the whole delivery at one moment.
type Picture struct {
	// Revision is source.main's; "" when CI wrote none.
	Revision string
	// Delivered is whether every registered node of every module the
	// revision names, and every node that wants one, runs the module's
	// fingerprint there as its want names it, healthy, or is offline.
	Delivered bool
	// Offline is the nodes the revision was delivered without, sorted:
	// offline, and not running it.
	Offline []string
	Cells   []Cell
}

// Input is everything Judge reads, as plain values.
type Input struct {
	Source        Source
	Registrations []bus.Registration
	Wants         map[Place]bus.Want
	Haves         map[Place]bus.Have
	Now           time.Time
	StuckAfter    time.Duration
	// OnlineWindow is DefaultOnlineWindow when zero.
	OnlineWindow time.Duration
}

// Judge is the picture of the source, the registrations, the wants and the
// haves at now. A place is one a want names; a have no want names is not
// judged.
func Judge(in Input) Picture {
	p := Picture{Revision: in.Source.Revision, Cells: make([]Cell, 0, len(in.Wants))}
	haves := make([]bus.Have, 0, len(in.Wants)) // one allocation for every cell's have
	for place, w := range in.Wants {
		c := Cell{Place: place, Want: w, Since: w.At}
		if h, ok := in.Haves[place]; ok {
			haves = append(haves, h)
			c.Have = &haves[len(haves)-1]
			if changed := h.Changed(); changed.After(c.Since) {
				c.Since = changed
			}
		}
		switch {
		case settled(w, c.Have):
			c.State = StateSettled
		case in.Now.Sub(c.Since) >= in.StuckAfter:
			c.State = StateStuck
		default:
			c.State = StateMoving
		}
		p.Cells = append(p.Cells, c)
	}
	slices.SortFunc(p.Cells, func(a, b Cell) int {
		return cmp.Or(cmp.Compare(a.Module, b.Module), cmp.Compare(a.Node, b.Node))
	})
	p.Delivered, p.Offline = delivered(in, p.Cells)
	return p
}

// settled is whether h runs what w names, healthy.
func settled(w bus.Want, h *bus.Have) bool {
	return h != nil && h.Digest == w.Digest && h.RunsHealthy(w.Fingerprint)
}

// delivered holds a revision to every node of every module it names: each
// registered node and each node that wants the module runs its fingerprint
// settled at its want, or is offline (it wrote no have within the window)
// and is named. A registered node that is online and has no want yet
// holds the revision back, and so does a module it names that is not
// registered (the assigner may not have got to it) or that runs nowhere.
func delivered(in Input, cells []Cell) (bool, []string) {
	if in.Source.Revision == "" {
		return false, nil
	}
	window := in.OnlineWindow
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	online := map[string]bool{}
	for place, h := range in.Haves {
		if !h.At.Before(in.Now.Add(-window)) {
			online[place.Node] = true
		}
	}
	runs := map[string]bool{} // the named modules that run settled somewhere
	registered := map[string]bool{}
	offline := map[string]bool{}
	// ok is whether a place the revision holds to lets it be delivered.
	ok := func(node, module string, isSettled bool) bool {
		switch {
		case isSettled:
			runs[module] = true
		case !online[node]:
			offline[node] = true
		default:
			return false
		}
		return true
	}
	// Every node that wants a named module...
	for _, c := range cells {
		if fp, named := in.Source.Modules[c.Module]; named && !ok(c.Node, c.Module, c.Want.Fingerprint == fp && c.State == StateSettled) {
			return false, nil
		}
	}
	// ...and every registered node that does not want it yet.
	for _, r := range in.Registrations {
		if _, named := in.Source.Modules[r.Module]; !named {
			continue
		}
		registered[r.Module] = true
		for _, n := range r.Nodes {
			if _, wanted := in.Wants[Place{Node: n, Module: r.Module}]; !wanted && !ok(n, r.Module, false) {
				return false, nil
			}
		}
	}
	for module := range in.Source.Modules {
		if !registered[module] || !runs[module] {
			return false, nil // offline everywhere is delivered nowhere
		}
	}
	return true, slices.Sorted(maps.Keys(offline))
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
	What        Kind   `json:"kind"`
	Revision    string `json:"revision,omitempty"`
	Node        string `json:"node,omitempty"`
	Module      string `json:"module,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Digest      string `json:"digest,omitempty"`
	// Offline is, of a delivered revision, the nodes it was delivered
	// without: offline and not running it.
	Offline []string  `json:"offline,omitempty"`
	Since   time.Time `json:"since"`
}

// ID is what makes the event once: per revision, or per place at one
// composition and kind.
func (e Event) ID() string { return dedup.ID(e) }

// Kind is the event's kind, for its subject (dedup.Event).
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
	attrs := []slog.Attr{slog.String("revision", e.Revision), slog.String("node", e.Node), slog.String("module", e.Module),
		slog.String("fingerprint", e.Fingerprint), slog.String("digest", e.Digest), slog.Time("since", e.Since)}
	if len(e.Offline) > 0 {
		attrs = append(attrs, slog.Any("offline", e.Offline))
	}
	return attrs
}

// Events is what a picture has to say; the view says each one whose ID it
// has not said before.
func Events(p Picture) []Event {
	out := make([]Event, 0, len(p.Cells)+1)
	for _, c := range p.Cells {
		out = append(out, cellEvent(c))
	}
	if p.Delivered {
		out = append(out, deliveredEvent(p))
	}
	return out
}

// cellEvent is what a place's cell says.
func cellEvent(c Cell) Event {
	return Event{What: Kind(c.State), Node: c.Node, Module: c.Module, Fingerprint: c.Want.Fingerprint, Digest: c.Want.Digest, Since: c.Since}
}

// deliveredEvent is the revision delivered, since its last place moved.
func deliveredEvent(p Picture) Event {
	var since time.Time
	for _, c := range p.Cells {
		if c.Since.After(since) {
			since = c.Since
		}
	}
	return Event{What: KindDelivered, Revision: p.Revision, Offline: p.Offline, Since: since}
}
