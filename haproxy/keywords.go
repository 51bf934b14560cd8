package haproxy

import (
	"fmt"
	"slices"
	"strings"
)

// The keyword registry: every HAProxy keyword the adapter knows, once.
// An entry says where HAProxy takes the keyword (its sections, after the
// keyword matrix of section 4.1 of HAProxy's configuration manual), what
// becomes of it (translated, approximated, ignored or refused), the code
// that reads it in each kind of section, and its row of docs/haproxy.md's
// keyword table (keywordTable, which a test checks against the docs).
// A keyword not in it is refused as not translated yet. Adding a keyword
// is adding its entry, and its test.

// sectionSet is the sections that take a keyword.
type sectionSet uint16

const (
	inGlobal sectionSet = 1 << iota
	inDefaults
	inFrontend
	inListen
	inBackend
	inUserlist
	inResolvers
	inCache
	inFcgiApp
)

const (
	frontends = inDefaults | inFrontend | inListen // a frontend's keyword
	backends  = inDefaults | inListen | inBackend  // a backend's keyword
	proxies   = frontends | backends               // both sides'
)

func (s sectionSet) has(in sectionSet) bool { return s&in != 0 }

// String names the sections, as the docs' table shows them.
func (s sectionSet) String() string {
	var names []string
	if s == 0 {
		return "(begins a section)"
	}
	for i, name := range []string{"global", "defaults", "frontend", "listen", "backend", "userlist", "resolvers", "cache", "fcgi-app"} {
		if s.has(1 << i) {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// status is what becomes of a keyword's lines.
type status int

const (
	// refused: the line is refused, with the entry's doc as the hint
	// (or "not translated yet").
	refused status = iota
	// translated: the line becomes what the entry's doc says (a form of
	// it the translation cannot carry exactly is refused with its line).
	translated
	// approximated: translated close to, not exactly as, HAProxy runs
	// it: a Warning with its line.
	approximated
	// ignored: nothing in Caddy corresponds or is needed; the line is
	// kept as a comment saying why (the doc).
	ignored
)

func (s status) String() string {
	return [...]string{"refused", "translated", "approximated", "ignored"}[s]
}

// keyword is an entry of the registry.
type keyword struct {
	name string // as the matrix names it: "balance", "option httpchk", "timeout server"
	in   sectionSet
	// rules: HAProxy takes it in a named defaults section only, which
	// frontends and backends then cannot both take.
	rules  bool
	status status
	doc    string // what it becomes; why it is ignored or refused
	// The code that reads a line of the keyword in the global section, a
	// frontend (or a listen's frontend side, or defaults a frontend
	// takes), a backend (likewise); nil where nothing is read: an ignored
	// keyword is noted, a refused one refused.
	global   func(g *global, l Line) error
	frontend func(fe *frontend, l Line) error
	backend  func(be *backend, l Line) error
	// page reads a stats line as the stats page of a frontend or listen
	// (readStats): what became of the line.
	page statsKeyword
	// userlist reads a line of a userlist section.
	userlist func(u *userlist, l Line) error
	// resolvers reads a line of a resolvers section.
	resolvers func(r *resolvers, l Line) error
	// fcgiApp reads a line of a fcgi-app section.
	fcgiApp func(a *fcgiApp, l Line) error
}

// keywords are the registry, by name. Filled by init: readers look
// entries up (keywordNote), which a package variable's initializer could
// not refer to.
var keywords map[string]*keyword

func init() {
	keywords = indexKeywords(sectionKeywords, globalKeywords, proxyKeywords, frontendKeywords, backendKeywords, matrixOnly, resolversKeywords, cacheKeywords, fcgiAppKeywords)
}

func indexKeywords(tables ...[]keyword) map[string]*keyword {
	m := map[string]*keyword{}
	for _, table := range tables {
		for i := range table {
			k := &table[i]
			if m[k.name] != nil {
				panic("haproxy: keyword " + k.name + " registered twice")
			}
			m[k.name] = k
		}
	}
	return m
}

// twoWordKeywords are the keywords whose second word names the setting.
var twoWordKeywords = map[string]bool{"option": true, "timeout": true, "stats": true, "capture": true,
	"tcp-request": true, "tcp-response": true, "monitor": true, "external-check": true, "persist": true,
	"rate-limit": true, "stick": true, "email-alert": true, "declare": true, "compression": true, "hold": true}

// keywordOf is a line's keyword as HAProxy's matrix names it: "balance",
// "option httpchk", "timeout server" (a "no" or "default" prefix dropped).
func keywordOf(l Line) string {
	w := l.Words
	if (w[0] == "no" || w[0] == "default") && len(w) > 1 {
		w = w[1:]
	}
	if twoWordKeywords[w[0]] && len(w) > 1 {
		return w[0] + " " + w[1]
	}
	return w[0]
}

// keywordAt is the line's entry, nil for a keyword the adapter does not know.
func keywordAt(l Line) *keyword { return keywords[keywordOf(l)] }

// notTranslated refuses a line of a keyword with no code for where it is:
// with the entry's hint if it is a refused one.
func notTranslated(k *keyword, l Line) error {
	switch {
	case k != nil && k.status == refused && k.doc != "":
		return refuse(l, "%s", k.doc)
	case k != nil && k.status == approximated && slices.ContainsFunc(matrixOnly, func(m keyword) bool { return m.name == k.name }):
		// A 1.x keyword in a form not read as its 2.x replacement.
		return refuse(l, "this form is not translated: %s", k.doc)
	}
	return refuse(l, "not translated yet")
}

// readFrontendLine reads one line of a frontend (or of its defaults)
// through the registry.
func (fe *frontend) read(l Line) error {
	if keywordSide(l) == backendSide {
		return refuse(l, "a backend's keyword, which HAProxy ignores in a frontend (with a warning): not translated; write it in the backend or in the defaults")
	}
	k := keywordAt(l)
	if k == nil || k.frontend == nil {
		return notTranslated(k, l)
	}
	return k.frontend(fe, l)
}

// read reads one line of a backend (or of its defaults) through the
// registry.
func (be *backend) read(l Line) error {
	k := keywordAt(l)
	if keywordSide(l) == frontendSide && (k == nil || k.backend == nil) {
		return refuse(l, "a frontend's keyword, which HAProxy ignores in a backend (with a warning): not translated; write it in the frontend or in the defaults")
	}
	if k == nil || k.backend == nil {
		return notTranslated(k, l)
	}
	return k.backend(be, l)
}

// read reads one line of the global section through the registry: an
// ignored keyword is noted with why.
func (g *global) read(l Line) error {
	k := keywordAt(l)
	if k == nil || !k.in.has(inGlobal) || k.global == nil && k.status != ignored {
		if k != nil && k.status == refused && k.doc != "" {
			return refuse(l, "%s", k.doc)
		}
		// As written: not the 2.x keyword a 1.x one is read as, nor a
		// value of the environment.
		return refuse(l, "not translated yet in the global section")
	}
	if k.status == ignored {
		g.note(l, "ignored: "+k.doc)
	}
	if k.global == nil {
		return nil
	}
	return k.global(g, l)
}

// refuseSection refuses a section of a kind not translated, with its
// entry's hint.
func refuseSection(s *Section) error {
	if k := keywords[s.Kind]; k != nil && k.doc != "" {
		return errAt(s.Pos, "%s", k.doc)
	}
	return errAt(s.Pos, "%s sections are not translated yet", s.Kind)
}

// keywordSide is the side of the proxies that take the line's keyword: a
// keyword the registry does not know is taken as both sides'.
func keywordSide(l Line) side {
	k := keywordAt(l)
	switch {
	case k == nil:
		return bothSides
	case k.in.has(inFrontend) && !k.in.has(inBackend):
		return frontendSide
	case k.in.has(inBackend) && !k.in.has(inFrontend):
		return backendSide
	}
	return bothSides
}

// keywordTable is docs/haproxy.md's keyword table: a row per entry, in
// the order of the names.
func keywordTable() string {
	var b strings.Builder
	b.WriteString("| keyword | sections | status | becomes, or why |\n|---|---|---|---|\n")
	names := make([]string, 0, len(keywords))
	for name := range keywords {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k := keywords[name]
		doc := k.doc
		if doc == "" {
			doc = "not translated yet"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, k.in, k.status, strings.ReplaceAll(doc, "|", `\|`))
	}
	return b.String()
}

// keywordNote is the note of a line that is noted, not written as a
// directive: its entry's doc (after "ignored: " for an ignored keyword,
// a Warning for an approximated one), or for option http-keep-alive,
// keepAlive (what Caddy keeps alive on the side reading it). A form with
// more words is not translated.
func keywordNote(l Line, keepAlive string) (note, error) {
	k := keywordAt(l)
	if len(l.Words) != 2 {
		return note{}, notTranslated(k, l)
	}
	switch {
	case k.name == "option http-keep-alive":
		return note{line: l, what: keepAlive}, nil
	case k.status == ignored:
		return note{line: l, what: "ignored: " + k.doc}, nil
	}
	return note{line: l, what: k.doc, approximated: k.status == approximated}, nil
}
