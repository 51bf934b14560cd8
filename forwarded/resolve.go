package forwarded

import (
	"cmp"
	"net/http"
	"net/netip"
)

// Client is who sent a request, as far as trusted proxies vouch for it.
//
// Addresses are unmapped (::ffff:192.0.2.1 is 192.0.2.1) before they are
// judged or returned, so that one trust list serves IPv4 clients of an
// IPv6 socket too, and the peer's zone is dropped.
type Client struct {
	// Node is the client. When it is not an IP, a trusted proxy said so
	// (unknown, obfuscated, or no for= at all, which reads as unknown):
	// the client is then nobody to trust or to name, Node.Addr is zero,
	// and ReportedBy is the most precise address left.
	Node Node
	// Proto and Host are the scheme and Host the client's request came
	// with, as a trusted proxy said; empty when none said.
	Proto string
	Host  string
	// ReportedBy is the trusted proxy that reported the client; zero when
	// the client is the peer itself.
	ReportedBy netip.Addr
	// Hop is the index of the client's entry among the parsed hops, so
	// that hops[Hop:] is the trusted chain; len(hops) when the client is
	// the peer. Proxy.Resolve counts the hops it did not parse or did not
	// believe as none.
	Hop int
}

// ResolveForwarded finds the client among the elements of a Forwarded
// header received from peer. Walking from the right, each element is
// believed only if the address that sent it is trusted: first the peer,
// then the for= of each element in turn. The client is the first for=
// that is not a trusted IP, or the leftmost if all are; its element gives
// Proto and Host, as that element is what the proxy the client connected
// to said. An unknown or obfuscated for= stops the walk too: nothing can
// vouch for what stands left of a hop nobody can name.
func ResolveForwarded(elems []Element, peer netip.Addr, trusted func(netip.Addr) bool) Client {
	peer = plain(peer)
	c := Client{Node: Node{Addr: peer}, Hop: len(elems)}
	if !trusts(trusted, peer) {
		return c
	}
	reporter := peer
	for i := len(elems) - 1; i >= 0; i-- {
		e := elems[i]
		c = Client{Node: hopNode(e.For), Proto: e.Proto, Host: e.Host, ReportedBy: reporter, Hop: i}
		if !c.Node.IsIP() || !trusted(c.Node.Addr) {
			break
		}
		reporter = c.Node.Addr
	}
	return c
}

// ResolveXForwarded finds the client among the addresses of an
// X-Forwarded-For header received from peer, the way ResolveForwarded does
// ("unknown", the zero Addr, stops the walk). X-Forwarded-Proto and -Host
// say nothing of which hop set them, so proto and host are believed when
// the peer is trusted, whichever hop the client turns out to be.
func ResolveXForwarded(hops []netip.Addr, proto, host string, peer netip.Addr, trusted func(netip.Addr) bool) Client {
	peer = plain(peer)
	c := Client{Node: Node{Addr: peer}, Hop: len(hops)}
	if !trusts(trusted, peer) {
		return c
	}
	c.Proto, c.Host = proto, host
	reporter := peer
	for i := len(hops) - 1; i >= 0; i-- {
		c.Node, c.ReportedBy, c.Hop = hopNode(Node{Addr: hops[i]}), reporter, i
		if !c.Node.IsIP() || !trusted(c.Node.Addr) {
			break
		}
		reporter = c.Node.Addr
	}
	return c
}

// plain is addr unmapped and without zone. Parsed addresses have no zone;
// the peer's may (a link-local proxy), and it would keep the peer from
// matching any prefix it is trusted by.
func plain(addr netip.Addr) netip.Addr { return addr.Unmap().WithZone("") }

// hopNode is n with a plain address, and "unknown" if it was not given.
func hopNode(n Node) Node {
	n.Addr = plain(n.Addr)
	if n == (Node{}) {
		n.Name = "unknown"
	}
	return n
}

func trusts(trusted func(netip.Addr) bool, addr netip.Addr) bool {
	return trusted != nil && trusted(addr)
}

// Format names the forwarded headers the trusted proxies write.
type Format uint8

const (
	// XForwarded is X-Forwarded-For with X-Forwarded-Proto and -Host, as
	// HAProxy, nginx and Caddy write them.
	XForwarded Format = iota
	// RFC7239 is the Forwarded header.
	RFC7239
)

// Proxy is how this proxy treats forwarded headers. Its zero value trusts
// nobody: every client is its peer.
type Proxy struct {
	// Trusted says whether an address is one of the proxies whose
	// forwarded headers are believed; nil trusts none.
	Trusted func(netip.Addr) bool
	// Format is the headers the trusted proxies write. The others are
	// ignored on the way in rather than preferred or merged: a proxy that
	// writes one kind passes the other on from the client untouched, so
	// looking at it would let the client choose what is believed.
	Format Format
	// Self is this proxy's own by= in the Forwarded header it writes, as
	// ParseNode returns it; the zero Node leaves by= out.
	Self Node
	// KeepChain passes the trusted part of the incoming chain on, with
	// the peer appended; otherwise the chain sent starts afresh at the
	// client.
	KeepChain bool
	// ForceProto, when set, is the scheme sent for the client whatever
	// the request or the proxies said: e.g. https where TLS ends in front.
	ForceProto string
	// EmitForwarded sends the Forwarded header too; the X-Forwarded
	// headers are always sent.
	EmitForwarded bool
}

// Resolve returns the client of a request with headers h received from
// peer. The headers of p.Format are read only if the peer is trusted; if
// any of them is malformed or too large, none is believed, the client is
// the peer, and the error says why.
func (p Proxy) Resolve(h http.Header, peer netip.Addr) (Client, error) {
	var hopsBuf [8]netip.Addr
	var elemsBuf [8]Element
	c, _, err := p.resolve(h, peer, hopsBuf[:0], elemsBuf[:0])
	return c, err
}

// Forward resolves the client as Resolve does and returns the headers to
// send upstream with the request, which came with scheme proto and Host
// host. The chain sent ends with this proxy's own element; proto and host
// fill in what no trusted proxy said, and are left out if invalid.
//
// A client that is not an IP is sent as the trusted proxy that reported
// it (Client.ReportedBy), the nearest address anyone vouches for, and the
// chain starts there: a next hop that keys on the client's address (rate
// limits, logs, a proxy appending its peer to X-Forwarded-For) needs one,
// and every header then names the same client.
func (p Proxy) Forward(h http.Header, peer netip.Addr, proto, host string) (Client, Outgoing, error) {
	proto, _ = parseProto(proto)
	if checkHost(host) != "" {
		host = ""
	}
	var hopsBuf [8]netip.Addr
	var elemsBuf [8]Element
	c, chain, err := p.resolve(h, peer, hopsBuf[:0], elemsBuf[:0])
	client := c.Node
	if !client.IsIP() && c.ReportedBy.IsValid() {
		client, chain = Node{Addr: c.ReportedBy}, chain[1:] // chain[0] is the client's own hop
	}
	clientProto, clientHost := cmp.Or(p.ForceProto, c.Proto, proto), cmp.Or(c.Host, host)
	own := Element{For: hopNode(Node{Addr: peer}), By: p.Self, Proto: cmp.Or(p.ForceProto, proto), Host: host}
	if !p.KeepChain {
		chain = chain[:0]
		own.For, own.Proto, own.Host = client, clientProto, clientHost
	}
	return c, Emit(append(chain, own), clientProto, clientHost, p.EmitForwarded), err
}

// resolve parses the headers of p.Format into hops or elems (for their
// room) and returns the client and the trusted chain, as elements.
func (p Proxy) resolve(h http.Header, peer netip.Addr, hops []netip.Addr, elems []Element) (Client, []Element, error) {
	asPeer := Client{Node: Node{Addr: plain(peer)}}
	if !trusts(p.Trusted, asPeer.Node.Addr) {
		return asPeer, elems, nil
	}
	if p.Format == RFC7239 {
		elems, err := ParseForwarded(elems, h[headerForwarded])
		if err != nil {
			return asPeer, elems, err
		}
		c := ResolveForwarded(elems, peer, p.Trusted)
		return c, elems[c.Hop:], nil
	}
	hops, err := ParseXForwardedFor(hops, h[headerXFF])
	if err != nil {
		return asPeer, elems, err
	}
	proto, err := ParseXForwardedProto(h[headerXFP])
	if err != nil {
		return asPeer, elems, err
	}
	host, err := ParseXForwardedHost(h[headerXFH])
	if err != nil {
		return asPeer, elems, err
	}
	c := ResolveXForwarded(hops, proto, host, peer, p.Trusted)
	for i, addr := range hops[c.Hop:] {
		e := Element{For: hopNode(Node{Addr: addr})}
		if i == 0 {
			// The client's element is the one X-Forwarded-Proto and
			// -Host describe.
			e.Proto, e.Host = c.Proto, c.Host
		}
		elems = append(elems, e)
	}
	return c, elems, nil
}
