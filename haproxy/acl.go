package haproxy

import (
	"slices"
	"strconv"
	"strings"
)

// aclFetch is a fetch an ACL may test against its values: what it reads
// (subject), and the match method its name implies (path_beg: beg).
type aclFetch struct {
	subject fetchSubject
	method  string
}

// fetchSubject is what a fetch reads, as Caddy has it.
type fetchSubject int

const (
	pathSubject   fetchSubject = iota // the path as sent, without the query
	urlSubject                        // the URI as sent, with the query
	querySubject                      // the query as sent
	methodSubject                     // the method
	hostSubject                       // the Host header as sent, with its port
	headerSubject                     // a header's values, split at commas (hdr(<name>))
	cookieSubject                     // a cookie's value (cook(<name>))
	sniSubject                        // the TLS client's server name
	varSubject                        // a variable's sample (variables.go)
	portSubject                       // the port the connection came in on (dst_port)
	countSubject                      // how many of a backend's servers are usable (nbsrv(<backend>))
	constSubject                      // a constant of set-var (int(<n>), str(<s>), bool(<b>)): its value
)

// aclFetches are the fetches an ACL may test against values (src aside),
// by name (a fetch of a header or a cookie without its argument), each
// with the match method its name implies, as HAProxy's manual (7.3)
// derives them: path_beg is path -m beg.
var aclFetches = func() map[string]aclFetch {
	m := map[string]aclFetch{"method": {methodSubject, "str"}, "query": {querySubject, "str"}, "ssl_fc_sni": {sniSubject, "str"}, "dst_port": {portSubject, "int"}}
	for base, subject := range map[string]fetchSubject{"path": pathSubject, "url": urlSubject, "hdr": headerSubject, "req.hdr": headerSubject, "cook": cookieSubject, "req.cook": cookieSubject} {
		m[base] = aclFetch{subject, "str"}
		if subject == headerSubject && base != "hdr" || subject == cookieSubject {
			continue // req.hdr_beg and the like are not HAProxy's
		}
		for _, method := range []string{"beg", "end", "sub", "reg", "dir", "dom"} {
			m[base+"_"+method] = aclFetch{subject, method}
		}
	}
	return m
}()

// fetchOf is the ACL fetch name (written as fetch) with its argument, or
// why it is refused.
func fetchOf(name, arg string, l Line, fetch string) (aclFetch, error) {
	f, ok := aclFetches[name]
	if !ok || (f.subject == headerSubject || f.subject == cookieSubject) != (arg != "") || strings.Contains(arg, ",") {
		return f, refuse(l, "ACL fetch %s is not translated yet", fetch)
	}
	return f, nil
}

// aclMethods are the match methods (-m) the adapter translates: str
// (equal), beg, end, sub, reg, dir (a part between slashes), dom (a part
// between dots, slashes, colons or question marks), found (the sample
// exists: no value), and int of an integer fetch (dst_port).
var aclMethods = map[string]bool{"str": true, "beg": true, "end": true, "sub": true, "reg": true, "dir": true, "dom": true, "found": true, "int": true}

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
	test   aclFetch // what the values are tested against, and how (-m)
	arg    string   // the header's or the cookie's name
	fold   bool     // -i: the subject lowered (the values are already)
	values []string // as the test compares them: lowered for -i, (?i) before a regular expression
	term   string   // a boolean fetch's CEL term (ssl_fc)
	src    bool     // the connection's peer against addresses and ranges
	// http_auth(<userlist>): the userlist's accounts, which only
	// http-request auth's condition tests (basic_auth).
	userlist string
	// var(<name>): the variable, and the sample its set-var computes
	// (resolved with the rule's condition).
	variable string
	sample   *sample
	// never: HAProxy never matches it where it is tested (a request's
	// fetch in an http-response rule): false there.
	never bool
	// nbsrv(<backend>): the backend named, and how its usable servers
	// are counted (resolved with the rule's condition).
	counted string
	count   *serverCount
	// A counter's test (sc_<data>(<n>)[,sub(<var>)] <op> <n>), which only
	// a deny over it reads (counterTestOf): its words.
	counterTest []string
}

// readACL reads an ACL's words: a fetch, its flags, its values. The flags
// translated are -i, -m with the methods of aclMethods, -n (no DNS lookup:
// Caddy does none), -f (values from a file, read through files when the
// configuration is read, as HAProxy reads it at its start) and --.
func readACL(words []string, l Line, files Files) (acl, error) {
	a := acl{line: l, fetch: words[0]}
	if isCounterFetch(a.fetch) {
		a.counterTest = words
		return a, nil
	}
	values := words[1:]
	if valueless, err := a.readValueless(values); valueless || err != nil {
		return a, err
	}
	name, arg := a.fetch, ""
	if base, rest, ok := strings.Cut(a.fetch, "("); ok && strings.HasSuffix(rest, ")") {
		name, arg = base, strings.TrimSuffix(rest, ")")
	}
	flags, values, err := aclFlags(values, l)
	if err != nil {
		return a, err
	}
	for _, name := range flags.files {
		patterns, err := readPatternFile(files, name, l)
		if err != nil {
			return a, err
		}
		values = append(values, patterns...)
	}
	a.fold = flags.fold
	if own, err := a.readOwnFetch(name, arg, flags, values); own {
		return a, err
	}
	f, err := fetchOf(name, arg, l, a.fetch)
	if err != nil {
		return a, err
	}
	if f.subject == headerSubject && strings.EqualFold(arg, "host") {
		f.subject = hostSubject // not among Go's headers: the request's Host
	}
	a.test, a.arg = f, arg
	return a, a.readTest(flags, values)
}

// readTest reads the values of a's fetch (a.test) by its match method,
// -m's if the flags say.
func (a *acl) readTest(flags aclFlagSet, values []string) error {
	if a.test.subject == portSubject {
		return a.readIntegers(flags, values)
	}
	if flags.method != "" {
		a.test.method = flags.method
	}
	if a.test.method == "int" {
		return refuse(a.line, "-m int of %s (a string) is not translated", a.fetch)
	}
	return a.readValues(values)
}

// intOperators are HAProxy's operators before an integer value, each as
// the range of the values it takes beside n.
var intOperators = map[string]func(n int) (lo, hi string){
	"eq": func(n int) (string, string) { return strconv.Itoa(n), strconv.Itoa(n) },
	"ge": func(n int) (string, string) { return strconv.Itoa(n), "" },
	"gt": func(n int) (string, string) { return strconv.Itoa(n + 1), "" },
	"le": func(n int) (string, string) { return "", strconv.Itoa(n) },
	"lt": func(n int) (string, string) { return "", strconv.Itoa(n - 1) },
}

// readIntegers reads the values of an integer fetch (dst_port, nbsrv) as
// HAProxy's int match does: a number, a range lo:hi (either end may be
// left out), or an operator (eq, ge, gt, le, lt) and a number; each kept
// as "lo:hi".
func (a *acl) readIntegers(flags aclFlagSet, values []string) error {
	if a.fold || flags.method != "" && flags.method != "int" {
		return refuse(a.line, "%s takes no -i and no -m other than int", a.fetch)
	}
	if len(values) == 0 {
		return refuse(a.line, "an ACL without a value")
	}
	for i := 0; i < len(values); i++ {
		v := values[i]
		if op := intOperators[v]; op != nil && i+1 < len(values) {
			n, ok := wholeNumber(values[i+1])
			if !ok {
				return refuse(a.line, "%s %s %s: want a whole number", a.fetch, v, values[i+1])
			}
			lo, hi := op(n)
			a.values = append(a.values, lo+":"+hi)
			i++
			continue
		}
		lo, hi, isRange := strings.Cut(v, ":")
		if !isRange {
			hi = lo
		}
		var ends [2]string
		for j, end := range []string{lo, hi} {
			if end == "" && isRange && lo != hi {
				continue // an end left out
			}
			n, ok := wholeNumber(end)
			if !ok {
				return refuse(a.line, "%s %s: want a whole number, a range lo:hi or an operator and a number", a.fetch, v)
			}
			ends[j] = strconv.Itoa(n)
		}
		a.values = append(a.values, ends[0]+":"+ends[1])
	}
	return nil
}

// wholeNumber reads a number of an integer match, as HAProxy does
// (decimal, a sign allowed), to be written as CEL reads it (strconv.Itoa:
// CEL's parser refuses a '+'); bounded so that gt's n+1 and lt's n-1
// stay in CEL's int range (else the test would wrap to its opposite).
func wholeNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && -1<<53 < n && n < 1<<53
}

// readValueless reads an ACL of a fetch that takes no value: http_auth of
// a userlist, or a boolean fetch (ssl_fc); it tells whether the fetch is
// one.
func (a *acl) readValueless(values []string) (bool, error) {
	if list, ok := strings.CutPrefix(a.fetch, "http_auth("); ok && strings.HasSuffix(list, ")") {
		if len(values) > 0 {
			return true, refuse(a.line, "http_auth takes no flag or value: %s is not translated", strings.Join(values, " "))
		}
		a.userlist = strings.TrimSuffix(list, ")")
		return true, nil
	}
	term, ok := boolFetches[a.fetch]
	if !ok {
		return false, nil
	}
	if len(values) > 0 {
		return true, refuse(a.line, "%s takes no flag or value (true on a TLS connection): %s is not translated", a.fetch, strings.Join(values, " "))
	}
	a.term = term
	return true, nil
}

// readOwnFetch reads an ACL of src, of var(<name>) or of nbsrv(<backend>),
// each with checks of its own; it tells whether the fetch is one of them.
func (a *acl) readOwnFetch(name, arg string, flags aclFlagSet, values []string) (bool, error) {
	switch {
	case name == "src" && arg == "":
		a.src, a.values = true, values
		return true, a.checkSrc(flags, len(values))
	case name == "var":
		return true, a.readVariable(arg, flags, values)
	case name == "nbsrv" && arg != "":
		a.counted, a.test = arg, aclFetch{subject: countSubject, method: "int"}
		return true, a.readIntegers(flags, values)
	}
	return false, nil
}

// readVariable reads an ACL of var(<name>): HAProxy wants its match
// method (-m), found aside (a header sent empty sets the variable, which
// Caddy's placeholder cannot tell from one not sent).
func (a *acl) readVariable(name string, flags aclFlagSet, values []string) error {
	switch flags.method {
	case "":
		return refuse(a.line, "var(%s) without -m: HAProxy wants the match method first (it refuses it too)", name)
	case "found":
		return refuse(a.line, "var(%s) -m found is not translated: a variable set from an empty header is found, which Caddy's placeholder cannot tell from one not sent", name)
	}
	a.variable, a.test = name, aclFetch{subject: varSubject, method: flags.method}
	return a.readValues(values)
}

// aclFlagSet is what an ACL's flags ask for.
type aclFlagSet struct {
	files  []string // -f: pattern files
	fold   bool     // -i
	method string   // -m
}

// aclFlags reads the flags before an ACL's values, and the values after
// them.
func aclFlags(values []string, l Line) (aclFlagSet, []string, error) {
	var f aclFlagSet
	for len(values) > 0 && strings.HasPrefix(values[0], "-") {
		switch flag := values[0]; {
		case flag == "--":
			return f, values[1:], nil
		case flag == "-i":
			f.fold = true
		case flag == "-n":
		case flag == "-m" && len(values) > 1 && aclMethods[values[1]]:
			f.method = values[1]
			values = values[1:]
		case flag == "-m":
			return f, nil, refuse(l, "ACL match method %s is not translated (str, beg, end, sub, reg, dir, dom, found and int are)", arg(Line{Words: values}, 1))
		case flag == "-f" && len(values) > 1:
			f.files = append(f.files, values[1])
			values = values[1:]
		default:
			return f, nil, refuse(l, "ACL flag %s is not translated yet", flag)
		}
		values = values[1:]
	}
	return f, values, nil
}

// maxPatterns bounds the values an ACL's pattern files give: each is a
// term of the matcher, tested in turn.
const maxPatterns = 100000

// readPatternFile reads an ACL's pattern file (Patterns).
func readPatternFile(files Files, name string, l Line) ([]string, error) {
	b, err := readBounded(files, name, maxPatternFile)
	if err != nil {
		return nil, refuse(l, "-f %s: %v (HAProxy refuses a pattern file it cannot read too)", name, err)
	}
	patterns := Patterns(b)
	if len(patterns) > maxPatterns {
		return nil, refuse(l, "-f %s: more than %d patterns are not translated (each is a term of Caddy's matcher)", name, maxPatterns)
	}
	return patterns, nil
}

// Patterns are the values of a pattern file as HAProxy 2.6 reads them
// (pat_ref_read_from_file): a line beginning with '#' is a comment; the
// others, their leading spaces and tabs stripped and up to their CR or
// LF, each a value, but for those left empty.
func Patterns(b []byte) []string {
	var patterns []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line, _, _ = strings.Cut(strings.TrimLeft(line, " \t"), "\r"); line != "" {
			patterns = append(patterns, line)
		}
	}
	return patterns
}

// checkSrc checks src's values: addresses or CIDR ranges, without -i
// or -m.
func (a acl) checkSrc(flags aclFlagSet, n int) error {
	if a.fold || flags.method != "" {
		return refuse(a.line, "src takes no -i or -m")
	}
	if n == 0 {
		return refuse(a.line, "an ACL without a value")
	}
	for _, v := range a.values {
		if !isAddrOrRange(v) {
			return refuse(a.line, "src %s: want an address or a CIDR range", v)
		}
	}
	return nil
}

// readValues reads the values as the test compares them: lowered for -i
// (a regular expression told to fold case), a regular expression checked;
// found takes none, the others at least one.
func (a *acl) readValues(values []string) error {
	switch {
	case a.test.method == "found" && len(values) > 0:
		return refuse(a.line, "-m found takes no value")
	case a.test.method != "found" && len(values) == 0:
		return refuse(a.line, "an ACL without a value")
	}
	for _, v := range values {
		switch {
		case a.test.method == "reg" && a.fold:
			v = "(?i)" + v
		case a.fold:
			v = lowerASCII(v)
		}
		if a.test.method == "reg" {
			if err := checkRE2(v, a.line); err != nil {
				return err
			}
		}
		a.values = append(a.values, v)
	}
	return nil
}

// lowerASCII is v with its ASCII letters lowered, as -i compares them
// (HAProxy's strncasecmp) and CEL's lowerAscii() lowers the subject: a
// letter beyond ASCII keeps its case (strings.ToLower would lower Ä,
// and make the Kelvin sign a k).
func lowerASCII(v string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, v)
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
	acls     map[string][]acl    // named ACLs: each line an alternative
	cfg      *Config             // where each ACL and rule was written
	aclLines []Line              // every acl line, in order
	usedACLs map[Position]bool   // acl lines a written condition used
	vars     map[string]variable // set by http-request set-var, by name
	// countOf is how nbsrv(<backend>) counts the backend's usable
	// servers, as the proxy sees it (nil: nbsrv is not translated in its
	// rules).
	countOf func(name string, l Line) (*serverCount, error)
}

func newACLScope(cfg *Config) aclScope {
	return aclScope{acls: map[string][]acl{}, usedACLs: map[Position]bool{}, cfg: cfg}
}

func (s *aclScope) readACL(l Line) error {
	w := l.Words
	_, boolean := boolFetches[arg(l, 2)]
	if valueless := boolean || strings.HasPrefix(arg(l, 2), "http_auth("); len(w) < 4 && !(valueless && len(w) == 3) {
		return refuse(l, "takes a name, a fetch and at least one value")
	}
	a, err := s.readScopedACL(w[2:], l)
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
			if slices.ContainsFunc(alts, func(a acl) bool { return a.userlist != "" }) {
				return m, refuse(l, "http_auth is translated only as the condition of http-request auth (basic_auth): not in another rule's")
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
	alts := []acl{{}}
	var err error
	if t.Anon == nil {
		alts, err = s.visibleACL(t.ACL, l)
	} else {
		alts[0], err = s.readScopedACL(t.Anon, l)
	}
	for i := range alts {
		if err == nil && alts[i].counterTest != nil {
			err = refuse(l, "%s: a counter's test is translated as the condition of a deny_status 429 (edge_rate_limit) or of a deny over conn_cur (in_flight), { sc_<data>(<n>)[,sub(<var>)] gt|ge <n> } and the track rule's condition, only", alts[i].fetch)
		}
		if err == nil && alts[i].variable != "" {
			err = s.resolveVariable(&alts[i], l)
		}
		if err == nil && alts[i].counted != "" {
			err = s.resolveCount(&alts[i], l)
		}
	}
	return alts, err
}

// readScopedACL reads an ACL's words (readACL), and refuses an nbsrv of a
// proxy that does not exist, as HAProxy does.
func (s *aclScope) readScopedACL(words []string, l Line) (acl, error) {
	a, err := readACL(words, l, s.cfg.files())
	if err == nil && a.counted != "" && s.cfg.Section("backend", a.counted) == nil && s.cfg.Section("listen", a.counted) == nil {
		return a, refuse(l, "nbsrv(%s): no backend or listen section of that name (HAProxy refuses it too)", a.counted)
	}
	return a, err
}

// resolveCount settles how a's nbsrv counts its backend's servers, as the
// rule l's proxy sees the backend.
func (s *aclScope) resolveCount(a *acl, l Line) error {
	if s.countOf == nil {
		return refuse(l, "nbsrv(%s) in a backend's rules is not translated yet (a frontend's or a listen's is)", a.counted)
	}
	var err error
	a.count, err = s.countOf(a.counted, l)
	return err
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
