package forwarded

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ipNode(s string) Node { return Node{Addr: ip(s)} }

func TestParseForwardedValid(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []Element
	}{
		{"rfc example", []string{`for="_gazonk"`}, []Element{{For: Node{Name: "_gazonk"}}}},
		{"ipv6 with port", []string{`For="[2001:db8:cafe::17]:4711"`},
			[]Element{{For: Node{Addr: ip("2001:db8:cafe::17"), Port: 4711}}}},
		{"all parameters", []string{`for=192.0.2.60;proto=http;by=203.0.113.43;host=example.com`},
			[]Element{{For: ipNode("192.0.2.60"), By: ipNode("203.0.113.43"), Proto: "http", Host: "example.com"}}},
		{"list", []string{`for=192.0.2.43, for=198.51.100.17`},
			[]Element{{For: ipNode("192.0.2.43")}, {For: ipNode("198.51.100.17")}}},
		{"no whitespace around comma", []string{`for=192.0.2.43,for=198.51.100.17`},
			[]Element{{For: ipNode("192.0.2.43")}, {For: ipNode("198.51.100.17")}}},
		{"tabs and spaces around commas and line", []string{" \tfor=192.0.2.43 \t,\t for=198.51.100.17 "},
			[]Element{{For: ipNode("192.0.2.43")}, {For: ipNode("198.51.100.17")}}},
		{"several lines", []string{`for=192.0.2.43`, `for="[2001:db8::1]";proto=https`},
			[]Element{{For: ipNode("192.0.2.43")}, {For: ipNode("2001:db8::1"), Proto: "https"}}},
		{"case-insensitive names and values", []string{`FOR=UNKNOWN;PROTO=HTTPS;Host=Example.COM`},
			[]Element{{For: Node{Name: "unknown"}, Proto: "https", Host: "Example.COM"}}},
		{"unknown with port", []string{`for="unknown:80"`}, []Element{{For: Node{Name: "unknown", Port: 80}}}},
		{"obfuscated port", []string{`for="192.0.2.43:_xyz-1.a"`},
			[]Element{{For: Node{Addr: ip("192.0.2.43"), ObfuscatedPort: "_xyz-1.a"}}}},
		{"obfuscated node and port", []string{`by="_p.1:_8080"`}, []Element{{By: Node{Name: "_p.1", ObfuscatedPort: "_8080"}}}},
		{"quoted ipv4", []string{`for="192.0.2.43"`}, []Element{{For: ipNode("192.0.2.43")}}},
		{"quoted pair escapes", []string{`for="\1\9\2.0.2.43:\8\0"`}, []Element{{For: Node{Addr: ip("192.0.2.43"), Port: 80}}}},
		{"leading zero port", []string{`for="192.0.2.43:00080"`}, []Element{{For: Node{Addr: ip("192.0.2.43"), Port: 80}}}},
		{"max port", []string{`for="192.0.2.43:65535"`}, []Element{{For: Node{Addr: ip("192.0.2.43"), Port: 65535}}}},
		{"4in6 kept", []string{`for="[::ffff:192.0.2.1]"`}, []Element{{For: ipNode("::ffff:192.0.2.1")}}},
		{"host with port and v6", []string{`host="example.com:8443", host="[2001:db8::2]:443"`},
			[]Element{{Host: "example.com:8443"}, {Host: "[2001:db8::2]:443"}}},
		{"element without for", []string{`proto=https`}, []Element{{Proto: "https"}}},
		{"no lines", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseForwarded(nil, tt.lines)
			if err != nil {
				t.Fatalf("ParseForwarded(%q): %v", tt.lines, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseForwarded(%q)\n got %+v\nwant %+v", tt.lines, got, tt.want)
			}
		})
	}
}

func TestParseForwardedMalformed(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
	}{
		{"empty line", []string{""}},
		{"blank line", []string{"  "}},
		{"empty line among good", []string{"for=192.0.2.1", ""}},
		{"empty element", []string{"for=192.0.2.1,,for=192.0.2.2"}},
		{"empty element after whitespace", []string{"for=192.0.2.1, ,for=192.0.2.2"}},
		{"trailing comma", []string{"for=192.0.2.1,"}},
		{"leading comma", []string{",for=192.0.2.1"}},
		{"empty pair", []string{"for=192.0.2.1;;proto=http"}},
		{"trailing semicolon", []string{"for=192.0.2.1;"}},
		{"leading semicolon", []string{";for=192.0.2.1"}},
		{"space before semicolon", []string{"for=192.0.2.1 ;proto=http"}},
		{"space after semicolon", []string{"for=192.0.2.1; proto=http"}},
		{"space around equals", []string{"for = 192.0.2.1"}},
		{"no value", []string{"for="}},
		{"no equals", []string{"for"}},
		{"empty quoted value", []string{`for=""`}},
		{"unbalanced quote", []string{`for="192.0.2.1`}},
		{"stray quote", []string{`for=192.0.2.1"`}},
		{"quote inside token", []string{`for=192."0.2.1"`}},
		{"escape at end", []string{`for="192.0.2.1\`}},
		{"escaped closing quote", []string{`for="192.0.2.1\"`}},
		{"escaped control character", []string{"for=\"192.0.2.1\\\x01\""}},
		{"escaped quote in node", []string{`for="192.0.2.1\""`}},
		{"duplicate for", []string{"for=192.0.2.1;for=192.0.2.2"}},
		{"duplicate for differing case", []string{"for=192.0.2.1;FOR=192.0.2.2"}},
		{"duplicate by", []string{"by=192.0.2.1;by=192.0.2.1"}},
		{"duplicate proto", []string{"proto=http;proto=https"}},
		{"duplicate host", []string{"host=a;host=a"}},
		{"unknown parameter", []string{"for=192.0.2.1;secret=x"}},
		{"bad ipv4", []string{"for=192.0.2.256"}},
		{"ipv4 leading zero", []string{"for=192.0.02.1"}},
		{"short ipv4", []string{"for=192.0.2"}},
		{"name", []string{"for=example.com"}},
		{"ipv6 without brackets quoted", []string{`for="2001:db8::1"`}},
		{"ipv6 without brackets", []string{`for=2001:db8::1`}},
		{"ipv6 brackets unquoted", []string{`for=[2001:db8::1]`}},
		{"ipv4 in brackets", []string{`for="[192.0.2.1]"`}},
		{"unclosed bracket", []string{`for="[2001:db8::1"`}},
		{"junk after bracket", []string{`for="[2001:db8::1]x"`}},
		{"ipv6 zone", []string{`for="[fe80::1%eth0]"`}},
		{"ipv6 zone escaped", []string{`for="[fe80::1%25eth0]"`}},
		{"port unquoted", []string{`for=192.0.2.1:80`}},
		{"port zero", []string{`for="192.0.2.1:0"`}},
		{"port too big", []string{`for="192.0.2.1:65536"`}},
		{"port too long", []string{`for="192.0.2.1:000080"`}},
		{"port empty", []string{`for="192.0.2.1:"`}},
		{"port negative", []string{`for="192.0.2.1:-1"`}},
		{"two ports", []string{`for="192.0.2.1:80:81"`}},
		{"bare underscore", []string{`for=_`}},
		{"bad obfuscated", []string{`for="_a b"`}},
		{"bad obfuscated port", []string{`for="192.0.2.1:_"`}},
		{"bad obfuscated port char", []string{`for="192.0.2.1:_a+b"`}},
		{"proto other", []string{"proto=ftp"}},
		{"proto empty", []string{`proto=""`}},
		{"host empty", []string{`host=""`}},
		{"host with slash", []string{`host="a/b"`}},
		{"host percent", []string{`host=a%20b`}},
		{"host bad port", []string{`host="a:0"`}},
		{"host zone", []string{`host="[fe80::1%eth0]"`}},
		{"host too long", []string{"host=" + strings.Repeat("a", 254)}},
		{"cr", []string{"for=192.0.2.1\r"}},
		{"lf between elements", []string{"for=192.0.2.1,\nfor=192.0.2.2"}},
		{"crlf in quotes", []string{"for=\"192.0.2.1\r\n\""}},
		{"nul", []string{"for=192.0.2.1\x00"}},
		{"del in quotes", []string{"host=\"a\x7f\""}},
		{"obs-text in quotes", []string{"host=\"\xe9\""}},
		{"semicolon between elements", []string{"for=192.0.2.1 for=192.0.2.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]Element, 1, 4)
			got, err := ParseForwarded(dst, tt.lines)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseForwarded(%q) = %+v, %v; want ErrMalformed", tt.lines, got, err)
			}
			if len(got) != 1 {
				t.Fatalf("ParseForwarded(%q) returned %d elements on error, want dst unchanged", tt.lines, len(got))
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	hops := func(n int, entry string) []string {
		return []string{strings.TrimSuffix(strings.Repeat(entry+",", n), ",")}
	}
	if _, err := ParseForwarded(nil, hops(MaxHops, "for=192.0.2.1")); err != nil {
		t.Errorf("Forwarded of %d hops: %v", MaxHops, err)
	}
	if _, err := ParseForwarded(nil, hops(MaxHops+1, "for=192.0.2.1")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Forwarded of %d hops: %v, want ErrTooLarge", MaxHops+1, err)
	}
	if _, err := ParseXForwardedFor(nil, hops(MaxHops, "192.0.2.1")); err != nil {
		t.Errorf("X-Forwarded-For of %d hops: %v", MaxHops, err)
	}
	if _, err := ParseXForwardedFor(nil, hops(MaxHops+1, "192.0.2.1")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("X-Forwarded-For of %d hops: %v, want ErrTooLarge", MaxHops+1, err)
	}
	// Hops split over lines count together.
	split := append(hops(MaxHops/2, "192.0.2.1"), hops(MaxHops/2+1, "192.0.2.1")...)
	if _, err := ParseXForwardedFor(nil, split); !errors.Is(err, ErrTooLarge) {
		t.Errorf("X-Forwarded-For of %d hops over two lines: %v, want ErrTooLarge", MaxHops+1, err)
	}

	// Size is checked over all lines, before anything is read.
	big := "host=" + strings.Repeat("a", MaxHeaderBytes)
	if _, err := ParseForwarded(nil, []string{big}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Forwarded of %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	half := strings.Repeat(" ", MaxHeaderBytes/2) + "192.0.2.1"
	if _, err := ParseXForwardedFor(nil, []string{half, half}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("X-Forwarded-For of two lines of %d bytes: %v, want ErrTooLarge", len(half), err)
	}
	if _, err := ParseXForwardedFor(nil, []string{half}); err != nil {
		t.Errorf("X-Forwarded-For of %d bytes: %v", len(half), err)
	}
	if _, err := ParseXForwardedProto([]string{strings.Repeat("http,", MaxHeaderBytes/5+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized X-Forwarded-Proto: %v, want ErrTooLarge", err)
	}
	if _, err := ParseXForwardedHost([]string{strings.Repeat("a", MaxHeaderBytes+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized X-Forwarded-Host: %v, want ErrTooLarge", err)
	}
}

func TestParseXForwardedFor(t *testing.T) {
	valid := []struct {
		name  string
		lines []string
		want  []netip.Addr
	}{
		{"one", []string{"192.0.2.1"}, []netip.Addr{ip("192.0.2.1")}},
		{"list", []string{"192.0.2.1, 2001:db8::1,198.51.100.7"}, []netip.Addr{ip("192.0.2.1"), ip("2001:db8::1"), ip("198.51.100.7")}},
		{"whitespace", []string{" \t192.0.2.1 ,\t2001:db8::1\t "}, []netip.Addr{ip("192.0.2.1"), ip("2001:db8::1")}},
		{"several lines", []string{"192.0.2.1", "198.51.100.7, 203.0.113.9"}, []netip.Addr{ip("192.0.2.1"), ip("198.51.100.7"), ip("203.0.113.9")}},
		{"unknown", []string{"unknown, 192.0.2.1"}, []netip.Addr{{}, ip("192.0.2.1")}},
		{"4in6", []string{"::ffff:192.0.2.1"}, []netip.Addr{ip("::ffff:192.0.2.1")}},
		{"no lines", nil, nil},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseXForwardedFor(nil, tt.lines)
			if err != nil {
				t.Fatalf("ParseXForwardedFor(%q): %v", tt.lines, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseXForwardedFor(%q) = %v, want %v", tt.lines, got, tt.want)
			}
		})
	}
	malformed := []struct {
		name  string
		lines []string
	}{
		{"empty line", []string{""}},
		{"empty entry", []string{"192.0.2.1,,192.0.2.2"}},
		{"trailing comma", []string{"192.0.2.1,"}},
		{"blank entry", []string{"192.0.2.1, ,192.0.2.2"}},
		{"empty second line", []string{"192.0.2.1", " "}},
		{"port", []string{"192.0.2.1:80"}},
		{"brackets", []string{"[2001:db8::1]"}},
		{"brackets and port", []string{"[2001:db8::1]:80"}},
		{"zone", []string{"fe80::1%eth0"}},
		{"zone empty", []string{"fe80::1%"}},
		{"name", []string{"example.com"}},
		{"bad ipv4", []string{"192.0.2.300"}},
		{"ipv4 leading zero", []string{"192.0.2.01"}},
		{"space inside", []string{"192.0.2.1 192.0.2.2"}},
		{"semicolon", []string{"192.0.2.1;192.0.2.2"}},
		{"obfuscated", []string{"_hidden"}},
		{"cr", []string{"192.0.2.1\r"}},
		{"lf", []string{"192.0.2.1\n, 192.0.2.2"}},
		{"nul", []string{"192.0.2.1\x00"}},
		{"quoted", []string{`"192.0.2.1"`}},
	}
	for _, tt := range malformed {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]netip.Addr, 1, 4)
			got, err := ParseXForwardedFor(dst, tt.lines)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseXForwardedFor(%q) = %v, %v; want ErrMalformed", tt.lines, got, err)
			}
			if len(got) != 1 {
				t.Fatalf("ParseXForwardedFor(%q) returned %d entries on error, want dst unchanged", tt.lines, len(got))
			}
		})
	}
}

func TestParseXForwardedProto(t *testing.T) {
	valid := []struct {
		lines []string
		want  string
	}{
		{nil, ""},
		{[]string{"https"}, "https"},
		{[]string{"HTTP"}, "http"},
		{[]string{" https "}, "https"},
		{[]string{"https, HTTPS", "https"}, "https"},
	}
	for _, tt := range valid {
		got, err := ParseXForwardedProto(tt.lines)
		if err != nil || got != tt.want {
			t.Errorf("ParseXForwardedProto(%q) = %q, %v; want %q", tt.lines, got, err, tt.want)
		}
	}
	for _, lines := range [][]string{
		{""}, {"ftp"}, {"https,"}, {"http, https"}, {"http", "https"}, {"https;"}, {"https\r"}, {"http s"},
	} {
		if got, err := ParseXForwardedProto(lines); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseXForwardedProto(%q) = %q, %v; want ErrMalformed", lines, got, err)
		}
	}
}

func TestParseXForwardedHost(t *testing.T) {
	valid := []struct {
		lines []string
		want  string
	}{
		{nil, ""},
		{[]string{"example.com"}, "example.com"},
		{[]string{"example.com:8443"}, "example.com:8443"},
		{[]string{"[2001:db8::1]"}, "[2001:db8::1]"},
		{[]string{"[2001:db8::1]:443"}, "[2001:db8::1]:443"},
		{[]string{"192.0.2.1"}, "192.0.2.1"},
		{[]string{"a-b_c~d.example"}, "a-b_c~d.example"},
		{[]string{"Example.com", "example.COM"}, "Example.com"},
	}
	for _, tt := range valid {
		got, err := ParseXForwardedHost(tt.lines)
		if err != nil || got != tt.want {
			t.Errorf("ParseXForwardedHost(%q) = %q, %v; want %q", tt.lines, got, err, tt.want)
		}
	}
	for _, lines := range [][]string{
		{""}, {"a.example, b.example"}, {"a.example", "b.example"}, {"a.example:"}, {"a.example:0"},
		{"a.example:65536"}, {":80"}, {"[2001:db8::1"}, {"[fe80::1%eth0]"}, {"[192.0.2.1]"}, {"2001:db8::1"},
		{"a b"}, {"a/b"}, {"a@b"}, {"a%41"}, {"a\r\nX-Evil: 1"}, {"[2001:db8::1]x"}, {strings.Repeat("a", 254)},
	} {
		if got, err := ParseXForwardedHost(lines); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseXForwardedHost(%q) = %q, %v; want ErrMalformed", lines, got, err)
		}
	}
}

func TestParseNode(t *testing.T) {
	for _, s := range []string{"192.0.2.1", "[2001:db8::1]:4711", "unknown", "_hidden:_port", "192.0.2.1:80"} {
		n, err := ParseNode(s)
		if err != nil {
			t.Errorf("ParseNode(%q): %v", s, err)
			continue
		}
		if got := n.String(); got != s {
			t.Errorf("ParseNode(%q).String() = %q", s, got)
		}
	}
	for _, s := range []string{"", "2001:db8::1", "[fe80::1%lo]", "host", "_", "192.0.2.1:", `"192.0.2.1"`} {
		if n, err := ParseNode(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseNode(%q) = %+v, %v; want ErrMalformed", s, n, err)
		}
	}
}

// A syntax error says where, but does not echo the header, which the
// client controls.
func TestSyntaxErrorMessage(t *testing.T) {
	_, err := ParseForwarded(nil, []string{"for=192.0.2.1", "for=192.0.2.1;secret=hunter2"})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "hunter2") || !strings.Contains(msg, "line 2") {
		t.Errorf("error %q: want line 2 and no header text", msg)
	}
}
