package podcallers_test

import (
	"net/netip"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/podcallers"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

func TestAdmits(t *testing.T) {
	flagger := release.Pod{Name: "flagger-1", IPs: []string{"10.0.0.7"}, Running: true, ServiceAccount: "flagger"}
	mod := func(f func(*release.Pod)) []release.Pod { p := flagger; f(&p); return []release.Pod{p} }
	cases := []struct {
		name string
		addr string
		pods []release.Pod
		ok   bool
	}{
		{"a running pod's address", "10.0.0.7", []release.Pod{flagger}, true},
		{"the same address mapped into IPv6", "::ffff:10.0.0.7", []release.Pod{flagger}, true},
		{"another address", "10.0.0.8", []release.Pod{flagger}, false},
		{"no pod", "10.0.0.7", nil, false},
		{"a pod not Running", "10.0.0.7", mod(func(p *release.Pod) { p.Running = false }), false},
		{"a terminating pod", "10.0.0.7", mod(func(p *release.Pod) { p.Terminating = true }), false},
		{"a pod on the host network", "10.0.0.7", mod(func(p *release.Pod) { p.HostNetwork = true }), false},
		{"a pod under another ServiceAccount", "10.0.0.7", mod(func(p *release.Pod) { p.ServiceAccount = "default" }), false},
		{"a pod's second address", "fd00::7", mod(func(p *release.Pod) { p.IPs = append(p.IPs, "fd00::7") }), true},
		{"a pod with an address that does not parse", "10.0.0.7", mod(func(p *release.Pod) { p.IPs = []string{"x"} }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := podcallers.Admits(netip.MustParseAddr(c.addr), c.pods, "flagger"); got != c.ok {
				t.Fatalf("Admits = %v, want %v", got, c.ok)
			}
		})
	}
	if podcallers.Admits(netip.Addr{}, []release.Pod{flagger}, "flagger") {
		t.Fatal("the zero address was admitted")
	}
}
