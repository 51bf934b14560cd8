package forwarded

import (
	"errors"
	"net/http"
	"net/netip"
	"reflect"
	"testing"
)

// trustPrefixes trusts the addresses in any of prefixes.
func trustPrefixes(prefixes ...string) func(netip.Addr) bool {
	ps := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		ps[i] = netip.MustParsePrefix(p)
	}
	return func(a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
}

// The proxies in these tests are in 10.0.0.0/8 and fd00::/8; clients are
// anywhere else.
var trustInternal = trustPrefixes("10.0.0.0/8", "fd00::/8")

func TestResolveXForwarded(t *testing.T) {
	tests := []struct {
		name        string
		xff         string
		proto, host string
		peer        string
		want        Client
	}{
		{"untrusted peer ignores everything", "192.0.2.1", "https", "a.example", "198.51.100.9",
			Client{Node: ipNode("198.51.100.9"), Hop: 1}},
		{"trusted peer, one hop", "192.0.2.1", "https", "a.example", "10.0.0.1",
			Client{Node: ipNode("192.0.2.1"), Proto: "https", Host: "a.example", ReportedBy: ip("10.0.0.1"), Hop: 0}},
		{"trusted peer, no hops", "", "https", "", "10.0.0.1",
			Client{Node: ipNode("10.0.0.1"), Proto: "https", Hop: 0}},
		{"spoofed left entries ignored", "6.6.6.6, 10.9.9.9, 192.0.2.1, 10.0.0.2", "", "", "10.0.0.1",
			Client{Node: ipNode("192.0.2.1"), ReportedBy: ip("10.0.0.2"), Hop: 2}},
		{"all trusted: leftmost", "10.0.0.4, 10.0.0.3, 10.0.0.2", "http", "", "10.0.0.1",
			Client{Node: ipNode("10.0.0.4"), Proto: "http", ReportedBy: ip("10.0.0.3"), Hop: 0}},
		{"none trusted", "192.0.2.1, 192.0.2.2", "", "", "192.0.2.3",
			Client{Node: ipNode("192.0.2.3"), Hop: 2}},
		{"mixed v6", "2001:db8::1, fd00::2", "", "", "fd00::1",
			Client{Node: ipNode("2001:db8::1"), ReportedBy: ip("fd00::2"), Hop: 0}},
		{"unknown stops the walk", "192.0.2.1, unknown, 10.0.0.2", "", "", "10.0.0.1",
			Client{Node: Node{Name: "unknown"}, ReportedBy: ip("10.0.0.2"), Hop: 1}},
		{"mapped addresses are unmapped", "::ffff:192.0.2.1, ::ffff:10.0.0.2", "", "", "::ffff:10.0.0.1",
			Client{Node: ipNode("192.0.2.1"), ReportedBy: ip("10.0.0.2"), Hop: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hops []netip.Addr
			if tt.xff != "" {
				var err error
				if hops, err = ParseXForwardedFor(nil, []string{tt.xff}); err != nil {
					t.Fatal(err)
				}
			}
			got := ResolveXForwarded(hops, tt.proto, tt.host, ip(tt.peer), trustInternal)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestResolveForwarded(t *testing.T) {
	tests := []struct {
		name      string
		forwarded string
		peer      string
		want      Client
	}{
		{"untrusted peer", "for=192.0.2.1;proto=https", "198.51.100.9",
			Client{Node: ipNode("198.51.100.9"), Hop: 1}},
		{"proto and host from the client's element", `for=192.0.2.1;proto=https;host=a.example, for=10.0.0.2;proto=http;host=internal`, "10.0.0.1",
			Client{Node: ipNode("192.0.2.1"), Proto: "https", Host: "a.example", ReportedBy: ip("10.0.0.2"), Hop: 0}},
		{"spoofed left element ignored", `for=6.6.6.6;proto=http;host=evil, for="192.0.2.1:4711";proto=https, for=10.0.0.2`, "10.0.0.1",
			Client{Node: Node{Addr: ip("192.0.2.1"), Port: 4711}, Proto: "https", ReportedBy: ip("10.0.0.2"), Hop: 1}},
		{"all trusted", `for=10.0.0.3;proto=https, for="[fd00::2]"`, "10.0.0.1",
			Client{Node: ipNode("10.0.0.3"), Proto: "https", ReportedBy: ip("fd00::2"), Hop: 0}},
		{"obfuscated client", `for=192.0.2.1, for=_hidden;proto=https, for=10.0.0.2`, "10.0.0.1",
			Client{Node: Node{Name: "_hidden"}, Proto: "https", ReportedBy: ip("10.0.0.2"), Hop: 1}},
		{"unknown client", `for=unknown`, "10.0.0.1",
			Client{Node: Node{Name: "unknown"}, ReportedBy: ip("10.0.0.1"), Hop: 0}},
		{"missing for is unknown", `proto=https`, "10.0.0.1",
			Client{Node: Node{Name: "unknown"}, Proto: "https", ReportedBy: ip("10.0.0.1"), Hop: 0}},
		{"by is not a hop", `for=192.0.2.1;by=10.0.0.9`, "10.0.0.1",
			Client{Node: ipNode("192.0.2.1"), ReportedBy: ip("10.0.0.1"), Hop: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			elems, err := ParseForwarded(nil, []string{tt.forwarded})
			if err != nil {
				t.Fatal(err)
			}
			got := ResolveForwarded(elems, ip(tt.peer), trustInternal)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestResolveNilTrustsNobody(t *testing.T) {
	hops := []netip.Addr{ip("192.0.2.1")}
	if got := ResolveXForwarded(hops, "https", "", ip("10.0.0.1"), nil); got.Node.Addr != ip("10.0.0.1") || got.Proto != "" {
		t.Errorf("nil trust: %+v, want the peer", got)
	}
	if got, err := (Proxy{}).Resolve(header("X-Forwarded-For", "192.0.2.1"), ip("10.0.0.1")); err != nil || got.Node.Addr != ip("10.0.0.1") {
		t.Errorf("zero Proxy: %+v, %v; want the peer", got, err)
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestProxyResolve(t *testing.T) {
	xff := Proxy{Trusted: trustInternal}
	rfc := Proxy{Trusted: trustInternal, Format: RFC7239}
	peer := ip("10.0.0.1")
	tests := []struct {
		name    string
		proxy   Proxy
		h       http.Header
		want    Client
		wantErr error
	}{
		{"x-forwarded", xff, header("X-Forwarded-For", "192.0.2.1", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "a.example"),
			Client{Node: ipNode("192.0.2.1"), Proto: "https", Host: "a.example", ReportedBy: peer}, nil},
		{"x-forwarded ignores Forwarded", xff, header("X-Forwarded-For", "192.0.2.1", "Forwarded", "for=6.6.6.6"),
			Client{Node: ipNode("192.0.2.1"), ReportedBy: peer}, nil},
		{"x-forwarded ignores malformed Forwarded", xff, header("X-Forwarded-For", "192.0.2.1", "Forwarded", "for="),
			Client{Node: ipNode("192.0.2.1"), ReportedBy: peer}, nil},
		{"rfc7239 ignores X-Forwarded-For", rfc, header("Forwarded", "for=192.0.2.1", "X-Forwarded-For", "6.6.6.6"),
			Client{Node: ipNode("192.0.2.1"), ReportedBy: peer}, nil},
		{"malformed X-Forwarded-For: peer", xff, header("X-Forwarded-For", "192.0.2.1,", "X-Forwarded-Proto", "https"),
			Client{Node: Node{Addr: peer}}, ErrMalformed},
		{"malformed X-Forwarded-Proto: peer", xff, header("X-Forwarded-For", "192.0.2.1", "X-Forwarded-Proto", "http, https"),
			Client{Node: Node{Addr: peer}}, ErrMalformed},
		{"malformed X-Forwarded-Host: peer", xff, header("X-Forwarded-For", "192.0.2.1", "X-Forwarded-Host", "a b"),
			Client{Node: Node{Addr: peer}}, ErrMalformed},
		{"malformed Forwarded: peer", rfc, header("Forwarded", `for="192.0.2.1`),
			Client{Node: Node{Addr: peer}}, ErrMalformed},
		{"too many hops: peer", xff, header("X-Forwarded-For", manyHops(MaxHops+1)),
			Client{Node: Node{Addr: peer}}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.proxy.Resolve(tt.h, peer)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// An untrusted peer's headers are not even parsed.
	if got, err := xff.Resolve(header("X-Forwarded-For", "192.0.2.1,"), ip("192.0.2.9")); err != nil || got.Node.Addr != ip("192.0.2.9") {
		t.Errorf("untrusted peer: %+v, %v; want the peer, no error", got, err)
	}
}

func manyHops(n int) string {
	s := "192.0.2.1"
	for range n - 1 {
		s += ", 10.0.0.2"
	}
	return s
}

// A link-local peer comes with its zone, which would keep it from matching
// the prefix it is trusted by, and must not reach the result.
func TestResolvePeerZoneDropped(t *testing.T) {
	trusted := trustPrefixes("fe80::/10")
	got := ResolveXForwarded(nil, "https", "", ip("fe80::1%eth0"), trusted)
	want := Client{Node: ipNode("fe80::1"), Proto: "https"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
