package owntraffic

import (
	"net/netip"
	"testing"
)

func TestPublicAddress(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		// only a public address passes
		{"93.184.215.14", true},
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"::ffff:8.8.8.8", true},
		{"172.15.255.255", true},
		{"172.32.0.0", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"223.255.255.255", true},
		// loopback
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		// private
		{"10.0.0.1", false},
		{"10.255.255.255", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		// link-local, where cloud metadata lives
		{"169.254.169.254", false},
		// the tailnet's shared address space
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		// this network
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		// multicast, reserved and broadcast
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		// IPv4-mapped IPv6 of a refused address
		{"::ffff:10.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		// documentation and benchmarking
		{"192.0.2.1", false},
		{"198.51.100.1", false},
		{"203.0.113.1", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		// every other IANA special-purpose block
		{"192.0.0.9", false},
		{"192.31.196.1", false},
		{"192.52.193.1", false},
		{"192.88.99.1", false},
		{"192.175.48.1", false},
		// IPv6 at all: warmup dials IPv4 alone
		{"::1", false},
		{"2606:4700:4700::1111", false},
		{"fe80::1", false},
		{"::", false},
	}
	for _, c := range cases {
		if got := PublicAddress(netip.MustParseAddr(c.addr)); got != c.ok {
			t.Errorf("PublicAddress(%s) = %v, want %v", c.addr, got, c.ok)
		}
	}
	if PublicAddress(netip.Addr{}) {
		t.Error("the zero address passes")
	}
}
