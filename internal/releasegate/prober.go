package releasegate

import (
	"context"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
)

// Prober makes the gate's own requests to members' Canary services;
// *owntraffic.Prober is the one the binary uses.
type Prober interface {
	// OwnTraffic requests every path at base, owntraffic.Rounds times over.
	OwnTraffic(ctx context.Context, base string, paths []string) (owntraffic.Traffic, error)
	// Protected requests path at base once with no credentials and decides.
	Protected(ctx context.Context, base, process, path string) (owntraffic.Verdict, error)
}

// UseProber replaces the prober New built (production settings). Call it
// before the gate serves; tests hand one whose dialer reaches loopback
// servers.
func (g *Gate) UseProber(p Prober) {
	if p != nil {
		g.prober = p
	}
}
