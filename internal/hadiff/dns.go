package hadiff

import (
	"errors"
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// DNS is an authoritative DNS server on a loopback port (UDP and TCP)
// that answers the A and SRV questions of the names it is given, so that
// HAProxy's resolvers and caddy-ha's dynamic checked both resolve a
// configuration's server names to the recording backends: an A record
// carries an address (the port is the configuration's), an SRV record a
// target and its port (the target's A record in the additional section,
// as Consul sends it). A name it does not know does not exist (NXDOMAIN);
// a known name without records of the type asked has none (NODATA).
type DNS struct {
	Addr string // host:port, UDP and TCP

	mu      sync.Mutex
	a       map[string][]net.IP
	srv     map[string][]SRVTarget
	asked   map[string]int // questions, by name
	servers []*dns.Server
}

// SRVTarget is an SRV record's target host and port.
type SRVTarget struct {
	Host string
	Port uint16
}

// StartDNS starts the server on a free loopback port.
func StartDNS() (*DNS, error) {
	pc, ln, err := listenUDPAndTCP()
	if err != nil {
		return nil, err
	}
	d := &DNS{Addr: pc.LocalAddr().String(), a: map[string][]net.IP{}, srv: map[string][]SRVTarget{}, asked: map[string]int{}}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: ln, Handler: d}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		d.servers = append(d.servers, s)
		go s.ActivateAndServe() //nolint:errcheck // until Close
		<-started
	}
	return d, nil
}

// listenUDPAndTCP listens on a free loopback UDP port and on TCP at the
// same port, trying other ports while that TCP port is taken.
func listenUDPAndTCP() (net.PacketConn, net.Listener, error) {
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			return pc, ln, nil
		}
		pc.Close()
	}
	return nil, nil, err
}

// SetA makes ips the A records of name.
func (d *DNS) SetA(name string, ips ...net.IP) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.a[dns.Fqdn(strings.ToLower(name))] = ips
}

// SetSRV makes targets the SRV records of name (_service._proto.name),
// each target with one A record, 127.0.0.1.
func (d *DNS) SetSRV(name string, targets ...SRVTarget) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.srv[dns.Fqdn(strings.ToLower(name))] = targets
	for _, t := range targets {
		d.a[dns.Fqdn(strings.ToLower(t.Host))] = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
}

// Queries is how many questions of name it was asked.
func (d *DNS) Queries(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[dns.Fqdn(strings.ToLower(name))]
}

// Close stops the server.
func (d *DNS) Close() error {
	var errs []error
	for _, s := range d.servers {
		errs = append(errs, s.Shutdown())
	}
	return errors.Join(errs...)
}

// ServeDNS answers one question.
func (d *DNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) == 1 {
		d.answer(m, req.Question[0])
	}
	_ = w.WriteMsg(m)
}

// answer fills m's answer to q.
func (d *DNS) answer(m *dns.Msg, q dns.Question) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name := strings.ToLower(q.Name)
	d.asked[name]++
	ips, hasA := d.a[name]
	targets, hasSRV := d.srv[name]
	if !hasA && !hasSRV {
		m.Rcode = dns.RcodeNameError
		return
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: 1}
	}
	switch q.Qtype {
	case dns.TypeA:
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: ip.To4()})
		}
	case dns.TypeSRV:
		for _, t := range targets {
			target := dns.Fqdn(t.Host)
			m.Answer = append(m.Answer, &dns.SRV{Hdr: hdr(dns.TypeSRV), Priority: 1, Weight: 10, Port: t.Port, Target: target})
			for _, ip := range d.a[strings.ToLower(target)] {
				m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: ip.To4()})
			}
		}
	}
}
