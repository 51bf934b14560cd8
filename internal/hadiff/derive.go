package hadiff

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// DefaultHost is the Host of a derived request that no ACL gives one.
const DefaultHost = "hadiff.example"

// Request is one request the harness sends to both proxies.
type Request struct {
	Method string
	Host   string
	Target string      // the path and query as sent
	Header http.Header // besides Host and the harness's own
	From   string      // the client's address; "" for 127.0.0.1
	Why    []string    // what in the configuration it exercises
}

// Key identifies what is sent, whatever the request was derived for.
func (r Request) Key() string {
	var h []string
	for name, v := range r.Header {
		h = append(h, name+": "+strings.Join(v, ", "))
	}
	slices.Sort(h)
	return strings.Join(append([]string{r.Method, r.Host, r.Target, r.From}, h...), "\n")
}

func (r Request) String() string {
	s := r.Method + " " + r.Target + " Host: " + r.Host
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		s += ", " + name + ": " + strings.Join(r.Header[name], ", ")
	}
	if r.From != "" {
		s += " from " + r.From
	}
	return s
}

// change is what one ACL value makes of a request to match (or not).
type change func(*Request)

// test is one ACL test of a condition: the changes that make it true
// (in) and false (out), a named ACL's lines together.
type test struct {
	in, out []change
}

// Derivation is what Derive makes of a configuration.
type Derivation struct {
	Requests []Request
	// ResponseHeaders are the response headers the configuration sets or
	// removes: those compared.
	ResponseHeaders []string
	// Notes say what could not be derived, with the line.
	Notes []string
}

// Derive makes requests from cfg: a GET, HEAD and POST of /; for each
// ACL (named, or anonymous in a condition), requests its values match and
// near misses that they do not (a prefix one byte short, the other case
// without -i, a path's letter percent-encoded); for each rule's condition, one request that makes every
// test of an alternative true and one per test made false; a request with
// every request header the configuration sets, removes or forwards sent
// by the client (forged); the stats and monitor URIs. Requests that
// send the same are one, with each reason kept.
func Derive(cfg *haproxy.Config) Derivation {
	d := &deriver{seen: map[string]int{}, accounts: userlistAccounts(cfg), respHeaders: map[string]bool{}}
	d.add(Request{Method: http.MethodGet, Target: "/"}, "a plain GET")
	d.add(Request{Method: http.MethodHead, Target: "/"}, "a plain HEAD")
	d.add(Request{Method: http.MethodPost, Target: "/"}, "a plain POST")
	d.forged = http.Header{
		"X-Forwarded-For":   {"203.0.113.9"},
		"X-Forwarded-Proto": {"http"},
		"X-Forwarded-Host":  {"forged.example"},
		"X-Real-Ip":         {"203.0.113.9"},
		"Forwarded":         {"for=203.0.113.9"},
	}
	for _, s := range cfg.Sections {
		if s.Kind != "frontend" && s.Kind != "backend" && s.Kind != "listen" && s.Kind != "defaults" {
			continue
		}
		d.acls, d.vars = map[string]*test{}, sectionVariables(s)
		for _, line := range s.Lines {
			d.line(line)
		}
	}
	d.add(Request{Method: http.MethodGet, Target: "/", Header: d.forged}, "the request headers the configuration sets, removes or forwards, sent by the client")
	return Derivation{Requests: d.reqs, ResponseHeaders: slices.Sorted(maps.Keys(d.respHeaders)), Notes: d.notes}
}

// line derives from one line of a proxy section: by its keyword
// (lineDerivers), then from its condition.
func (d *deriver) line(line haproxy.Line) {
	w := line.Words
	at := fmt.Sprintf("line %d", line.Pos.Line)
	if derive, ok := lineDerivers[w[0]]; ok {
		derive(d, w, at)
	}
	if i := condition(w); i > 0 {
		d.condition(w[i+1:], at+": "+strings.Join(w[:i], " "))
	}
}

// lineDerivers derive from a line (its words, at: where it is) by its
// keyword.
var lineDerivers = map[string]func(d *deriver, w []string, at string){
	"acl":                 (*deriver).acl,
	"http-request":        (*deriver).requestRule,
	"redirect":            (*deriver).redirect,
	"http-response":       (*deriver).responseRule,
	"http-after-response": (*deriver).responseRule,
	"option":              (*deriver).option,
	"stats":               (*deriver).uri,
	"monitor-uri":         (*deriver).uri,
}

// headerActions are the rule actions that set or remove a header.
var headerActions = []string{"set-header", "add-header", "del-header", "replace-header", "replace-value"}

// acl derives an acl line's requests, its values' and near misses', and
// keeps its test for the conditions that name it (a name's lines
// together).
func (d *deriver) acl(w []string, at string) {
	if len(w) < 3 {
		return
	}
	t, note := d.aclTest(w[2:])
	if note != "" {
		d.notes = append(d.notes, at+": "+note)
	}
	if d.acls[w[1]] == nil {
		d.acls[w[1]] = &test{}
	}
	d.acls[w[1]].in = append(d.acls[w[1]].in, t.in...)
	d.acls[w[1]].out = append(d.acls[w[1]].out, t.out...)
	for i, c := range t.in {
		d.derive(fmt.Sprintf("%s: acl %s (value %d, in)", at, w[1], i+1), c)
	}
	for i, c := range t.out {
		d.derive(fmt.Sprintf("%s: acl %s (near miss %d, out)", at, w[1], i+1), c)
	}
}

// requestRule takes an http-request rule's header: one it sets or
// removes is forged by the client; one its answer (return, deny) sets is
// compared.
func (d *deriver) requestRule(w []string, _ string) {
	switch {
	case len(w) >= 3 && slices.Contains(headerActions, w[1]):
		d.forged.Set(w[2], "client-value")
	case len(w) >= 2 && answering[w[1]]:
		for i := 2; i+1 < len(w); i++ {
			switch w[i] {
			case "content-type":
				d.respHeaders["Content-Type"] = true
			case "hdr":
				d.respHeaders[http.CanonicalHeaderKey(w[i+1])] = true
			}
		}
	case len(w) >= 2 && w[1] == "redirect":
		d.redirect(w[1:], "")
	}
}

// redirect compares the cookie a redirect sets or clears.
func (d *deriver) redirect(w []string, _ string) {
	if slices.Contains(w, "set-cookie") || slices.Contains(w, "clear-cookie") {
		d.respHeaders["Set-Cookie"] = true
	}
}

// responseRule takes an http-response or http-after-response rule's
// header, compared, and derives a request whose server answers it.
func (d *deriver) responseRule(w []string, at string) {
	if len(w) >= 3 && slices.Contains(headerActions, w[1]) {
		d.respHeaders[http.CanonicalHeaderKey(w[2])] = true
		d.serverAnswers(w, at+": "+strings.Join(w, " "))
	}
}

// option takes option forwardfor's header, forged by the client.
func (d *deriver) option(w []string, _ string) {
	if len(w) < 2 || w[1] != "forwardfor" {
		return
	}
	if i := slices.Index(w, "header"); i > 0 && i+1 < len(w) {
		d.forged.Set(w[i+1], "203.0.113.9")
	}
}

// uri derives a GET of the stats or monitor URI.
func (d *deriver) uri(w []string, at string) {
	if len(w) < 2 {
		return
	}
	if uri := w[len(w)-1]; (w[0] == "monitor-uri" || w[1] == "uri") && strings.HasPrefix(uri, "/") {
		d.add(Request{Method: http.MethodGet, Target: uri}, at+": "+strings.Join(w, " "))
	}
}

// answering are the http-request actions whose content-type and hdr
// options set headers of the proxy's own answer.
var answering = map[string]bool{"return": true, "deny": true}

type deriver struct {
	reqs  []Request
	seen  map[string]int // the index of each request, by Key
	notes []string
	vars  map[string]string // the section's set-var samples, by variable
	acls  map[string]*test  // the section's named ACLs' tests, by name
	// forged are the request headers the client sends forged, the
	// configuration's own among them; respHeaders the response headers
	// compared.
	forged      http.Header
	respHeaders map[string]bool
	// accounts are the userlists' accounts an http_auth ACL's requests
	// send, by userlist.
	accounts map[string]userlistAccount
}

func (d *deriver) add(r Request, why string) {
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	if r.Host == "" {
		r.Host = DefaultHost
	}
	if r.Target == "" {
		r.Target = "/"
	}
	k := r.Key()
	if i, ok := d.seen[k]; ok {
		d.reqs[i].Why = append(d.reqs[i].Why, why)
		return
	}
	r.Why = []string{why}
	d.seen[k] = len(d.reqs)
	d.reqs = append(d.reqs, r)
}

// serverAnswers derives, for a rule that rewrites a header of what a
// server answers (replace-header, replace-value), a request whose server
// answers that header (RespondHeader): a line the expression matches
// where one is generated, a cookie-like line and one of two values.
func (d *deriver) serverAnswers(w []string, why string) {
	if len(w) < 5 || w[1] != "replace-header" && w[1] != "replace-value" {
		return
	}
	var lines []string
	if v, ok := Generate(w[3], false); ok && !strings.ContainsAny(v, "\r\n") {
		lines = append(lines, w[2]+": "+v)
	}
	lines = append(lines, w[2]+": hadiff=1; Path=/", w[2]+": hadiff, other")
	d.add(Request{Header: http.Header{RespondHeader: lines}}, why+" (the server answers the header)")
}

// derive adds the default request with changes made, in order (a nil
// one: nothing to change).
func (d *deriver) derive(why string, changes ...change) {
	var r Request
	for _, c := range changes {
		if c != nil {
			c(&r)
		}
	}
	d.add(r, why)
}

// condition is the index of a line's if or unless, 0 if none.
func condition(w []string) int {
	if w[0] == "acl" {
		return 0
	}
	for i := 1; i < len(w); i++ {
		if w[i] == "if" || w[i] == "unless" {
			return i
		}
	}
	return 0
}

// condTerm is one test of a condition, negated or not.
type condTerm struct {
	neg bool
	t   *test
}

// change is the first change that makes the term truth (nil: none).
func (t condTerm) change(truth bool) change {
	cs := t.t.in
	if truth == t.neg {
		cs = t.t.out
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}

// condition derives requests from a rule's condition: per alternative
// (|| or or), every test true, then each made false in turn.
func (d *deriver) condition(words []string, why string) {
	for ai, alt := range d.alternatives(words, why) {
		var all []change
		for _, t := range alt {
			all = append(all, t.change(true))
		}
		d.derive(fmt.Sprintf("%s (alternative %d, every test true)", why, ai+1), all...)
		for ti := range alt {
			var one []change
			for tj, t := range alt {
				one = append(one, t.change(ti != tj))
			}
			d.derive(fmt.Sprintf("%s (alternative %d, test %d false)", why, ai+1, ti+1), one...)
		}
	}
}

// alternatives are a condition's alternatives, each its tests: a named
// ACL's, or an anonymous one's ({ … }, whose note is noted with why).
func (d *deriver) alternatives(words []string, why string) [][]condTerm {
	var alts [][]condTerm
	var cur []condTerm
	for i := 0; i < len(words); i++ {
		w, neg := words[i], false
		if w == "||" || w == "or" {
			alts, cur = append(alts, cur), nil
			continue
		}
		if w == "!" {
			neg = true
			if i++; i >= len(words) {
				break
			}
			w = words[i]
		} else if strings.HasPrefix(w, "!") {
			neg, w = true, w[1:]
		}
		if w == "{" {
			end := slices.Index(words[i:], "}")
			if end < 0 {
				break
			}
			t, note := d.aclTest(words[i+1 : i+end])
			if note != "" {
				d.notes = append(d.notes, why+": "+note)
			}
			cur = append(cur, condTerm{neg, &t})
			i += end
			continue
		}
		if t, ok := d.acls[w]; ok {
			cur = append(cur, condTerm{neg, t})
		} else {
			// An ACL of the defaults or a predefined one (TRUE, HTTP, …):
			// nothing to derive.
			cur = append(cur, condTerm{neg, &test{}})
		}
	}
	return append(alts, cur)
}

// aclTest is what an ACL's fetch, flags and values (the words after its
// name, or inside { }) derive: its values' requests (in) and near misses
// (out). A fetch it cannot derive a request for gives a note.
func aclTest(w []string, encode func(string) string) (test, string) {
	a, note := readACL(w)
	if note != "" {
		return test{}, note
	}
	subject, arg, match := fetchSubject(a.fetch, a.match)
	switch subject {
	case "ssl_fc", "ssl_fc_sni", "ssl_sni":
		return test{}, "" // the request is sent with and without TLS where a bind has it
	case "method":
		return methodTest(a.values), ""
	case "src":
		return srcTest(a.fetch, a.values)
	case "path", "url", "hdr", "urlp", "cook":
	default:
		return test{}, fmt.Sprintf("fetch %s: not derived", a.fetch)
	}
	if (subject == "hdr" || subject == "urlp" || subject == "cook") && arg == "" {
		return test{}, fmt.Sprintf("fetch %s without a name: not derived", a.fetch)
	}
	sep := ""
	if subject == "path" || subject == "url" {
		sep = "/"
	}
	return valuesTest(a, match, sep, valueSetter(subject, arg, encode))
}

// aclWords are an ACL's words read: its fetch, its flags, its values.
type aclWords struct {
	fetch       string
	insensitive bool     // -i
	match       string   // -m's method, "" without
	values      []string // as written, then those of its -f files
}

// readACL reads an ACL's fetch, flags and values (a pattern file's
// too); a pattern file it cannot read, or a map file, gives a note.
func readACL(w []string) (aclWords, string) {
	a := aclWords{fetch: w[0]}
	for i := 1; i < len(w); i++ {
		switch {
		case w[i] == "-i":
			a.insensitive = true
		case w[i] == "-m" && i+1 < len(w):
			i++
			a.match = w[i]
		case w[i] == "-f" && i+1 < len(w):
			i++
			b, err := os.ReadFile(w[i])
			if err != nil {
				return a, fmt.Sprintf("%s -f %s: %v: not derived", a.fetch, w[i], err)
			}
			a.values = append(a.values, haproxy.Patterns(b)...)
		case w[i] == "-M":
			return a, fmt.Sprintf("%s with a map file: not derived", a.fetch)
		case w[i] == "-n" || w[i] == "--":
		default:
			// The first word that is no flag begins the values.
			a.values = append(a.values, w[i:]...)
			return a, ""
		}
	}
	return a, ""
}

// matchSuffixes are the suffixes of a fetch's name that name its match
// method.
var matchSuffixes = []string{"beg", "end", "sub", "reg", "dom", "dir", "str", "len", "cnt", "ip", "val", "found"}

// fetchSubject is what a fetch reads (path, hdr, …), its first argument
// (a header's, parameter's or cookie's name) and its match method, -m's
// (given) or else its name's suffix: path_beg is path, -m beg; str if
// neither says.
func fetchSubject(fetch, given string) (subject, arg, match string) {
	subject, match = fetch, given
	if open := strings.Index(fetch, "("); open > 0 && strings.HasSuffix(fetch, ")") {
		subject, arg = fetch[:open], fetch[open+1:len(fetch)-1]
		if c := strings.IndexByte(arg, ','); c >= 0 {
			arg = arg[:c]
		}
	}
	subject = strings.TrimPrefix(subject, "req.")
	if base, suffix, ok := strings.Cut(subject, "_"); ok && match == "" && slices.Contains(matchSuffixes, suffix) {
		subject, match = base, suffix
	}
	if subject == "fhdr" {
		subject = "hdr"
	}
	if match == "" {
		match = "str"
	}
	return subject, arg, match
}

// methodTest is a method ACL's test: a request of each method (in).
func methodTest(methods []string) test {
	var t test
	for _, m := range methods {
		t.in = append(t.in, func(r *Request) { r.Method = m })
	}
	return t
}

// valueSetter is how a request sends a value of the subject: a path or
// URL as the target (with its leading slash), a URL parameter as the
// query, a cookie in Cookie, a header (Host as the request's host);
// encode first makes the value what is sent.
func valueSetter(subject, arg string, encode func(string) string) func(string) change {
	return func(v string) change {
		v = encode(v)
		switch subject {
		case "path", "url":
			if !strings.HasPrefix(v, "/") {
				v = "/" + v
			}
			return func(r *Request) { r.Target = v }
		case "urlp":
			return func(r *Request) { r.Target = "/?" + arg + "=" + v }
		case "cook":
			return func(r *Request) { r.setHeader("Cookie", arg+"="+v) }
		}
		if strings.EqualFold(arg, "host") {
			return func(r *Request) { r.Host = v }
		}
		return func(r *Request) { r.setHeader(arg, v) }
	}
}

// valuesTest is the test of an ACL's values matched by method match:
// each value's variants sent by set. A value whose variants are not
// derived ends it with a note, the values before it kept.
func valuesTest(a aclWords, match, sep string, set func(string) change) (test, string) {
	values := a.values
	if match == "found" {
		values = []string{""} // one request that has it, whatever its value
	}
	var t test
	for _, v := range values {
		in, out, ok := variants(match, v, sep, a.insensitive)
		if !ok {
			return t, fmt.Sprintf("%s -m %s %s: not derived", a.fetch, match, v)
		}
		for _, s := range in {
			t.in = append(t.in, set(s))
		}
		for _, s := range out {
			if s != "" {
				t.out = append(t.out, set(s))
			}
		}
	}
	return t, ""
}

// variants are the values of a subject that the ACL value v matches by
// method match (in), and near misses (out): a prefix one byte short, the
// value in the other case (in with -i, out without), a path's letter
// percent-encoded (sep "/": HAProxy matches a path as sent). A found
// test is in with any value. ok is false for a method not derived, or an
// expression no match is generated for.
func variants(match, v, sep string, insensitive bool) (in, out []string, ok bool) {
	switch match {
	case "found":
		return []string{"hadiff"}, nil, true
	case "str":
		in, out = []string{v}, []string{v + "x"}
	case "beg":
		in, out = []string{v, strings.TrimSuffix(v, sep) + sep + "x"}, []string{shorter(v)}
	case "end":
		in, out = []string{sep + "x" + v}, []string{sep + "x" + shorter(v)}
	case "sub":
		in, out = []string{sep + "x" + v + "x"}, []string{sep + "x" + shorter(v)}
	case "dir":
		in, out = []string{v, strings.TrimSuffix(v, "/") + "/x"}, []string{v + "x"}
	case "dom":
		in, out = []string{v, "www." + v}, []string{"x" + v}
	case "reg":
		s, ok := Generate(v, insensitive)
		return []string{s}, nil, ok
	default:
		return nil, nil, false
	}
	if other := swapCase(v); other != v {
		if insensitive {
			in = append(in, strings.Replace(in[0], v, other, 1))
		} else {
			out = append(out, strings.Replace(in[0], v, other, 1))
		}
	}
	if encoded := encodeLetter(in[0]); sep == "/" && encoded != in[0] {
		out = append(out, encoded)
	}
	return in, out, true
}

// setBasicAuth gives the request Basic credentials.
func (r *Request) setBasicAuth(user, password string) {
	req := http.Request{Header: http.Header{}}
	req.SetBasicAuth(user, password)
	r.setHeader("Authorization", req.Header.Get("Authorization"))
}

func (r *Request) setHeader(name, value string) {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(name, value)
}

// encodeLetter is v with its first ASCII letter percent-encoded.
func encodeLetter(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x80 && unicode.IsLetter(rune(c)) {
			return fmt.Sprintf("%s%%%02X%s", v[:i], c, v[i+1:])
		}
	}
	return v
}

// shorter is v less its last byte: a prefix one byte short.
func shorter(v string) string {
	if len(v) <= 1 {
		return v + "x"
	}
	return v[:len(v)-1]
}

// swapCase is v with each letter's case swapped.
func swapCase(v string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, v)
}

// srcTest is what a src ACL's values derive: a loopback client address
// each matches (in), and one that none matches (out), so that a rule on
// the client's address (a tcp-request connection reject, a deny from
// outside a network) is sent both ways where loopback allows.
func srcTest(fetch string, values []string) (test, string) {
	var t test
	for _, v := range values {
		if from, ok := loopbackIn(v); ok {
			t.in = append(t.in, func(r *Request) { r.From = from })
		}
	}
	if from, ok := loopbackOut(values); ok {
		t.out = append(t.out, func(r *Request) { r.From = from })
	}
	switch {
	case len(t.in) == 0:
		return t, fmt.Sprintf("%s %s: no loopback address matches, only the out side sent", fetch, strings.Join(values, " "))
	case len(t.out) == 0:
		return t, fmt.Sprintf("%s %s: every loopback address matches, only the in side sent", fetch, strings.Join(values, " "))
	}
	return t, ""
}

// srcPrefix is a src value as a range (an address is one of one).
func srcPrefix(v string) (netip.Prefix, bool) {
	if !strings.Contains(v, "/") {
		v += "/32"
	}
	p, err := netip.ParsePrefix(v)
	return p, err == nil && p.Addr().Is4()
}

// fromAddr is a client address as Request.From says it: "" for
// 127.0.0.1, the default client's.
func fromAddr(a netip.Addr) string {
	if a == netip.MustParseAddr("127.0.0.1") {
		return ""
	}
	return a.String()
}

// loopbackIn is a client address of 127.0.0.0/8 that the src value v
// matches, if any: 127.0.0.2 or 127.0.0.1 where the range holds them,
// else its first address after the network's (its only one for a /32).
func loopbackIn(v string) (string, bool) {
	p, ok := srcPrefix(v)
	switch {
	case !ok:
		return "", false
	case p.Contains(netip.MustParseAddr("127.0.0.2")):
		return "127.0.0.2", true
	case p.Contains(netip.MustParseAddr("127.0.0.1")):
		return "", true
	case !netip.MustParsePrefix("127.0.0.0/8").Contains(p.Masked().Addr()):
		return "", false
	}
	if a := p.Masked().Addr(); p.Bits() < 32 {
		return fromAddr(a.Next()), true
	}
	return fromAddr(p.Addr()), true
}

// outCandidates are the loopback addresses loopbackOut tries, in order.
var outCandidates = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.1.1", "127.1.0.1", "127.255.255.254"}

// loopbackOut is a client address of 127.0.0.0/8 that no src value
// matches, if any.
func loopbackOut(values []string) (string, bool) {
	for _, c := range outCandidates {
		a := netip.MustParseAddr(c)
		if !slices.ContainsFunc(values, func(v string) bool { p, ok := srcPrefix(v); return ok && p.Contains(a) }) {
			return fromAddr(a), true
		}
	}
	return "", false
}

// Generate makes a string that the regular expression expr matches (a
// simple one: literals, classes, repetitions, alternations), checked
// with Go's regexp (RE2; HAProxy's is PCRE, which agrees on these). It
// reports false if it cannot.
func Generate(expr string, insensitive bool) (string, bool) {
	flags := syntax.Perl
	if insensitive {
		flags |= syntax.FoldCase
	}
	re, err := syntax.Parse(expr, flags)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !generate(re.Simplify(), &b) {
		return "", false
	}
	s := b.String()
	if !strings.HasPrefix(s, "/") && regexp.MustCompile(expr).MatchString("/"+s) {
		s = "/" + s // a path begins with a slash
	}
	if prefix := "(?i)"; insensitive {
		expr = prefix + expr
	}
	if !regexp.MustCompile(expr).MatchString(s) {
		return "", false
	}
	return s, true
}

// generate writes to b a string that re matches: the fewest repetitions
// and the first alternative. It reports false for an operator it does
// not generate.
func generate(re *syntax.Regexp, b *strings.Builder) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
		return true
	case syntax.OpCharClass:
		return generateClass(re.Rune, b)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
		return true
	case syntax.OpCapture, syntax.OpPlus, syntax.OpAlternate:
		return generate(re.Sub[0], b)
	case syntax.OpRepeat:
		return generateEach(slices.Repeat(re.Sub[:1], re.Min), b)
	case syntax.OpConcat:
		return generateEach(re.Sub, b)
	}
	return false
}

// generateEach generates each of subs in turn.
func generateEach(subs []*syntax.Regexp, b *strings.Builder) bool {
	for _, s := range subs {
		if !generate(s, b) {
			return false
		}
	}
	return true
}

// generateClass writes to b a rune of the class (its ranges, pairs of
// bounds): its first printable ASCII letter, digit, '-' or '.', else its
// first. It reports false for an empty class.
func generateClass(ranges []rune, b *strings.Builder) bool {
	if len(ranges) < 2 {
		return false
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r < 0x7f; r++ {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '.' {
				b.WriteRune(r)
				return true
			}
		}
	}
	b.WriteRune(ranges[0])
	return true
}

// Hosts are the host names the requests send, for a certificate that
// names them all.
func Hosts(reqs []Request) []string {
	var out []string
	for _, r := range reqs {
		h := strings.ToLower(r.Host)
		if net.ParseIP(h) == nil && h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
