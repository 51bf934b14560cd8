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
	aclScope
	rules []useBackend
	// http-request deny, return and redirect, then the redirect rules,
	// each as the directive that answers it.
	answers, redirects []answerRule
	// http-request set-path and the like, which run in order with the
	// answers (written among them) and the header rules (before them).
	pathRewrites    []requestRule
	connectionRules []connectionRule     // tcp-request connection accept and reject
	stickTable      *stickTable          // stick-table … store http_req_rate(<period>), conn_rate(<period>), conn_cur
	trackers        [3]*tracker          // http-request track-sc0, -sc1, -sc2
	rateLimited     *Line                // a deny over a tracked rate
	errorPages      map[string]errorPage // by status: a later errorfile wins
	stats           *statsPage           // HAProxy's stats page, as ha_status
	maxconn         *Line                // maxconn <n>: max_connections
	compression     compression          // compression algo, type, offload
	monitorURI      *Line                // monitor-uri <uri>: HAProxy's own 200 there
	monitorFails    []monitorFail        // monitor fail if|unless <condition>: 503 there instead
	afterResponse   []headerRule         // http-after-response header rules: deferred header
	bufferRequest   *Line                // option http-buffer-request: request_buffers
	log             proxyLog             // log global, option httplog and the like
	uniqueID        uniqueID             // unique-id-format and unique-id-header
	logSkips        []logSkip            // http-request set-log-level silent: log_skip
	global          *global              // the global section's logs and TLS defaults
	userlists       map[string]*userlist // the userlist sections, which http_auth ACLs name
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
	// inFlight, if not 0, is the size of the in_flight table written before
	// the answer, whose count when reads (readInFlightDeny).
	inFlight int
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
	line Line
	addr string   // host:port, host empty for every address
	crts []string // each crt, in order (a crt-list's in its place); none without ssl
	// crtLists are its crt-lists, read into crts as the bind is read.
	crtLists []crtListRef
	alpn     []string
	isTLS    bool
	// acceptProxy: a PROXY header begins each connection (accept-proxy).
	acceptProxy bool
	// tlsOptions are its own TLS options (no-tlsv11, ssl-min-ver TLSv1.2,
	// …), in order, as words of ssl-default-bind-options.
	tlsOptions []string
}

// headerRule is an http-request or http-response del-header, set-header,
// add-header or replace-header, when its condition (nil: always) holds.
type headerRule struct {
	line     Line
	op, name string
	v        logFormat
	// replace-header: each line of the header that find (Go's RE2)
	// matches becomes replace (a template of Go's regexp.Expand).
	find, replace string
	cond          *Condition
	when          matcher // the condition, resolved
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
	fe := &frontend{section: s, timeouts: map[string]string{}, aclScope: newACLScope(t.cfg), global: &t.global, userlists: t.userlists}
	fe.countOf = fe.serverCount
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
		t.reach(l.Pos)
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
	}
	if err := fe.resolve(); err != nil {
		return fe, err
	}
	for _, be := range fe.backends() {
		if err := be.checkFrontend(fe); err != nil {
			return nil, err
		}
	}
	return fe, nil
}

// readFrontendSetting reads one of the frontend's settings: its own, or
// its defaults' of its side (the others noted as another side's), and
// the backend a use_backend or default_backend line names.
func (t *translator) readFrontendSetting(fe *frontend, l Line) error {
	s := fe.section
	if keywordSide(l) == backendSide && hasServers(s) {
		return nil // the listen's own backend's (see readOwnServers)
	}
	// A backend's line of the defaults, or of a listen without servers
	// (a stats page's timeout connect): HAProxy applies it to no server.
	if (!ownLine(s, l) || s.Kind == "listen") && keywordSide(l) == backendSide {
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

func (fe *frontend) readMonitorURI(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes one URI")
	}
	fe.monitorURI = &l
	return nil
}

// monitorFail is a monitor fail rule: the monitor URI is answered 503
// while its condition holds.
type monitorFail struct {
	line Line
	cond *Condition
	when matcher // the condition, resolved
}

// readMonitorFail reads monitor fail if|unless <condition>.
func (fe *frontend) readMonitorFail(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	if len(words) != 2 || cond == nil {
		return refuse(l, "takes if or unless and a condition (HAProxy refuses it otherwise too)")
	}
	fe.monitorFails = append(fe.monitorFails, monitorFail{line: l, cond: cond})
	return nil
}

// readAfterResponse reads an http-after-response header rule, which
// HAProxy applies to every answer, its own included.
func (fe *frontend) readAfterResponse(l Line) error {
	r, err := responseHeader(l)
	if err == nil && r.cond != nil {
		return refuse(l, "conditions are not translated yet")
	}
	fe.afterResponse = append(fe.afterResponse, r)
	return err
}

// readBufferRequest reads [no] option http-buffer-request.
func (fe *frontend) readBufferRequest(l Line) error {
	on, err := bufferRequest(l)
	fe.bufferRequest = on
	return err
}

func (fe *frontend) readResponseHeader(l Line) error {
	if arg(l, 1) == "cache-store" {
		return fe.readCacheUse(l, nil, nil)
	}
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
		return nil, refuse(s.line(), "no mode line: HAProxy's default is mode tcp, which is not translated (write mode http in it or in its defaults; "+splitHint+")")
	case len(mode.Words) != 2:
		return nil, refuse(*mode, "takes one mode")
	case mode.Words[1] != "http":
		return nil, refuse(*mode, "only mode http is translated (Caddy's layer-4 proxying is another module): %s %s stays with HAProxy (%s)", s.Kind, s.Name, splitHint)
	}
	return mode, nil
}

// splitHint is what to do with a mode tcp proxy.
const splitHint = "caddy ha migrate --split-tcp writes the mode tcp proxies out for HAProxy to keep serving"

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
	if err := fe.readCrtLists(&b); err != nil {
		return err
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
	a := requestAction(l)
	if a == nil {
		return refuse(l, "http-request %s is not translated yet", arg(l, 1))
	}
	if a.read == nil {
		return refuse(l, "http-request %s in a frontend is not translated yet (a backend's is)", arg(l, 1))
	}
	if cond != nil && !a.conditional {
		return refuse(l, "conditions are not translated yet")
	}
	return a.read(fe, l, words[2:], cond)
}

// readCacheUse reads http-request cache-use or http-response cache-store
// (see cacheRule).
func (fe *frontend) readCacheUse(l Line, _ []string, _ *Condition) error {
	n, err := cacheRule(l, fe.cfg)
	if err != nil {
		return err
	}
	fe.notes = append(fe.notes, n)
	return nil
}

func (fe *frontend) readFilter(l Line) error {
	n, err := filterNote(l, fe.cfg)
	if err != nil {
		return err
	}
	fe.notes = append(fe.notes, n)
	return nil
}

// readAnswer reads a rule that answers the client itself (deny, return,
// redirect), a deny over the tracked rate: an edge_rate_limit, or over
// the tracked conn_cur: in_flight.
func (fe *frontend) readAnswer(l Line, args []string, cond *Condition) error {
	op := arg(l, 1)
	if op == "deny" {
		if read, err := fe.readCounterDeny(l, args, cond); read || err != nil {
			return err
		}
	}
	a, err := answerReaders[op](args, l, fe.cfg.files())
	if err != nil {
		return err
	}
	fe.answers = append(fe.answers, answerRule{line: l, cond: cond, answer: a})
	return nil
}

// readCounterDeny reads a deny over a counter's test (counterTestOf): of
// conn_cur, an in_flight; of a rate, an edge_rate_limit. It tells whether
// the deny's condition is one.
func (fe *frontend) readCounterDeny(l Line, args []string, cond *Condition) (bool, error) {
	for _, data := range append([]string{"conn_cur"}, rateData...) {
		t, ok, err := fe.counterTestOf(cond, data, l)
		switch {
		case err != nil || !ok:
			if err != nil {
				return true, err
			}
			continue
		case data == "conn_cur" && len(t.rest) > 0:
			return true, refuse(l, "a deny over conn_cur with other terms is not translated: in_flight counts every request from the deny's place")
		case data == "conn_cur":
			return true, fe.readInFlightDeny(l, args, cond, t.counter, t.limit)
		}
		a, err := fe.rateLimitAnswer(args, data, t, l)
		if err != nil {
			return true, err
		}
		r := answerRule{line: l, answer: a}
		if t.acl != nil { // kept above the rule, as a condition's
			r.when.acls = []Line{*t.acl}
			fe.usedACLs[t.acl.Pos] = true
		}
		fe.answers = append(fe.answers, r)
		fe.rateLimited = &l
		return true, nil
	}
	return false, nil
}

// answerReaders read each answering action (a return's file through
// files).
var answerReaders = map[string]func(args []string, l Line, files Files) (answer, error){
	"deny": denyAnswer, "return": returnAnswer,
	"redirect": func(args []string, l Line, _ Files) (answer, error) { return redirectAnswer(args, l) },
}

// readPathRewrite reads a path rewrite (pathRewriteOf).
func (fe *frontend) readPathRewrite(l Line, args []string, cond *Condition) error {
	r, err := pathRewriteOf(l, args)
	if err != nil {
		return err
	}
	fe.pathRewrites = append(fe.pathRewrites, requestRule{line: l, cond: cond, path: &r})
	return nil
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
// <value>, a log-format value, and replace-header <name> <regex> <format>.
func headerRuleOf(l Line, args []string) (headerRule, error) {
	op := arg(l, 1)
	switch op {
	case "replace-header":
		return replaceHeader(l, args)
	case "replace-value":
		return headerRule{}, refuse(l, "%s", replaceValueRefusal)
	}
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

// replaceValueRefusal is why replace-value is refused.
const replaceValueRefusal = "not translated: HAProxy matches each comma-separated value of a header line (trimmed) and writes a line where one matched anew, its values joined by commas without the spaces; Caddy's header replace reads each line whole (replace-header, whose expression reads the whole line, is translated)"

// replaceHeader reads replace-header <name> <regex> <format>: HAProxy
// replaces each line of the header (case-sensitively matched anywhere)
// with the format, \N its groups; Caddy's header replace of the
// expression around its leftmost match, on each line, does the same. On
// a request, Host (Go keeps it apart from the headers) and the
// forwarding headers (which option forwardfor and the forwarded handler
// write) are refused.
func replaceHeader(l Line, args []string) (headerRule, error) {
	if len(args) != 3 {
		return headerRule{}, refuse(l, "takes a header name, a regular expression and a format")
	}
	h := headerRule{line: l, op: "replace-header", name: args[0], find: wholeValueMatch(args[1])}
	name := strings.ToLower(h.name)
	switch {
	case !isHTTPName(h.name):
		return h, refuse(l, "%s: not a header name", h.name)
	case l.Words[0] == "http-request" && (name == "host" || forwardedHeaders[name]):
		return h, refuse(l, "replace-header %s of a request is not translated (Go keeps Host apart from the headers; the forwarding headers are written by option forwardfor and the forwarded handler)", h.name)
	}
	if err := checkRE2(args[1], l); err != nil {
		return h, err
	}
	var err error
	h.replace, err = expandTemplate(args[2], l, headerValueByte, 1, groupsOf(args[1]))
	return h, err
}

// checkForwardFor checks an option forwardfor line: [except <network>]
// [header <name>] [if-none], a name other than those Caddy's
// reverse_proxy writes or removes itself.
func checkForwardFor(l Line) error {
	if _, err := forwardForOptions(l); err != nil {
		return err
	}
	switch h := strings.ToLower(forwardForHeader(l)); {
	case h != "x-forwarded-for" && (forwardedHeaders[h] || h == "via" || h == "host"):
		return refuse(l, "header %s: not translated (reverse_proxy writes or removes that header itself)", forwardForHeader(l))
	}
	return nil
}

// forwardForOption is what an option forwardfor line says after its
// keyword: the header (X-Forwarded-For unless it names another), the
// network whose clients get none added, and if-none (added only to a
// request that has none).
type forwardForOption struct {
	header string
	except string // an address or CIDR range, "" for none
	ifNone bool
}

// forwardForOptions reads an option forwardfor line's options.
func forwardForOptions(l Line) (forwardForOption, error) {
	o := forwardForOption{header: "X-Forwarded-For"}
	w := l.Words
	for i := 2; i < len(w); i++ {
		switch {
		case w[i] == "if-none":
			o.ifNone = true
		case (w[i] == "header" || w[i] == "except") && i+1 < len(w):
			if w[i] == "header" {
				o.header = w[i+1]
			} else if o.except = w[i+1]; !isAddrOrRange(o.except) {
				return o, refuse(l, "except %s: want an address or a CIDR range", o.except)
			}
			i++
		default:
			return o, refuse(l, "takes [except <network>] [header <name>] [if-none]")
		}
	}
	return o, nil
}

// isAddrOrRange tells whether v is an IP address or a CIDR range.
func isAddrOrRange(v string) bool {
	if _, err := netip.ParseAddr(v); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(v)
	return err == nil
}

// sendsXFF tells whether an option forwardfor line (nil: none) sends the
// client's address in X-Forwarded-For, as reverse_proxy does by default.
func sendsXFF(ff *Line) bool {
	return ff != nil && strings.EqualFold(forwardForHeader(*ff), "X-Forwarded-For")
}

// forwardForHeader is the header an option forwardfor line adds the
// client's address in: X-Forwarded-For unless it names another.
func forwardForHeader(l Line) string {
	o, _ := forwardForOptions(l)
	return o.header
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
