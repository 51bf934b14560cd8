package haproxy

import (
	"os"
	"strings"
	"testing"
)

// docs/haproxy.md's keyword tables are the registry's, row for row.
func TestDocsKeywordTable(t *testing.T) {
	const path = "../docs/haproxy.md"
	const begin, end = "<!-- keyword tables: written by go test ./haproxy -run TestDocsKeywordTable -update -->\n", "<!-- end of keyword tables -->\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q … %q block", path, begin, end)
	}
	want := keywordTable() + "\nOptions of a `bind` line (another is refused at its line):\n\n" + optionsTable(bindOptions) +
		"\nOptions of a `server` or `default-server` line (another is refused at its line):\n\n" + optionsTable(serverOptions) +
		"\nActions of `http-request` (another is refused at its line):\n\n" + actionsTable(requestActions) +
		"\nLog-format samples and variables, in a header value of `http-request` and `http-response`, an `http-request redirect` target or `return`'s `lf-string` (another is refused at its line):\n\n" + formatTable()
	if *update {
		if err := os.WriteFile(path, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, _, _ := strings.Cut(rest, end); got != want {
		t.Errorf("%s's keyword tables are not the registry's: go test ./haproxy -run TestDocsKeywordTable -update", path)
	}
}

// Every entry is consistent: a reader only for a kind of section that
// takes the keyword, a refused entry with no reader, an ignored one with
// why, and the 1.x keywords that parsing reads as 2.x ones registered.
func TestKeywordRegistry(t *testing.T) {
	for name, k := range keywords {
		if problem := entryProblem(k); problem != "" {
			t.Errorf("%s: %s", name, problem)
		}
	}
	for kind := range sectionKinds {
		if k := keywords[kind]; k == nil || k.in != 0 {
			t.Errorf("section %s: its entry is %v", kind, k)
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

// entryProblem is what is wrong with a registry entry, "" if nothing.
func entryProblem(k *keyword) string {
	readers := k.global != nil || k.frontend != nil || k.backend != nil || k.page != nil
	switch {
	case k.global != nil && !k.in.has(inGlobal):
		return "a global reader, and not taken in the global section"
	case k.frontend != nil && !k.in.has(inFrontend|inListen):
		return "a frontend reader, and not taken in a frontend"
	case k.backend != nil && !k.in.has(inBackend|inListen):
		return "a backend reader, and not taken in a backend"
	case k.status == refused && readers:
		return "refused, with a reader"
	case k.status != refused && k.doc == "":
		return k.status.String() + " without a doc"
	}
	return ""
}
