// Package watchman mirrors every want as a pulse owed by its node's agent
// until the node's have names the want's fingerprint, running healthy: an
// apply that failed or whose check fails has not answered. A pulse owed
// longer than STALL_AFTER is a stall: said once per want on mesh.events.stall, and
// counted by node on the watchman's /metrics.
package watchman

import (
	"cmp"
	"log/slog"
	"slices"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
)

// DefaultStallAfter is STALL_AFTER's default.
const DefaultStallAfter = 10 * time.Minute

// Pulse is a want its node's agent has not answered: its have names
// another fingerprint, or the fingerprint not running healthy, or there is
// none.
type Pulse struct {
	bus.Place
	Want bus.Want
	// Has is the fingerprint the node's have names; "" for none.
	Has     string
	Stalled bool
}

// Owed is every pulse owed at now, by module then node; a want is owed
// from its time, and stalled once STALL_AFTER has passed.
func Owed(wants map[bus.Place]bus.Want, haves map[bus.Place]bus.Have, now time.Time, stallAfter time.Duration) []Pulse {
	var out []Pulse
	for place, w := range wants {
		h, ok := haves[place]
		if ok && h.RunsHealthy(w.Fingerprint) {
			continue
		}
		out = append(out, Pulse{Place: place, Want: w, Has: h.Fingerprint, Stalled: now.Sub(w.At) >= stallAfter})
	}
	slices.SortFunc(out, func(a, b Pulse) int {
		return cmp.Or(cmp.Compare(a.Module, b.Module), cmp.Compare(a.Node, b.Node))
	})
	return out
}

// Stall is a stalled pulse as it is said.
type Stall struct {
	Node        string    `json:"node"`
	Module      string    `json:"module"`
	Fingerprint string    `json:"fingerprint"`
	Digest      string    `json:"digest"`
	Has         string    `json:"has"`
	WantedAt    time.Time `json:"wantedAt"`
}

var _ dedup.Event = Stall{}

// Kind is "stall": mesh.events.stall.
func (Stall) Kind() string { return "stall" }

// Names make a stall once per want: its place and composition.
func (s Stall) Names() []string { return []string{s.Node, s.Module, s.Digest} }

// Attrs are its log line's fields.
func (s Stall) Attrs() []slog.Attr {
	return []slog.Attr{slog.String("node", s.Node), slog.String("module", s.Module), slog.String("fingerprint", s.Fingerprint),
		slog.String("digest", s.Digest), slog.String("has", s.Has), slog.Time("wantedAt", s.WantedAt)}
}

// StallOf is a stalled pulse's stall.
func StallOf(p Pulse) Stall {
	return Stall{Node: p.Node, Module: p.Module, Fingerprint: p.Want.Fingerprint, Digest: p.Want.Digest, Has: p.Has, WantedAt: p.Want.At}
}
