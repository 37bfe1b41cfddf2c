package podcallers

import (
	"net/netip"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Admits reports whether addr, a connection's source address, belongs to a
// pod among pods (the pods of the caller's namespace its selector matches):
// Running, not terminating, not on the host network (where its address
// would be the node's, shared with everything else there) and under
// serviceAccount.
func Admits(addr netip.Addr, pods []release.Pod, serviceAccount string) bool {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return false
	}
	for _, p := range pods {
		if !p.Running || p.Terminating || p.HostNetwork || p.ServiceAccount != serviceAccount {
			continue
		}
		for _, ip := range p.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Unmap() == addr {
				return true
			}
		}
	}
	return false
}
