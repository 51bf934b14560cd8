package forwarded

import (
	"net/netip"
	"reflect"
	"testing"
)

// fuzzLines makes one or two header lines of fuzzed text.
func fuzzLines(a, b string) []string {
	if b == "" {
		return []string{a}
	}
	return []string{a, b}
}

// checkClient fails t if c breaks what Resolve promises.
func checkClient(t *testing.T, c Client, hops int) {
	t.Helper()
	if c.Node.Addr.Zone() != "" || c.ReportedBy.Zone() != "" {
		t.Fatalf("client %+v has a zone", c)
	}
	if c.Node.Addr.Is4In6() || c.ReportedBy.Is4In6() {
		t.Fatalf("client %+v is not unmapped", c)
	}
	if c.Hop < 0 || c.Hop > hops {
		t.Fatalf("client hop %d out of 0..%d", c.Hop, hops)
	}
}

func FuzzParseForwarded(f *testing.F) {
	for _, seed := range [][2]string{
		{`for=192.0.2.43`, ``},
		{`for="_gazonk"`, ``},
		{`For="[2001:db8:cafe::17]:4711"`, ``},
		{`for=192.0.2.60;proto=http;by=203.0.113.43`, ``},
		{`for=192.0.2.43, for=198.51.100.17`, `for=unknown;host="a.example:8443"`},
		{`for="192.0.2.43:_xyz";by="_p:80"`, ``},
		{`for="\1\9\2.0.2.43:\8\0"`, ``},
		{`host="[2001:db8::1]:443";proto=HTTPS`, ``},
		{`for="[fe80::1%eth0]"`, ``},
		{`for=192.0.2.1;;proto=http`, ``},
		{`for="192.0.2.1`, ``},
		{`for=192.0.2.1;for=192.0.2.2`, ``},
		{"for=192.0.2.1\r\n", ``},
		{`for="[::ffff:10.0.0.1]", for=10.0.0.2`, `proto=https`},
	} {
		f.Add(seed[0], seed[1])
	}
	trusted := trustPrefixes("10.0.0.0/8", "192.0.2.0/25", "2001:db8::/33")
	f.Fuzz(func(t *testing.T, a, b string) {
		lines := fuzzLines(a, b)
		elems, err := ParseForwarded(nil, lines)
		if err != nil {
			if elems != nil {
				t.Fatalf("error %v with elements %+v", err, elems)
			}
			return
		}
		if len(elems) > MaxHops {
			t.Fatalf("%d elements, over MaxHops", len(elems))
		}
		for _, e := range elems {
			for _, n := range []Node{e.For, e.By} {
				if n.Addr.Zone() != "" {
					t.Fatalf("node %+v has a zone", n)
				}
				if n.IsIP() && n.Name != "" {
					t.Fatalf("node %+v is both an IP and a name", n)
				}
			}
			if e.Proto != "" && e.Proto != "http" && e.Proto != "https" {
				t.Fatalf("proto %q", e.Proto)
			}
		}

		out := Emit(elems, "", "", true)
		if len(out.Forwarded) <= MaxHeaderBytes {
			again, err := ParseForwarded(nil, []string{out.Forwarded})
			if err != nil {
				t.Fatalf("emitted %q does not parse: %v", out.Forwarded, err)
			}
			if !reflect.DeepEqual(again, elems) {
				t.Fatalf("round trip through %q\n got %+v\nwant %+v", out.Forwarded, again, elems)
			}
		}
		if len(out.XForwardedFor) <= MaxHeaderBytes {
			hops, err := ParseXForwardedFor(nil, []string{out.XForwardedFor})
			if err != nil {
				t.Fatalf("emitted %q does not parse: %v", out.XForwardedFor, err)
			}
			for i, e := range elems {
				if hops[i] != e.For.Addr {
					t.Fatalf("X-Forwarded-For hop %d is %v, want %v", i, hops[i], e.For.Addr)
				}
			}
		}

		for _, peer := range []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("203.0.113.1")} {
			checkClient(t, ResolveForwarded(elems, peer, trusted), len(elems))
		}
	})
}

func FuzzParseXForwardedFor(f *testing.F) {
	for _, seed := range [][2]string{
		{`192.0.2.1`, ``},
		{`192.0.2.1, 2001:db8::1,10.0.0.2`, `10.0.0.3`},
		{`unknown, ::ffff:192.0.2.1`, ``},
		{`fe80::1%eth0`, ``},
		{`192.0.2.1:80`, ``},
		{`[2001:db8::1]`, ``},
		{`192.0.2.1,,192.0.2.2`, ``},
		{" \t192.0.2.1\t, 10.0.0.1 ", ``},
		{"192.0.2.1\r\n", ``},
	} {
		f.Add(seed[0], seed[1])
	}
	trusted := trustPrefixes("10.0.0.0/8", "192.0.2.0/25", "2001:db8::/33")
	f.Fuzz(func(t *testing.T, a, b string) {
		hops, err := ParseXForwardedFor(nil, fuzzLines(a, b))
		if err != nil {
			if hops != nil {
				t.Fatalf("error %v with hops %v", err, hops)
			}
			return
		}
		if len(hops) > MaxHops {
			t.Fatalf("%d hops, over MaxHops", len(hops))
		}
		chain := make([]Element, len(hops))
		for i, addr := range hops {
			if addr.Zone() != "" {
				t.Fatalf("hop %v has a zone", addr)
			}
			chain[i].For.Addr = addr
		}

		out := Emit(chain, "", "", false)
		if len(out.XForwardedFor) <= MaxHeaderBytes {
			again, err := ParseXForwardedFor(nil, []string{out.XForwardedFor})
			if err != nil {
				t.Fatalf("emitted %q does not parse: %v", out.XForwardedFor, err)
			}
			if !reflect.DeepEqual(again, hops) {
				t.Fatalf("round trip through %q: got %v, want %v", out.XForwardedFor, again, hops)
			}
		}

		for _, peer := range []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("203.0.113.1")} {
			checkClient(t, ResolveXForwarded(hops, "https", "", peer, trusted), len(hops))
		}
	})
}
