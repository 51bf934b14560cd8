package forwarded

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Every claim, in any letter case and repeated, is removed from an
// untrusted peer's request; from a trusted peer only path and certificate
// claims pass, and what passFromTrusted names; method overrides pass from
// every peer unless stripped.
func TestStripperRemovesEveryClaim(t *testing.T) {
	forged := func() http.Header {
		h := http.Header{"Accept": {"*/*"}}
		for i, c := range Claims {
			name := c.Header
			if i%2 == 0 {
				name = strings.ToLower(name)
			} else {
				name = strings.ToUpper(name)
			}
			h.Add(name, "forged")
			h.Add(name, "forged again")
		}
		return h
	}
	for _, tt := range []struct {
		name        string
		pass        []string
		stripMethod bool
		trusted     bool
		kept        func(Claim) bool
	}{
		{"untrusted", nil, false, false, func(c Claim) bool { return c.Kind == KindMethod }},
		{"untrusted, method overrides stripped", nil, true, false, func(Claim) bool { return false }},
		{"trusted", nil, false, true, func(c Claim) bool { return c.FromTrusted() || c.Kind == KindMethod }},
		{"trusted, passing X-Real-IP", []string{"x-real-ip"}, true, true, func(c Claim) bool { return c.FromTrusted() || c.Header == "X-Real-IP" }},
	} {
		s, err := NewStripper(tt.pass, tt.stripMethod)
		if err != nil {
			t.Fatal(err)
		}
		h := forged()
		s.Strip(h, tt.trusted)
		for _, c := range Claims {
			got := h.Values(c.Header)
			if want := tt.kept(c); want != (len(got) == 2) {
				t.Errorf("%s: %s is %q, kept %v", tt.name, c.Header, got, want)
			}
		}
		if h.Get("Accept") != "*/*" {
			t.Errorf("%s: Accept removed", tt.name)
		}
	}
	if _, err := NewStripper([]string{"Accept"}, false); err == nil {
		t.Error("pass_from_trusted Accept: no error")
	}
}

func TestClaimsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Claims {
		k := http.CanonicalHeaderKey(c.Header)
		if seen[k] {
			t.Errorf("%s listed twice", c.Header)
		}
		seen[k] = true
		for _, set := range []string{headerForwarded, headerXFF, headerXFP, headerXFH} {
			if k == set {
				t.Errorf("%s is the forwarded set's own", c.Header)
			}
		}
	}
}

func BenchmarkStrip(b *testing.B) {
	s, _ := NewStripper(nil, true)
	base := http.Header{"Accept": {"*/*"}, "User-Agent": {"x"}, "Accept-Encoding": {"gzip"}, "Cookie": {"a=b"},
		"X-Forwarded-For": {"1.2.3.4"}, "Authorization": {"NTLM x"}, "Content-Type": {"text/plain"}, "X-Real-Ip": {"1.1.1.1"}}
	b.ReportAllocs()
	for b.Loop() {
		h := http.Header{}
		for k, v := range base {
			h[k] = v
		}
		s.Strip(h, false)
	}
}

// claimsTable is docs/forwarded.md's table of Claims, which
// TestDocsListEveryClaim keeps equal to the code.
func claimsTable() string {
	var b strings.Builder
	b.WriteString("| header | claims the client's | read by | from a trusted peer |\n|---|---|---|---|\n")
	for _, c := range Claims {
		from := "removed: the forwarded set says it; `pass_from_trusted` passes it"
		switch {
		case c.FromTrusted():
			from = "passed"
		case c.Kind == KindMethod:
			from = "passed, from every peer; `strip_method_overrides` removes it from every peer"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Header, c.Kind, c.ReadBy, from)
	}
	return b.String()
}

// docs/forwarded.md lists every claim the handler strips, as the code has
// them.
func TestDocsListEveryClaim(t *testing.T) {
	doc, err := os.ReadFile("../docs/forwarded.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := claimsTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/forwarded.md does not hold the table of forwarded.Claims; put this in it:\n%s", want)
	}
}
