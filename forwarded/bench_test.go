package forwarded

import (
	"net/http"
	"net/netip"
	"testing"
)

// Typical chains: a client behind a CDN edge and a load balancer.
var (
	benchXFF       = []string{"203.0.113.195, 2001:db8:85a3::8a2e:370:7334, 10.0.0.3, 10.0.0.2"}
	benchForwarded = []string{`for=203.0.113.195;proto=https;host=www.example.com, for="[2001:db8:85a3::8a2e:370:7334]:4711";proto=https, for=10.0.0.2;by=_lb`}
	benchPeer      = netip.MustParseAddr("10.0.0.1")
)

func BenchmarkParseXForwardedFor(b *testing.B) {
	b.ReportAllocs()
	var buf [4]netip.Addr
	for b.Loop() {
		if _, err := ParseXForwardedFor(buf[:0], benchXFF); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseForwarded(b *testing.B) {
	b.ReportAllocs()
	var buf [4]Element
	for b.Loop() {
		if _, err := ParseForwarded(buf[:0], benchForwarded); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveXForwarded(b *testing.B) {
	b.ReportAllocs()
	hops, err := ParseXForwardedFor(nil, benchXFF)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ResolveXForwarded(hops, "https", "www.example.com", benchPeer, trustInternal)
	}
}

func BenchmarkProxyResolve(b *testing.B) {
	for _, bb := range []struct {
		name  string
		proxy Proxy
		h     http.Header
	}{
		{"XForwarded", Proxy{Trusted: trustInternal},
			http.Header{"X-Forwarded-For": benchXFF, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"www.example.com"}}},
		{"RFC7239", Proxy{Trusted: trustInternal, Format: RFC7239}, http.Header{"Forwarded": benchForwarded}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.proxy.Resolve(bb.h, benchPeer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProxyForward(b *testing.B) {
	h := http.Header{"X-Forwarded-For": benchXFF, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"www.example.com"}}
	for _, bb := range []struct {
		name  string
		proxy Proxy
	}{
		{"Fresh", Proxy{Trusted: trustInternal, Self: Node{Name: "_caddy"}}},
		{"KeepChain", Proxy{Trusted: trustInternal, Self: Node{Name: "_caddy"}, KeepChain: true}},
		{"FreshWithForwarded", Proxy{Trusted: trustInternal, Self: Node{Name: "_caddy"}, EmitForwarded: true}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := bb.proxy.Forward(h, benchPeer, "http", "internal:8080"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The goal the benchmarks measure, kept by a test: parsing and resolving an
// X-Forwarded-For of up to 4 hops does not allocate.
func TestXForwardedForResolvesWithoutAllocating(t *testing.T) {
	h := http.Header{"X-Forwarded-For": benchXFF, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"www.example.com"}}
	proxy := Proxy{Trusted: trustInternal}
	var c Client
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if c, err = proxy.Resolve(h, benchPeer); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
	if c.Node != (Node{Addr: netip.MustParseAddr("2001:db8:85a3::8a2e:370:7334")}) {
		t.Errorf("resolved %+v", c)
	}
}
