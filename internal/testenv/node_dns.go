package testenv

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clusterDomain is the suffix of every name the node's DNS answers.
const clusterDomain = "svc.cluster.local."

// clusterDNS answers <service>.<namespace>.svc.cluster.local from the API
// server, as CoreDNS' kubernetes plugin does, and NXDOMAIN to every other
// name: it never forwards, so nothing in a pod resolves a name off this
// machine. No CoreDNS image can be had here, and its plugin's one job on a
// test node is this lookup.
type clusterDNS struct {
	kube kubernetes.Interface
	udp  net.PacketConn
	tcp  net.Listener
	wg   sync.WaitGroup
}

func serveClusterDNS(address string, kube kubernetes.Interface) (*clusterDNS, error) {
	addr := net.JoinHostPort(address, "53")
	udp, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		_ = udp.Close()
		return nil, err
	}
	d := &clusterDNS{kube: kube, udp: udp, tcp: tcp}
	d.wg.Add(2)
	go d.serveUDP()
	go d.serveTCP()
	return d, nil
}

func (d *clusterDNS) close() {
	_ = d.udp.Close()
	_ = d.tcp.Close()
	d.wg.Wait()
}

func (d *clusterDNS) serveUDP() {
	defer d.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := d.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		if answer := d.answer(buf[:n]); answer != nil {
			_, _ = d.udp.WriteTo(answer, from)
		}
	}
}

func (d *clusterDNS) serveTCP() {
	defer d.wg.Done()
	for {
		conn, err := d.tcp.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			var size [2]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				return
			}
			query := make([]byte, binary.BigEndian.Uint16(size[:]))
			if _, err := io.ReadFull(conn, query); err != nil {
				return
			}
			answer := d.answer(query)
			if answer == nil {
				return
			}
			_, _ = conn.Write(binary.BigEndian.AppendUint16(nil, uint16(len(answer)))) //nolint:gosec // a DNS message is under 64 KiB
			_, _ = conn.Write(answer)
		}()
	}
}

// answer is the reply to one query; nil for what is not a query.
func (d *clusterDNS) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	reply := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	addrs, known := d.lookup(strings.ToLower(q.Name.String()))
	if !known {
		reply.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, reply)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, a := range addrs {
			if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5},
				dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookup is the addresses of a Service name: its ClusterIP, or a headless
// Service's ready endpoints. known is false for a name no Service has.
func (d *clusterDNS) lookup(fqdn string) (addrs []netip.Addr, known bool) {
	rest, ok := strings.CutSuffix(fqdn, "."+clusterDomain)
	if !ok {
		return nil, false
	}
	svcName, namespace, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(namespace, ".") {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	svc, err := d.kube.CoreV1().Services(namespace).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && a.Is4() {
			return []netip.Addr{a}, true
		}
		return nil, true
	}
	slices, err := d.kube.DiscoveryV1().EndpointSlices(namespace).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svcName})
	if err != nil {
		return nil, true
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, raw := range e.Addresses {
				if a, err := netip.ParseAddr(raw); err == nil && a.Is4() {
					addrs = append(addrs, a)
				}
			}
		}
	}
	return addrs, true
}

// nameTag parses an image reference that must carry a tag.
func nameTag(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, errors.Join(errors.New("image reference "+ref), err)
	}
	return tag, nil
}
