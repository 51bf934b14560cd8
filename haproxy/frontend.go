package haproxy

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// frontend is what a frontend section becomes: a site, and the servers
// settings of its listeners.
type frontend struct {
	section *Section
	lines   []Line // its settings and the global base directories, where its values come from
	mode    *Line  // the mode line that holds (mode http)
	binds   []bind
	// Client-side timeouts (servers timeouts), by Caddy's name.
	timeouts     map[string]string
	timeoutLines []Line
	notes        []note // lines translated into no directive of their own
	headers      []headerRule
	// http-response header rules, which every backend's reverse_proxy
	// applies after the backend's own.
	responseHeaders []headerRule
	forwardFor      *Line
	// option forwardfor without the client's X-Forwarded-For deleted:
	// reverse_proxy's own X-Forwarded-For, not the forwarded handler.
	plainForwardFor bool
	backendLine     Line
	backend         *backend
	acls            map[string][]Line // named ACLs: each line an alternative
	cfg             *Config           // where each ACL and rule was written
	aclLines        []Line            // every acl line, in order
	usedACLs        map[Position]bool // acl lines a written condition used
	rules           []useBackend
	// http-request deny, return and redirect, then the redirect rules,
	// each as the directive that answers it.
	answers, redirects []answerRule
	stickTable         *Line                // stick-table type ip … store http_req_rate(<period>)
	ratePeriod         string               // that period, as a Caddy duration
	track              *Line                // http-request track-sc0 src
	rateLimited        *Line                // the deny over the tracked rate
	errorPages         map[string]errorPage // by status: a later errorfile wins
	stats              *statsPage           // HAProxy's stats page, as ha_status
	maxconn            *Line                // maxconn <n>: max_connections
	log                proxyLog             // log global, option httplog and the like
	global             *global              // the global section's logs and TLS defaults
}

// answerRule is a rule that answers the client itself: its directive, when
// its condition (nil: always) holds.
type answerRule struct {
	line       Line
	cond       *Condition
	directives []string // with matcherMark where the matcher goes
}

// useBackend is a use_backend rule: its backend, when its condition holds.
type useBackend struct {
	line    Line
	cond    *Condition
	backend *backend
}

// note is a line kept as a comment, with what became of it.
type note struct {
	line Line
	what string
	// approximated: the line is translated, but not exactly as HAProxy
	// runs it (what says how it differs): a Warning too.
	approximated bool
}

type bind struct {
	line  Line
	addr  string   // host:port, host empty for every address
	crts  []string // each crt, in order; none without ssl
	alpn  []string
	isTLS bool
}

// headerRule is an http-request del-header, set-header or add-header.
type headerRule struct {
	line        Line
	op, name, v string
}

// write writes the rule, after its line as a comment, as directive
// (request_header, header_down): -name, name value or +name value.
func (h headerRule) write(c *caddyfile, directive string) {
	c.comment(h.line, "")
	switch h.op {
	case "del-header":
		c.line("%s -%s", directive, c.name(h.name))
	case "set-header":
		c.line("%s %s %s", directive, c.name(h.name), c.literal(h.v))
	case "add-header":
		c.line("%s +%s %s", directive, c.name(h.name), c.literal(h.v))
	}
}

// forwardedHeaders are the headers the forwarded handler removes from a
// client and writes itself.
var forwardedHeaders = map[string]bool{"forwarded": true, "x-forwarded-for": true, "x-forwarded-proto": true, "x-forwarded-host": true}

// hasServers tells whether s is a listen section with servers of its own:
// a frontend and a backend in one.
func hasServers(s *Section) bool {
	return s.Kind == "listen" && slices.ContainsFunc(s.Lines, func(l Line) bool { return l.Words[0] == "server" })
}

func (t *translator) readFrontend(s *Section) (*frontend, error) {
	fe := &frontend{section: s, timeouts: map[string]string{}, acls: map[string][]Line{}, usedACLs: map[Position]bool{}, global: &t.global, cfg: t.cfg}
	if len(s.Args) > 0 {
		return nil, errAt(s.Pos, "%s %s: an address after the name: write it as a bind line (HAProxy refuses it too)", s.Kind, s.Name)
	}
	fe.lines = t.settingsOf(s)
	if t.global.crtBase != nil {
		fe.lines = append(fe.lines, *t.global.crtBase)
	}
	var err error
	if fe.mode, err = proxyMode(s, fe.lines); err != nil {
		return nil, err
	}
	if fe.stats, fe.notes, err = t.readStats(s); err != nil {
		return nil, err
	}
	for _, l := range t.settingsOf(s) {
		if keywordSide(l) == backendSide && hasServers(s) {
			continue // the listen's own backend's (see below)
		}
		if !ownLine(s, l) && keywordSide(l) == backendSide {
			fe.note(l, fromDefaultsNote(l, s.Kind))
			continue
		}
		if err := fe.read(l); err != nil {
			return nil, err
		}
		if l.Words[0] == "use_backend" {
			words, cond, err := SplitCondition(l.Words, l.Pos)
			if err != nil {
				return nil, err
			}
			if len(words) != 2 {
				return nil, refuse(l, "takes a backend's name and, maybe, an if or unless condition")
			}
			be := t.cfg.Section("backend", words[1])
			if be == nil {
				return nil, refuse(l, "no backend section of that name")
			}
			rule := useBackend{line: l, cond: cond}
			if rule.backend, err = t.readBackend(be); err != nil {
				return nil, err
			}
			fe.rules = append(fe.rules, rule)
		}
		if l.Words[0] == "default_backend" {
			be := t.cfg.Section("backend", arg(l, 1))
			if be == nil {
				return nil, refuse(l, "no backend section of that name")
			}
			var err error
			if fe.backend, err = t.readBackend(be); err != nil {
				return nil, err
			}
		}
	}
	if hasServers(s) {
		// A listen section with servers is a frontend and a backend in
		// one: what no use_backend rule takes goes to its own servers.
		if fe.backend != nil {
			return nil, errAt(s.Pos, "listen %s has servers and a default_backend, which its servers would never get: not translated", s.Name)
		}
		if fe.backend, err = t.readBackend(s); err != nil {
			return nil, err
		}
	}
	if len(fe.binds) == 0 {
		return nil, errAt(s.Pos, "%s %s has no bind line", s.Kind, s.Name)
	}
	// Without a default_backend (a port-80 frontend that only redirects to
	// HTTPS, say), what no rule takes is answered 503, as HAProxy answers
	// it (writeSiteBody).
	for _, be := range fe.backends() {
		if err := t.checkBackendStats(fe, be); err != nil {
			return nil, err
		}
		if err := be.checkFrontend(fe); err != nil {
			return nil, err
		}
	}
	return fe, nil
}

func (fe *frontend) readMode(l Line) error {
	what, err := modeNote(l, fe.mode, "Caddy's HTTP server")
	if err != nil {
		return err
	}
	fe.note(l, what)
	return nil
}

// readKeywordNote notes a line of one word after its keyword as its
// entry says (an approximation a Warning too); the keyword's other forms
// are not translated.
func (fe *frontend) readKeywordNote(l Line) error {
	n, err := keywordNote(l, "Caddy keeps client connections alive by default")
	if err != nil {
		return err
	}
	fe.notes = append(fe.notes, n)
	return nil
}

func (fe *frontend) readLog(l Line) error { return fe.log.read(l) }

func (fe *frontend) readErrorFile(l Line) error {
	p, err := readErrorFile(fe.cfg.files(), l)
	if err != nil {
		return err
	}
	if fe.errorPages == nil {
		fe.errorPages = map[string]errorPage{}
	}
	fe.errorPages[l.Words[1]] = p
	return nil
}

func (fe *frontend) readResponseHeader(l Line) error {
	r, err := responseHeader(l)
	fe.responseHeaders = append(fe.responseHeaders, r)
	return err
}

func (fe *frontend) readForwardFor(l Line) error {
	if err := checkForwardFor(l); err != nil {
		return err
	}
	fe.forwardFor = &l
	return nil
}

func (fe *frontend) readACL(l Line) error {
	w := l.Words
	if _, boolean := boolFetches[arg(l, 2)]; len(w) < 4 && !(boolean && len(w) == 3) {
		return refuse(l, "takes a name, a fetch and at least one value")
	}
	if _, err := aclExpression(w[2:], l); err != nil {
		return err
	}
	fe.acls[w[1]] = append(fe.acls[w[1]], l)
	fe.aclLines = append(fe.aclLines, l)
	return nil
}

func (fe *frontend) readRedirect(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	d, err := redirectDirective(words[1:], l)
	if err != nil {
		return err
	}
	fe.redirects = append(fe.redirects, answerRule{l, cond, d})
	return nil
}

// readByStatsPage takes a stats line, which readStats reads as the page.
func readByStatsPage(*frontend, Line) error { return nil }

// readUseBackend takes a use_backend line, which readFrontend reads with
// its backend.
func (fe *frontend) readUseBackend(Line) error { return nil }

func (fe *frontend) readDefaultBackend(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes one backend's name")
	}
	fe.backendLine = l
	return nil
}

// proxyMode is the mode line that holds for proxy s (its last, its own or
// its defaults'): mode http, else refused. HAProxy's default is mode tcp.
func proxyMode(s *Section, st settings) (*Line, error) {
	var mode *Line
	for i, l := range st {
		if l.Words[0] == "mode" {
			mode = &st[i]
		}
	}
	switch {
	case mode == nil:
		return nil, refuse(s.line(), "no mode line: HAProxy's default is mode tcp, which is not translated (write mode http in it or in its defaults)")
	case len(mode.Words) != 2:
		return nil, refuse(*mode, "takes one mode")
	case mode.Words[1] != "http":
		return nil, refuse(*mode, "only mode http is translated (Caddy's layer-4 proxying is another module)")
	}
	return mode, nil
}

// modeNote is what becomes of a mode line: what the one that holds
// becomes, or replaced by it; in a defaults section no proxy takes
// (holds nil), any mode HAProxy knows.
func modeNote(l Line, holds *Line, what string) (string, error) {
	if len(l.Words) != 2 || l.Words[1] != "http" && l.Words[1] != "tcp" {
		return "", refuse(l, "takes one mode: http or tcp")
	}
	if holds != nil && holds.Pos != l.Pos {
		return "replaced by the mode at line " + strconv.Itoa(holds.Pos.Line), nil
	}
	return what, nil
}

// backends are the backends the frontend sends to.
func (fe *frontend) backends() []*backend {
	var all []*backend
	if fe.backend != nil {
		all = append(all, fe.backend)
	}
	for _, r := range fe.rules {
		all = append(all, r.backend)
	}
	return all
}

// sendsTo tells whether the frontend sends requests to the backend s.
func (fe *frontend) sendsTo(s *Section) bool {
	if fe.backend != nil && fe.backend.section == s {
		return true
	}
	for _, r := range fe.rules {
		if r.backend.section == s {
			return true
		}
	}
	return false
}

func (fe *frontend) note(l Line, what string) { fe.notes = append(fe.notes, note{line: l, what: what}) }

// clientTimeouts map HAProxy's client-side timeouts to the servers
// timeouts of Caddy; the backend's are read by the backend.
var clientTimeouts = map[string]string{"http-request": "read_header", "http-keep-alive": "idle", "client": "read_body"}

func (fe *frontend) timeout(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "takes a name and a duration")
	}
	d, err := duration(l.Words[2], l.Pos)
	if err != nil {
		return err
	}
	name := l.Words[1]
	switch {
	case clientTimeouts[name] != "":
		fe.timeouts[clientTimeouts[name]] = d
		fe.timeoutLines = append(fe.timeoutLines, l)
	default:
		return refuse(l, "timeout %s is not translated yet", name)
	}
	return nil
}

func (fe *frontend) bind(l Line) error {
	if len(l.Words) < 2 {
		return refuse(l, "needs an address")
	}
	b := bind{line: l}
	for i := 2; i < len(l.Words); i++ {
		o := bindOptions[l.Words[i]]
		if o == nil {
			return refuse(l, "bind option %q is not translated yet", l.Words[i])
		}
		v := ""
		if o.value {
			if i+1 >= len(l.Words) {
				return refuse(l, "%s needs a value", o.name)
			}
			i++
			v = l.Words[i]
		}
		if err := o.read(&b, v, l); err != nil {
			return err
		}
	}
	if b.isTLS && len(b.crts) == 0 {
		return refuse(l, "ssl without crt: Caddy would manage certificates itself, which HAProxy did not")
	}
	for _, a := range strings.Split(l.Words[1], ",") {
		addr, err := hostPort(a, l.Pos)
		if err != nil {
			return err
		}
		b.addr = addr
		fe.binds = append(fe.binds, b)
	}
	return nil
}

func (fe *frontend) httpRequest(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	switch op := arg(l, 1); op {
	case "track-sc0":
		if len(words) != 3 || words[2] != "src" || cond != nil {
			return refuse(l, "only http-request track-sc0 src (without a table or a condition) is translated")
		}
		if fe.stickTable == nil {
			return refuse(l, "no stick-table in this frontend before it")
		}
		fe.track = &l
		fe.note(l, "the edge_rate_limit below counts each client address")
		return nil
	case "deny", "return", "redirect":
		if limit, ok := rateLimit(cond); ok && op == "deny" {
			d, err := fe.rateLimitDirective(words[2:], limit, l)
			if err != nil {
				return err
			}
			fe.answers = append(fe.answers, answerRule{l, nil, d})
			fe.rateLimited = &l
			return nil
		}
		var d []string
		switch op {
		case "deny":
			d, err = denyDirective(words[2:], l)
		case "return":
			d, err = returnDirective(words[2:], l)
		default:
			d, err = redirectDirective(words[2:], l)
		}
		if err != nil {
			return err
		}
		fe.answers = append(fe.answers, answerRule{l, cond, d})
		return nil
	}
	if cond != nil {
		return refuse(l, "conditions are not translated yet")
	}
	switch op := arg(l, 1); op {
	case "del-header":
		if len(words) != 3 {
			return refuse(l, "takes a header name")
		}
		fe.headers = append(fe.headers, headerRule{line: l, op: op, name: words[2]})
	case "set-header", "add-header":
		if len(words) != 4 {
			return refuse(l, "takes a header name and a value")
		}
		if strings.Contains(words[3], "%[") {
			return refuse(l, "log-format expressions in a header value are not translated yet")
		}
		fe.headers = append(fe.headers, headerRule{line: l, op: op, name: words[2], v: words[3]})
	default:
		return refuse(l, "http-request %s is not translated yet", op)
	}
	return nil
}

// writeServers writes the servers option of each listener of the
// frontend; global is the global section's maxconn, nil if none.
func (fe *frontend) writeServers(c *caddyfile, global *Line) {
	for _, b := range fe.binds {
		c.comment(b.line, "")
		for _, l := range fe.timeoutLines {
			c.comment(l, "")
		}
		c.open("servers %s", listener(b.addr))
		fe.writeListenerWrappers(c, global)
		if len(fe.timeouts) > 0 {
			c.open("timeouts")
			for _, name := range []string{"read_header", "read_body", "idle"} {
				if d, ok := fe.timeouts[name]; ok {
					c.line("%s %s", name, d)
				}
			}
			c.close()
		}
		protocols := "h1"
		if b.isTLS && contains(b.alpn, "h2") {
			protocols = "h1 h2"
		}
		c.line("protocols %s", protocols)
		c.close()
	}
}

// listener is a bind address as the servers option names it (":443" for
// every address).
func listener(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" {
		return ":" + port
	}
	return addr
}

// writeSite writes the frontend's site: its addresses, TLS, the
// forwarded headers, and the reverse_proxy of its backend.
func (fe *frontend) writeSite(c *caddyfile) error {
	c.line("")
	c.comment(fe.section.line(), "")
	// HAProxy's bind address is where it listens, never a Host to match:
	// the site is every host on the port, bound to the address's host.
	var plain, secure siteAddrs
	var hosts []string
	var crt *bind
	for i, b := range fe.binds {
		g, scheme := &plain, "http://"
		if b.isTLS {
			g, scheme = &secure, "https://"
			if crt != nil && !slices.Equal(crt.crts, b.crts) {
				return refuse(b.line, "one frontend with two certificates is not translated yet")
			}
			crt = &fe.binds[i]
		}
		host, port, _ := net.SplitHostPort(b.addr)
		if !b.isTLS && port == "443" {
			// Caddy's Caddyfile refuses http://:443 ("scheme and port
			// violate convention"), which HAProxy serves.
			return refuse(b.line, "plain HTTP on port 443 (no ssl on this bind) is not translated: a Caddyfile site cannot serve http:// on port 443; bind another port, or add ssl crt")
		}
		g.addrs = append(g.addrs, c.plainOf(b.line, scheme+":"+port))
		if host != "" {
			hosts = append(hosts, host)
			g.hosts = append(g.hosts, c.plainOf(b.line, host))
		} else if len(hosts) > 0 {
			return refuse(b.line, "binds on every address and on %s in one frontend are not translated yet", hosts[0])
		}
	}
	if len(plain.addrs) == 0 || len(secure.addrs) == 0 {
		site := plain
		if len(plain.addrs) == 0 {
			site = secure
		}
		site.open(c)
		if err := fe.writeSiteBody(c, crt); err != nil {
			return err
		}
		c.close() // the site
		return nil
	}
	// A Caddy server is HTTP or HTTPS: a site for the binds without ssl,
	// one for those with, each importing what the frontend does.
	snippet := "haproxy_" + fe.section.Kind + "_" + fe.section.Name
	c.line("# binds with and without ssl: a site for each (a Caddy server is HTTP or HTTPS), both importing (%s)", snippet)
	c.open("(%s)", snippet)
	if err := fe.writeSiteBody(c, nil); err != nil {
		return err
	}
	c.close()
	plain.open(c)
	c.line("import %s", snippet)
	c.close()
	secure.open(c)
	if err := fe.writeTLS(c, crt); err != nil {
		return err
	}
	c.line("import %s", snippet)
	c.close()
	return nil
}

// siteAddrs are a site's addresses and the hosts it binds.
type siteAddrs struct{ addrs, hosts []string }

func (s siteAddrs) open(c *caddyfile) {
	c.open("%s", strings.Join(s.addrs, ", "))
	if len(s.hosts) > 0 {
		c.line("bind %s", strings.Join(s.hosts, " "))
	}
}

// writeSiteBody writes what the frontend's site does: its notes, its
// log, its TLS (crt, nil for none or for a site of its own), its error
// pages and its route.
func (fe *frontend) writeSiteBody(c *caddyfile, crt *bind) error {
	for _, n := range fe.notes {
		c.note(n)
	}
	fe.log.writeSite(c, fe.global)
	if crt != nil {
		if err := fe.writeTLS(c, crt); err != nil {
			return err
		}
	}
	if _, ok := fe.errorPages["429"]; ok && fe.rateLimited != nil {
		return refuse(*fe.rateLimited, "edge_rate_limit answers 429 itself: not translated with an errorfile 429")
	}
	for _, code := range slices.Sorted(maps.Keys(fe.errorPages)) {
		fe.errorPages[code].write(c)
	}
	answers := append(append([]answerRule{}, fe.answers...), fe.redirects...)
	if len(answers) > 0 || fe.stats != nil {
		// In the order written, as HAProxy runs its rules: the header
		// rules, those that answer, the stats page, the redirect rules,
		// then the backends.
		c.open("route")
	}
	fe.writeHeaders(c)
	if err := fe.writeAnswers(c, fe.answers); err != nil {
		return err
	}
	if fe.stats != nil {
		fe.stats.write(c)
	}
	if err := fe.writeAnswers(c, fe.redirects); err != nil {
		return err
	}
	if err := fe.writeRules(c); err != nil {
		return err
	}
	if fe.backend == nil {
		c.line("# no default_backend: HAProxy answers 503 to what no rule or page took")
		c.line("error 503")
	} else {
		c.comment(fe.backendLine, "")
		if len(fe.rules) > 0 {
			c.open("handle")
		}
		fe.backend.write(c, fe)
		if len(fe.rules) > 0 {
			c.close()
		}
	}
	if len(answers) > 0 || fe.stats != nil {
		c.close()
	}
	return nil
}

// writeAnswers writes rules that answer the client, each with its
// condition's matcher.
func (fe *frontend) writeAnswers(c *caddyfile, answers []answerRule) error {
	for _, a := range answers {
		matcher := ""
		if a.cond != nil {
			expr, lines, err := fe.conditionExpression(a.cond, a.line)
			if err != nil {
				return err
			}
			for _, l := range lines {
				c.comment(l, "")
			}
			matcher = "@answer_" + strconv.Itoa(a.line.Pos.Line)
			c.comment(a.line, "")
			c.line("%s expression `%s`", matcher, expr)
			matcher = " " + matcher
		} else {
			c.comment(a.line, "")
		}
		for _, d := range a.directives {
			c.line("%s", strings.Replace(d, matcherMark, matcher, 1))
		}
	}
	return nil
}

// writeRules writes each use_backend rule as an expression matcher and a
// handle with its backend's reverse_proxy. Caddy keeps handle blocks with
// named matchers in the order written, and runs the first that matches,
// as HAProxy runs the first use_backend whose condition holds; the
// default_backend's handle comes last.
func (fe *frontend) writeRules(c *caddyfile) error {
	for i, r := range fe.rules {
		// A use_backend without a condition always holds: HAProxy runs
		// no rule after it, nor the default_backend.
		expr, lines, note := "true", []Line(nil), ""
		if r.cond == nil && (i < len(fe.rules)-1 || fe.backendLine.Words != nil) {
			note = "without a condition: every request that reaches it, so what follows is never used, as in HAProxy"
		}
		if r.cond != nil {
			var err error
			if expr, lines, err = fe.conditionExpression(r.cond, r.line); err != nil {
				return err
			}
		}
		for _, l := range lines {
			c.comment(l, "")
		}
		c.comment(r.line, note)
		name := "use_backend_" + strconv.Itoa(r.line.Pos.Line)
		c.line("@%s expression `%s`", name, expr)
		c.open("handle @%s", name)
		r.backend.write(c, fe)
		c.close()
	}
	for _, l := range fe.aclLines {
		if !fe.usedACLs[l.Pos] {
			c.comment(l, "used by no rule")
		}
	}
	return nil
}

// writeHeaders writes the header rules: those that make up what the
// forwarded handler does as the forwarded handler, the others as
// request_header.
func (fe *frontend) writeHeaders(c *caddyfile) {
	rest := fe.headers
	if ff := fe.forwardFor; ff != nil && !sendsXFF(ff) {
		h := forwardForHeader(*ff)
		c.comment(*ff, "the client's address in "+h+", after any the client sent, as HAProxy adds it: header_up +"+h+" {remote_host} in each reverse_proxy below, which sends no X-Forwarded-For")
	}
	if ff := fe.forwardFor; sendsXFF(ff) {
		deleted := map[string]bool{}
		proto := ""
		rest = nil
		var used []Line
		for _, h := range fe.headers {
			name := strings.ToLower(h.name)
			switch {
			case h.op == "del-header" && forwardedHeaders[name]:
				deleted[name] = true
				used = append(used, h.line)
			case h.op == "set-header" && name == "x-forwarded-proto" && (h.v == "https" || h.v == "http"):
				proto = h.v
				used = append(used, h.line)
			default:
				rest = append(rest, h)
			}
		}
		if deleted["x-forwarded-for"] {
			// A client's chain deleted, then the client appended: the
			// forwarded handler's chain, which starts afresh at the client.
			for _, l := range used {
				c.comment(l, "")
			}
			c.comment(*ff, "")
			c.open("forwarded")
			if proto != "" {
				c.line("proto %s", proto)
			}
			c.close()
		} else {
			rest = fe.headers
			fe.plainForwardFor = true
			c.comment(*ff, "X-Forwarded-For as HAProxy sends it: what the client sent, which it can forge, then its address (see the reverse_proxy); http-request del-header X-Forwarded-For would make it the forwarded handler's")
		}
	}
	for _, h := range rest {
		h.write(c, "request_header")
	}
}

// checkForwardFor checks an option forwardfor line: [header <name>],
// a name other than those Caddy's reverse_proxy writes or removes itself.
func checkForwardFor(l Line) error {
	if w := l.Words; len(w) != 2 && (len(w) != 4 || w[2] != "header") {
		return refuse(l, "only 'option forwardfor [header <name>]' is translated")
	}
	switch h := strings.ToLower(forwardForHeader(l)); {
	case h != "x-forwarded-for" && (forwardedHeaders[h] || h == "via" || h == "host"):
		return refuse(l, "header %s: not translated (reverse_proxy writes or removes that header itself)", forwardForHeader(l))
	}
	return nil
}

// sendsXFF tells whether an option forwardfor line (nil: none) sends the
// client's address in X-Forwarded-For, as reverse_proxy does by default.
func sendsXFF(ff *Line) bool {
	return ff != nil && strings.EqualFold(forwardForHeader(*ff), "X-Forwarded-For")
}

// forwardForHeader is the header an option forwardfor line adds the
// client's address in: X-Forwarded-For unless it names another.
func forwardForHeader(l Line) string {
	if h := arg(l, 3); h != "" {
		return h
	}
	return "X-Forwarded-For"
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
