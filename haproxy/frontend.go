package haproxy

import (
	"net"
	"net/netip"
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
	acls            map[string][]acl  // named ACLs: each line an alternative
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
	// What resolve settled.
	certs      siteCerts
	forwarding forwarding
	ownPages   []string // the statuses answered with HAProxy's own page (errorpages.go)
	formatMaps []string // the map-made placeholders its rules use (logformat.go)
}

// answerRule is a rule that answers the client itself: its directive, when
// its condition (nil: always) holds.
type answerRule struct {
	line   Line
	cond   *Condition
	answer answer
	when   matcher // the condition, resolved
}

// useBackend is a use_backend rule: its backend, when its condition holds.
type useBackend struct {
	line    Line
	cond    *Condition
	backend *backend
	when    matcher // the condition, resolved ("true" without one)
	note    string  // what the comment of its line says
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

// headerRule is an http-request or http-response del-header, set-header
// or add-header, when its condition (nil: always) holds.
type headerRule struct {
	line     Line
	op, name string
	v        logFormat
	cond     *Condition
	when     matcher // the condition, resolved
}

// forwardedHeaders are the headers the forwarded handler removes from a
// client and writes itself.
var forwardedHeaders = map[string]bool{"forwarded": true, "x-forwarded-for": true, "x-forwarded-proto": true, "x-forwarded-host": true}

// hasServers tells whether s is a listen section with servers of its own:
// a frontend and a backend in one.
func hasServers(s *Section) bool {
	return s.Kind == "listen" && slices.ContainsFunc(s.Lines, func(l Line) bool { return l.Words[0] == "server" })
}

// readFrontend reads the frontend or listen section s: its lines, each
// refused one recorded, with the backends it sends to, then what they
// say together.
func (t *translator) readFrontend(s *Section) (*frontend, error) {
	fe := &frontend{section: s, timeouts: map[string]string{}, acls: map[string][]acl{}, usedACLs: map[Position]bool{}, global: &t.global, cfg: t.cfg}
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
	refused := t.refused.count()
	for _, l := range t.settingsOf(s) {
		t.refused.add(t.readFrontendSetting(fe, l))
	}
	if hasServers(s) {
		t.refused.add(t.readOwnServers(fe))
	}
	if t.refused.count() > refused {
		return nil, errRefused
	}
	if len(fe.binds) == 0 {
		return nil, errAt(s.Pos, "%s %s has no bind line", s.Kind, s.Name)
	}
	for _, be := range fe.backends() {
		if err := t.checkBackendStats(fe, be); err != nil {
			return nil, err
		}
		if err := be.checkFrontend(fe); err != nil {
			return nil, err
		}
	}
	return fe, fe.resolve()
}

// readFrontendSetting reads one of the frontend's settings: its own, or
// its defaults' of its side (the others noted as another side's), and
// the backend a use_backend or default_backend line names.
func (t *translator) readFrontendSetting(fe *frontend, l Line) error {
	s := fe.section
	if keywordSide(l) == backendSide && hasServers(s) {
		return nil // the listen's own backend's (see readOwnServers)
	}
	if !ownLine(s, l) && keywordSide(l) == backendSide {
		fe.note(l, fromDefaultsNote(l, s.Kind))
		return nil
	}
	if err := fe.read(l); err != nil {
		return err
	}
	switch l.Words[0] {
	case "use_backend":
		return t.readUseBackend(fe, l)
	case "default_backend":
		be, err := t.namedBackend(l, arg(l, 1))
		fe.backend = be
		return err
	}
	return nil
}

// readUseBackend reads a use_backend rule with the backend it names.
func (t *translator) readUseBackend(fe *frontend, l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	if len(words) != 2 {
		return refuse(l, "takes a backend's name and, maybe, an if or unless condition")
	}
	rule := useBackend{line: l, cond: cond}
	if rule.backend, err = t.namedBackend(l, words[1]); err != nil {
		return err
	}
	fe.rules = append(fe.rules, rule)
	return nil
}

// namedBackend reads the backend section that line l names.
func (t *translator) namedBackend(l Line, name string) (*backend, error) {
	s := t.cfg.Section("backend", name)
	if s == nil {
		return nil, refuse(l, "no backend section of that name")
	}
	return t.readBackend(s)
}

// readOwnServers reads the servers of a listen section: a frontend and a
// backend in one, what no use_backend rule takes going to its own
// servers.
func (t *translator) readOwnServers(fe *frontend) error {
	s := fe.section
	if fe.backend != nil {
		return errAt(s.Pos, "listen %s has servers and a default_backend, which its servers would never get: not translated", s.Name)
	}
	var err error
	fe.backend, err = t.readBackend(s)
	return err
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
	a, err := readACL(w[2:], l)
	if err != nil {
		return err
	}
	fe.acls[w[1]] = append(fe.acls[w[1]], a)
	fe.aclLines = append(fe.aclLines, l)
	return nil
}

func (fe *frontend) readRedirect(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	a, err := redirectAnswer(words[1:], l)
	if err != nil {
		return err
	}
	fe.redirects = append(fe.redirects, answerRule{line: l, cond: cond, answer: a})
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

// httpRequest reads an http-request rule through the actions' registry.
func (fe *frontend) httpRequest(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	a := requestActions[arg(l, 1)]
	if a == nil {
		return refuse(l, "http-request %s is not translated yet", arg(l, 1))
	}
	if cond != nil && !a.conditional {
		return refuse(l, "conditions are not translated yet")
	}
	return a.read(fe, l, words[2:], cond)
}

func (fe *frontend) readTrack(l Line, args []string, cond *Condition) error {
	if len(args) != 1 || args[0] != "src" || cond != nil {
		return refuse(l, "only http-request track-sc0 src (without a table or a condition) is translated")
	}
	if fe.stickTable == nil {
		return refuse(l, "no stick-table in this frontend before it")
	}
	fe.track = &l
	fe.note(l, "the edge_rate_limit below counts each client address")
	return nil
}

// readAnswer reads a rule that answers the client itself (deny, return,
// redirect), or a deny over the tracked rate: an edge_rate_limit.
func (fe *frontend) readAnswer(l Line, args []string, cond *Condition) error {
	op := arg(l, 1)
	if limit, ok := rateLimit(cond); ok && op == "deny" {
		a, err := fe.rateLimitAnswer(args, limit, l)
		if err != nil {
			return err
		}
		fe.answers = append(fe.answers, answerRule{line: l, answer: a})
		fe.rateLimited = &l
		return nil
	}
	a, err := answerReaders[op](args, l)
	if err != nil {
		return err
	}
	fe.answers = append(fe.answers, answerRule{line: l, cond: cond, answer: a})
	return nil
}

// answerReaders read each answering action.
var answerReaders = map[string]func(args []string, l Line) (answer, error){
	"deny": denyAnswer, "return": returnAnswer, "redirect": redirectAnswer,
}

func (fe *frontend) readRequestHeader(l Line, args []string, cond *Condition) error {
	h, err := headerRuleOf(l, args)
	if err != nil {
		return err
	}
	h.cond = cond
	fe.headers = append(fe.headers, h)
	return nil
}

// headerRuleOf reads del-header <name>, set-header and add-header <name>
// <value>, a log-format value.
func headerRuleOf(l Line, args []string) (headerRule, error) {
	op := arg(l, 1)
	if op == "del-header" {
		if len(args) != 1 {
			return headerRule{}, refuse(l, "takes a header name")
		}
		return headerRule{line: l, op: op, name: args[0]}, nil
	}
	if len(args) != 2 {
		return headerRule{}, refuse(l, "takes a header name and a value")
	}
	h := headerRule{line: l, op: op, name: args[0]}
	var err error
	h.v, err = readLogFormat(args[1], l)
	return h, err
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

// hostPort checks an address HAProxy listens on or connects to.
func hostPort(a string, pos Position) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return "", errAt(pos, "%q: want host:port", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", errAt(pos, "%q: want a port from 1 to 65535 (no name, range or offset)", a)
	}
	if host == "*" {
		host = ""
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() != "" || err != nil && strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "" {
		return "", errAt(pos, "%q: want an IP address (without a zone) or a host name (letters, digits, '.', '-' and '_') before the port", a)
	}
	return net.JoinHostPort(host, port), nil
}
