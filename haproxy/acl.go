package haproxy

import (
	"regexp"
	"strings"
)

// aclFetch is a fetch an ACL may test against its values: the Caddy
// placeholder it reads, and the CEL test of a value ("==", or a string
// method: startsWith, endsWith, matches).
type aclFetch struct {
	subject, test string
}

// aclFetches are the fetches an ACL may test against values (src aside):
// HAProxy's path is the path as sent without the query, hdr(host) the
// Host header as sent, with its port.
var aclFetches = map[string]aclFetch{
	"path":          {rawPath, "=="},
	"path_beg":      {rawPath, "startsWith"},
	"path_end":      {rawPath, "endsWith"},
	"path_reg":      {rawPath, "matches"},
	"method":        {"{http.request.method}", "=="},
	"hdr(host)":     {"{http.request.hostport}", "=="},
	"hdr_beg(host)": {"{http.request.hostport}", "startsWith"},
}

// rawPath is the request's path as sent (its escapes kept), without the
// query: HAProxy's path. Caddy's {http.request.uri.path} is decoded, so
// that /%61pi would match path_beg /api, which HAProxy's does not.
const rawPath = `{http.request.uri}.split("?")[0]`

// boolFetches are the fetches that are true or false themselves, tested
// without a value ("{ ssl_fc }"), as the CEL term each is: ssl_fc is true
// on a TLS connection, as Caddy's {http.request.scheme} is https (the
// request's TLS state, whatever its headers say).
var boolFetches = map[string]string{"ssl_fc": `{http.request.scheme} == "https"`}

// acl is an ACL's test (a named ACL's line, or an anonymous ACL): true if
// any of its values matches, as HAProxy tests them.
type acl struct {
	line   Line
	fetch  string   // as written
	test   aclFetch // the values' test ("" subject for src and boolean fetches)
	fold   bool     // -i: the subject lowered (the values are already)
	values []string // as the test compares them: lowered for -i, (?i) before a regular expression
	term   string   // a boolean fetch's CEL term (ssl_fc)
	src    bool     // the connection's peer against addresses and ranges
}

// readACL reads an ACL's words: a fetch, its flags, its values. Only the
// -i flag is translated.
func readACL(words []string, l Line) (acl, error) {
	a := acl{line: l, fetch: words[0]}
	values := words[1:]
	if term, ok := boolFetches[a.fetch]; ok {
		if len(values) > 0 {
			return a, refuse(l, "%s takes no flag or value (true on a TLS connection): %s is not translated", a.fetch, strings.Join(values, " "))
		}
		a.term = term
		return a, nil
	}
	var err error
	if a.fold, values, err = aclFlags(values, l); err != nil {
		return a, err
	}
	if len(values) == 0 {
		return a, refuse(l, "an ACL without a value")
	}
	if a.fetch == "src" {
		a.src, a.values = true, values
		return a, a.checkSrc()
	}
	f, ok := aclFetches[a.fetch]
	if !ok {
		return a, refuse(l, "ACL fetch %s is not translated yet", a.fetch)
	}
	a.test = f
	return a, a.readValues(values)
}

// aclFlags reads the flags before an ACL's values: whether -i (fold case)
// is among them, and the values after them.
func aclFlags(values []string, l Line) (bool, []string, error) {
	fold := false
	for len(values) > 0 && strings.HasPrefix(values[0], "-") {
		if values[0] != "-i" {
			return false, nil, refuse(l, "ACL flag %s is not translated yet", values[0])
		}
		fold = true
		values = values[1:]
	}
	return fold, values, nil
}

// checkSrc checks src's values: addresses or CIDR ranges, without -i.
func (a acl) checkSrc() error {
	if a.fold {
		return refuse(a.line, "src takes no -i")
	}
	for _, v := range a.values {
		if !isAddrOrRange(v) {
			return refuse(a.line, "src %s: want an address or a CIDR range", v)
		}
	}
	return nil
}

// readValues reads the values as the test compares them: lowered for -i
// (a regular expression told to fold case), a regular expression checked.
func (a *acl) readValues(values []string) error {
	for _, v := range values {
		switch {
		case a.test.test == "matches" && a.fold:
			v = "(?i)" + v
		case a.fold:
			v = strings.ToLower(v)
		}
		if a.test.test == "matches" {
			if _, err := regexp.Compile(v); err != nil {
				return refuse(a.line, "path_reg %s: not a regular expression RE2 reads: %v", v, err)
			}
		}
		a.values = append(a.values, v)
	}
	return nil
}

// matcher is a rule's condition, resolved: alternatives of terms that
// must all hold (a term: a named ACL's lines, any of which holds, or an
// anonymous ACL; maybe negated), and the named ACL lines it uses, each
// once. Caddy's expression matcher tests it (emit writes its CEL).
type matcher struct {
	always bool // a rule without a condition
	unless bool
	any    [][]term
	acls   []Line
}

type term struct {
	not  bool
	alts []acl
}

// aclScope is a proxy's named ACLs, which its own rules use (a
// frontend's, or a backend's: HAProxy keeps each proxy's ACLs to its own
// rules).
type aclScope struct {
	acls     map[string][]acl  // named ACLs: each line an alternative
	cfg      *Config           // where each ACL and rule was written
	aclLines []Line            // every acl line, in order
	usedACLs map[Position]bool // acl lines a written condition used
}

func newACLScope(cfg *Config) aclScope {
	return aclScope{acls: map[string][]acl{}, usedACLs: map[Position]bool{}, cfg: cfg}
}

func (s *aclScope) readACL(l Line) error {
	w := l.Words
	if _, boolean := boolFetches[arg(l, 2)]; len(w) < 4 && !(boolean && len(w) == 3) {
		return refuse(l, "takes a name, a fetch and at least one value")
	}
	a, err := readACL(w[2:], l)
	if err != nil {
		return err
	}
	s.acls[w[1]] = append(s.acls[w[1]], a)
	s.aclLines = append(s.aclLines, l)
	return nil
}

// conditionMatcher resolves a rule's condition: each named ACL as the
// rule's section sees it.
func (s *aclScope) conditionMatcher(c *Condition, l Line) (matcher, error) {
	m := matcher{unless: c.Unless}
	seen := map[Position]bool{} // of acls: an ACL named twice is used once
	for _, terms := range c.Any {
		var all []term
		for _, t := range terms {
			alts, err := s.termACLs(t, l)
			if err != nil {
				return m, err
			}
			if t.Anon == nil {
				for _, a := range alts {
					if !seen[a.line.Pos] {
						seen[a.line.Pos] = true
						m.acls = append(m.acls, a.line)
					}
					s.usedACLs[a.line.Pos] = true
				}
			}
			all = append(all, term{not: t.Not, alts: alts})
		}
		m.any = append(m.any, all)
	}
	return m, nil
}

// termACLs are a term's ACLs: an anonymous one, or a named one's lines.
func (s *aclScope) termACLs(t Term, l Line) ([]acl, error) {
	if t.Anon == nil {
		return s.visibleACL(t.ACL, l)
	}
	a, err := readACL(t.Anon, l)
	return []acl{a}, err
}

// visibleACL is the named ACL's lines that the rule l sees: those of its
// own section, as HAProxy keeps a defaults section's ACLs to that
// section's rules (a proxy that takes the defaults does not see them).
func (s *aclScope) visibleACL(name string, l Line) ([]acl, error) {
	at := s.cfg.sectionAt(l.Pos)
	var visible []acl
	for _, a := range s.acls[name] {
		if s.cfg.sectionAt(a.line.Pos) == at {
			visible = append(visible, a)
		}
	}
	if len(visible) == 0 {
		if len(s.acls[name]) > 0 {
			d := s.cfg.sectionAt(s.acls[name][0].line.Pos)
			return nil, refuse(l, "ACL %s is defined in %s %s, whose ACLs only its own rules see (HAProxy refuses it too: no such ACL)", name, d.Kind, d.Name)
		}
		return nil, refuse(l, "ACL %s is not defined before this line", name)
	}
	return visible, nil
}
