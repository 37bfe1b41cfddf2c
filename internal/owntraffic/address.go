package owntraffic

import "net/netip"

// nonPublicIPv4 is every IPv4 block a warmup must not reach: IANA's IPv4
// Special-Purpose Address Registry in full (including the blocks it marks
// globally reachable, such as AS112 and AMT, since none is an edge a route
// host should resolve to), multicast and the reserved block with broadcast.
var nonPublicIPv4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("10.0.0.0/8"),      // private
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (the tailnet)
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local (cloud metadata)
	netip.MustParsePrefix("172.16.0.0/12"),   // private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation TEST-NET-1
	netip.MustParsePrefix("192.31.196.0/24"), // AS112-v4
	netip.MustParsePrefix("192.52.193.0/24"), // AMT
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // private
	netip.MustParsePrefix("192.175.48.0/24"), // direct delegation AS112
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation TEST-NET-3
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, with 255.255.255.255 broadcast
}

// PublicAddress is the production address policy for warmup: only a public
// IPv4 address passes. An IPv4-mapped IPv6 address is judged as the IPv4
// address it carries (so ::ffff:10.0.0.1 is private); any other IPv6 address
// is refused, since warmup dials IPv4 alone.
func PublicAddress(a netip.Addr) bool {
	a = a.Unmap()
	if !a.Is4() {
		return false
	}
	for _, p := range nonPublicIPv4 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
