package owntraffic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// clusterDNS answers as a cluster's DNS would for two Canary services: one a
// ClusterIP Service, one an ExternalName Service aliasing an outside name.
// It records every name asked.
type clusterDNS struct {
	conn  net.PacketConn
	mu    sync.Mutex
	asked []string
}

func newClusterDNS(t *testing.T) *clusterDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &clusterDNS{conn: conn}
	t.Cleanup(func() { conn.Close() })
	go d.serve()
	return d
}

func (d *clusterDNS) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var msg dnsmessage.Message
		if msg.Unpack(buf[:n]) != nil || len(msg.Questions) != 1 {
			continue
		}
		q := msg.Questions[0]
		d.mu.Lock()
		d.asked = append(d.asked, q.Name.String())
		d.mu.Unlock()
		reply := dnsmessage.Message{Header: dnsmessage.Header{ID: msg.ID, Response: true, Authoritative: true}, Questions: msg.Questions}
		header := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
		switch name := q.Name.String(); {
		case name == "shop-api-canary.shop.svc.cluster.local." && q.Type == dnsmessage.TypeA:
			header.Type = dnsmessage.TypeA
			reply.Answers = append(reply.Answers, dnsmessage.Resource{Header: header, Body: &dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}})
		case name == "evil-canary.shop.svc.cluster.local.":
			// The alias, and, as a recursive resolver does, what it leads to.
			header.Type = dnsmessage.TypeCNAME
			target := dnsmessage.MustNewName("metadata.example.")
			reply.Answers = append(reply.Answers, dnsmessage.Resource{Header: header, Body: &dnsmessage.CNAMEResource{CNAME: target}})
			if q.Type == dnsmessage.TypeA {
				reply.Answers = append(reply.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: target, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
					Body:   &dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}})
			}
		case name == "metadata.example." && q.Type == dnsmessage.TypeA:
			header.Type = dnsmessage.TypeA
			reply.Answers = append(reply.Answers, dnsmessage.Resource{Header: header, Body: &dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}})
		case strings.HasSuffix(name, ".svc.cluster.local.") || name == "metadata.example.":
			// a name it holds, of another type: no answer, no error
		default:
			reply.RCode = dnsmessage.RCodeNameError
		}
		packed, err := reply.Pack()
		if err == nil {
			_, _ = d.conn.WriteTo(packed, from)
		}
	}
}

func (d *clusterDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp4", d.conn.LocalAddr().String())
	}}
}

func (d *clusterDNS) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

// rootedOnly passes lookups on and notes every name it was handed that is
// not rooted: the system's resolver would try its search domains for one.
type rootedOnly struct {
	*net.Resolver
	t *testing.T
}

func (r rootedOnly) check(host string) {
	if !strings.HasSuffix(host, ".") {
		r.t.Errorf("looked %q up unrooted: a search domain could answer for it", host)
	}
}

func (r rootedOnly) LookupCNAME(ctx context.Context, host string) (string, error) {
	r.check(host)
	return r.Resolver.LookupCNAME(ctx, host)
}

func (r rootedOnly) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.check(host)
	return r.Resolver.LookupNetIP(ctx, network, host)
}

// The Canary service is dialled by its cluster name as written: looked up
// rooted, so no search domain answers for it, and never through an alias.
func TestServiceDialGoesToTheServiceAlone(t *testing.T) {
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(member.Close)
	_, port, _ := net.SplitHostPort(member.Listener.Addr().String())
	dns := newClusterDNS(t)
	dial := ServiceDial(&net.Dialer{}, rootedOnly{Resolver: dns.resolver(), t: t})

	conn, err := dial(t.Context(), "tcp", net.JoinHostPort("shop-api-canary.shop.svc.cluster.local", port))
	if err != nil {
		t.Fatalf("the Canary service: %v", err)
	}
	conn.Close()
	for _, name := range dns.names() {
		if name != "shop-api-canary.shop.svc.cluster.local." {
			t.Errorf("asked %q: a search domain or another name", name)
		}
	}

	_, err = dial(t.Context(), "tcp", net.JoinHostPort("evil-canary.shop.svc.cluster.local", port))
	if err == nil || !strings.Contains(err.Error(), "alias of metadata.example.") {
		t.Fatalf("an ExternalName in the Canary service's place: %v", err)
	}
}
