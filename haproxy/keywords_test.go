package haproxy

import (
	"os"
	"strings"
	"testing"
)

// docs/haproxy.md's keyword table is the registry's, row for row.
func TestDocsKeywordTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/haproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	for what, want := range map[string]string{"keyword": keywordTable(), "bind option": optionsTable(bindOptions), "server option": optionsTable(serverOptions)} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/haproxy.md does not hold the registry's %s table; put this in it:\n%s", what, want)
		}
	}
}

// Every entry is consistent: a reader only for a kind of section that
// takes the keyword, a refused entry with no reader, an ignored one with
// why, and the 1.x keywords that parsing reads as 2.x ones registered.
func TestKeywordRegistry(t *testing.T) {
	for name, k := range keywords {
		switch {
		case k.global != nil && !k.in.has(inGlobal):
			t.Errorf("%s: a global reader, and not taken in the global section", name)
		case k.frontend != nil && !k.in.has(inFrontend|inListen):
			t.Errorf("%s: a frontend reader, and not taken in a frontend", name)
		case k.backend != nil && !k.in.has(inBackend|inListen):
			t.Errorf("%s: a backend reader, and not taken in a backend", name)
		case k.status == refused && (k.global != nil || k.frontend != nil || k.backend != nil):
			t.Errorf("%s: refused, with a reader", name)
		case k.status == ignored && k.doc == "":
			t.Errorf("%s: ignored without why", name)
		case k.status != refused && k.doc == "":
			t.Errorf("%s: %s without a doc", name, k.status)
		}
	}
	for _, m := range []map[string]string{legacyTimeouts, legacyHeaderAdds, legacyHeaderDels} {
		for name := range m {
			if k := keywords[name]; k == nil || k.status != approximated {
				t.Errorf("1.x keyword %s is read as its 2.x replacement, and its entry is %v", name, k)
			}
		}
	}
}
