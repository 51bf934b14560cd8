package forwarded

import (
	"net/http"
	"net/netip"
	"reflect"
	"testing"
)

func TestEmit(t *testing.T) {
	tests := []struct {
		name        string
		chain       []Element
		proto, host string
		want        Outgoing
	}{
		{"ipv4", []Element{{For: ipNode("192.0.2.1"), Proto: "https", Host: "a.example"}}, "https", "a.example",
			Outgoing{XForwardedFor: "192.0.2.1", XForwardedProto: "https", XForwardedHost: "a.example",
				Forwarded: "for=192.0.2.1;proto=https;host=a.example"}},
		{"ipv6 quoted in brackets", []Element{{For: ipNode("2001:db8::1"), By: Node{Addr: ip("fd00::1"), Port: 443}}}, "", "",
			Outgoing{XForwardedFor: "2001:db8::1", Forwarded: `for="[2001:db8::1]";by="[fd00::1]:443"`}},
		{"port and host quoted when needed", []Element{{For: Node{Addr: ip("192.0.2.1"), Port: 4711}, Host: "a.example:8443"}}, "", "a.example:8443",
			Outgoing{XForwardedFor: "192.0.2.1", XForwardedHost: "a.example:8443", Forwarded: `for="192.0.2.1:4711";host="a.example:8443"`}},
		{"not an IP", []Element{{For: Node{Name: "_hidden", ObfuscatedPort: "_p"}}, {For: Node{Name: "unknown"}}, {For: ipNode("10.0.0.2"), By: Node{Name: "_lb"}}}, "", "",
			Outgoing{XForwardedFor: "unknown, unknown, 10.0.0.2", Forwarded: `for="_hidden:_p", for=unknown, for=10.0.0.2;by=_lb`}},
		{"escapes", []Element{{Host: `a"b\c`}}, "", "",
			Outgoing{XForwardedFor: "unknown", Forwarded: `host="a\"b\\c"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Emit(tt.chain, tt.proto, tt.host, true)
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
			want := tt.want
			want.Forwarded = ""
			if got := Emit(tt.chain, tt.proto, tt.host, false); got != want {
				t.Fatalf("without Forwarded\n got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// What Emit writes, the parsers read back as it was.
func TestEmitRoundTrip(t *testing.T) {
	chain := []Element{
		{For: Node{Addr: ip("2001:db8::1"), Port: 4711}, By: Node{Name: "_a", ObfuscatedPort: "_b"}, Proto: "https", Host: "[2001:db8::2]:443"},
		{For: Node{Name: "unknown"}, Host: "a.example"},
		{For: ipNode("192.0.2.1"), By: Node{Addr: ip("10.0.0.1"), Port: 80}, Proto: "http"},
	}
	out := Emit(chain, "https", "a.example", true)
	elems, err := ParseForwarded(nil, []string{out.Forwarded})
	if err != nil {
		t.Fatalf("ParseForwarded(%q): %v", out.Forwarded, err)
	}
	if !reflect.DeepEqual(elems, chain) {
		t.Errorf("Forwarded round trip\n got %+v\nwant %+v", elems, chain)
	}
	hops, err := ParseXForwardedFor(nil, []string{out.XForwardedFor})
	if err != nil {
		t.Fatalf("ParseXForwardedFor(%q): %v", out.XForwardedFor, err)
	}
	if want := []netip.Addr{ip("2001:db8::1"), {}, ip("192.0.2.1")}; !reflect.DeepEqual(hops, want) {
		t.Errorf("X-Forwarded-For round trip: got %v, want %v", hops, want)
	}
}

func TestOutgoingSet(t *testing.T) {
	h := header("X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "evil", "Forwarded", "for=6.6.6.6", "Forwarded", "for=6.6.6.7")
	Outgoing{XForwardedFor: "192.0.2.1", XForwardedProto: "https", Forwarded: "for=192.0.2.1"}.Set(h)
	want := http.Header{
		"X-Forwarded-For":   {"192.0.2.1"},
		"X-Forwarded-Proto": {"https"},
		"Forwarded":         {"for=192.0.2.1"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %v, want %v", h, want)
	}
}

func TestProxyForward(t *testing.T) {
	self, err := ParseNode("_caddy")
	if err != nil {
		t.Fatal(err)
	}
	peer := ip("10.0.0.1")
	tests := []struct {
		name        string
		proxy       Proxy
		h           http.Header
		peer        netip.Addr
		proto, host string
		want        Outgoing
	}{
		{"fresh chain from X-Forwarded",
			Proxy{Trusted: trustInternal, Self: self},
			header("X-Forwarded-For", "6.6.6.6, 192.0.2.1, 10.0.0.2", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "a.example"),
			peer, "http", "internal:8080",
			Outgoing{XForwardedFor: "192.0.2.1", XForwardedProto: "https", XForwardedHost: "a.example",
				Forwarded: "for=192.0.2.1;by=_caddy;proto=https;host=a.example"}},
		{"kept chain from X-Forwarded",
			Proxy{Trusted: trustInternal, Self: self, KeepChain: true},
			header("X-Forwarded-For", "6.6.6.6, 192.0.2.1, 10.0.0.2", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "a.example"),
			peer, "http", "internal:8080",
			Outgoing{XForwardedFor: "192.0.2.1, 10.0.0.2, 10.0.0.1", XForwardedProto: "https", XForwardedHost: "a.example",
				Forwarded: `for=192.0.2.1;proto=https;host=a.example, for=10.0.0.2, for=10.0.0.1;by=_caddy;proto=http;host="internal:8080"`}},
		{"kept chain from Forwarded",
			Proxy{Trusted: trustInternal, Format: RFC7239, KeepChain: true},
			header("Forwarded", `for=6.6.6.6, for="[2001:db8::1]:4711";proto=https;host=a.example, for=10.0.0.2;proto=http`),
			peer, "http", "internal",
			Outgoing{XForwardedFor: "2001:db8::1, 10.0.0.2, 10.0.0.1", XForwardedProto: "https", XForwardedHost: "a.example",
				Forwarded: `for="[2001:db8::1]:4711";proto=https;host=a.example, for=10.0.0.2;proto=http, for=10.0.0.1;proto=http;host=internal`}},
		{"an unknown client is sent as the proxy that reported it",
			Proxy{Trusted: trustInternal, Format: RFC7239},
			header("Forwarded", `for=192.0.2.1, for=_hidden;proto=https, for=10.0.0.2`),
			peer, "http", "internal",
			Outgoing{XForwardedFor: "10.0.0.2", XForwardedProto: "https", XForwardedHost: "internal",
				Forwarded: `for=10.0.0.2;proto=https;host=internal`}},
		{"a kept chain starts at the proxy that reported an unknown client",
			Proxy{Trusted: trustInternal, KeepChain: true},
			header("X-Forwarded-For", "192.0.2.1, unknown, 10.0.0.2", "X-Forwarded-Proto", "https"),
			peer, "http", "internal",
			Outgoing{XForwardedFor: "10.0.0.2, 10.0.0.1", XForwardedProto: "https", XForwardedHost: "internal",
				Forwarded: `for=10.0.0.2, for=10.0.0.1;proto=http;host=internal`}},
		{"an unknown client reported by the peer is sent as the peer",
			Proxy{Trusted: trustInternal, KeepChain: true},
			header("X-Forwarded-For", "unknown"),
			peer, "http", "internal",
			Outgoing{XForwardedFor: "10.0.0.1", XForwardedProto: "http", XForwardedHost: "internal",
				Forwarded: `for=10.0.0.1;proto=http;host=internal`}},
		{"untrusted peer starts afresh even when keeping chains",
			Proxy{Trusted: trustInternal, KeepChain: true},
			header("X-Forwarded-For", "6.6.6.6", "X-Forwarded-Proto", "http"),
			ip("192.0.2.9"), "https", "a.example",
			Outgoing{XForwardedFor: "192.0.2.9", XForwardedProto: "https", XForwardedHost: "a.example",
				Forwarded: "for=192.0.2.9;proto=https;host=a.example"}},
		{"malformed headers: the peer is the client",
			Proxy{Trusted: trustInternal},
			header("X-Forwarded-For", "192.0.2.1, 10.0.0.2:80", "X-Forwarded-Proto", "https"),
			peer, "http", "a.example",
			Outgoing{XForwardedFor: "10.0.0.1", XForwardedProto: "http", XForwardedHost: "a.example",
				Forwarded: "for=10.0.0.1;proto=http;host=a.example"}},
		{"invalid received host and proto are left out",
			Proxy{},
			http.Header{},
			ip("::ffff:192.0.2.9"), "gopher", "a b",
			Outgoing{XForwardedFor: "192.0.2.9", Forwarded: "for=192.0.2.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := tt.proxy
			proxy.EmitForwarded = true
			_, got, _ := proxy.Forward(tt.h, tt.peer, tt.proto, tt.host)
			if got != tt.want {
				t.Fatalf("\n got %+v\nwant %+v", got, tt.want)
			}
			// Without Forwarded, the X-Forwarded headers are the same.
			proxy.EmitForwarded = false
			want := tt.want
			want.Forwarded = ""
			if _, got, _ := proxy.Forward(tt.h, tt.peer, tt.proto, tt.host); got != want {
				t.Fatalf("without Forwarded\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
