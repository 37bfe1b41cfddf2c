package releasegate

import (
	"context"

	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
)

// TrafficSender makes the gate's own requests to members' Canary services;
// *owntraffic.Sender is the one the binary uses.
type TrafficSender interface {
	// OwnTraffic requests every path at base, owntraffic.Rounds times over.
	OwnTraffic(ctx context.Context, base string, paths []string) (owntraffic.Traffic, error)
	// Protected requests path at base once with no credentials and decides.
	Protected(ctx context.Context, base, process, path string) (owntraffic.Verdict, error)
}

// UseTrafficSender replaces the sender New built (production settings). Call it
// before the gate serves; tests hand one whose dialer reaches loopback
// servers.
func (g *Gate) UseTrafficSender(p TrafficSender) {
	if p != nil {
		g.sender = p
	}
}
