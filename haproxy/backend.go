package haproxy

import (
	"fmt"
	"github.com/caddy-ha/caddy-ha/healthcheck"
	"slices"
	"strconv"
	"strings"
	"time"
)

// backend is what a backend section becomes: a reverse_proxy.
type backend struct {
	section  *Section
	lines    []Line // its settings and ca-base, where its values come from
	mode     *Line  // the mode line that holds (mode http)
	servers  []server
	defaults []option // default-server options
	notes    []note
	// The health check: option httpchk, http-check send and expect.
	check     []Line
	checkMeth string
	checkURI  string
	checkHost string
	expect    string // http-check expect status <code>: the one status
	// expectRule is an http-check expect other than one status, which
	// dynamic checked's expect judges (nil: none).
	expectRule *checkExpect
	expectAt   *Line // the http-check expect line read (nil: none)
	// disableOn404 is http-check disable-on-404 (nil: none): dynamic
	// checked's disable_on_404.
	disableOn404 *Line
	leader       bool // its check asks for the leader (or its description says so)
	active       bool // checked, and not the leader's: Caddy's active health checks, or dynamic checked
	// checked is dynamic checked's check, tcp or http, where Caddy's
	// active health checks cannot check as HAProxy does, or an nbsrv
	// counts its servers ("": they can and none does).
	checked  string
	counted  bool // an nbsrv names it: dynamic checked publishes its count
	balance  *Line
	hashType *Line
	retries  *Line // retries <n>
	// cookie is the line that pins a client with lb_policy cookie:
	// cookie <name> insert|prefix|rewrite, or the stick store-response
	// that learns the server's session cookie (settleStick).
	cookie *Line
	// cookieName is the cookie Caddy's policy sets: insert's own, or one
	// beside the server's session cookie; cookieNote says how that
	// differs from HAProxy ("": it does not).
	cookieName, cookieNote string
	stick                  backendStick
	stickSource            *Line // stick on src: ip_hash
	redispatch             *Line // option redispatch
	forwardFor             *Line // option forwardfor, from the defaults

	allBackups *Line                  // option allbackups
	weights    map[Position]weighting // by server line: the servers with a weight
	// http-response header rules (each a requestRule's header, with
	// its condition), applied before the frontend's.
	responseActions []requestRule
	reuse           *Line
	timeouts        map[string]string // connect, server, tunnel, check, queue
	keepAlive       string            // timeout http-keep-alive, for idle upstream connections
	timeoutSrc      []Line
	log             proxyLog // log global and the like: notes
	compression     compression
	bufferRequest   *Line // option http-buffer-request: request_buffers
	caBase          *Line // global ca-base
	// What the servers' options say (readServers): the transport's TLS
	// and the checks', alike for every server, and each server's notes.
	tls         tlsOptions
	checkOpts   leaderOptions
	resolving   resolveOptions // its servers' names resolved at run time (resolvers set)
	serverNotes [][]string
	// resolversSections are the configuration's, by name.
	resolversSections map[string]*resolvers
	// What resolve settled.
	transport string // http, pinned, or fastcgi
	versions  string // the transport's HTTP versions
	selection selection

	// Its own http-request rules, then its redirect rules, in the order
	// written, with the ACLs only they see.
	requestRules, redirects []requestRule
	aclScope
	// stats is its own stats page (nil: none), which HAProxy serves to
	// the requests the backend gets, after its http-request rules; a
	// backend with one may have no server (HAProxy answers 503).
	stats     *statsPage
	userlists map[string]*userlist // the userlist sections, which http_auth ACLs name
	// fcgi is the fcgi-app its use-fcgi-app line (fcgiAt) names (nil:
	// none); fcgiApps are the configuration's, by name.
	fcgi     *fcgiApp
	fcgiAt   *Line
	fcgiApps map[string]*fcgiApp
}

type server struct {
	line Line
	name string
	addr string // host:port, or an SRV name
	opts []option
	// slots is a server-template's count of servers (0: a server line).
	slots int
}

// option is a word of a server's options, and the line it is on (the
// server's, or default-server's).
type option struct {
	word string
	line Line
}

func optionsOf(l Line, from int) []option {
	opts := make([]option, 0, len(l.Words)-from)
	for _, w := range l.Words[from:] {
		opts = append(opts, option{w, l})
	}
	return opts
}

// readBackend reads the backend section s (or a listen's servers): its
// lines, each refused one recorded, then what they say together.
func (t *translator) readBackend(s *Section) (*backend, error) {
	be := &backend{section: s, counted: t.counted[s.Name], timeouts: map[string]string{}, caBase: t.global.caBase, lines: t.settingsOf(s), aclScope: newACLScope(t.cfg), resolversSections: t.resolvers, userlists: t.userlists, fcgiApps: t.fcgiApps}
	if be.caBase != nil {
		be.lines = append(be.lines, *be.caBase)
	}
	var err error
	if be.mode, err = proxyMode(s, be.lines); err != nil {
		return nil, err
	}
	refused := t.refused.count()
	for _, l := range t.settingsOf(s) {
		t.reach(l.Pos)
		t.refused.add(be.readSetting(l))
	}
	if t.refused.count() > refused {
		return nil, errRefused
	}
	if err := t.readOwnStats(be); err != nil {
		return nil, err
	}
	be.setAsideDisabled()
	if len(be.servers) == 0 {
		// HAProxy runs its rules (and its stats page), and answers 503
		// to what they leave.
		return be, be.resolveRules()
	}
	be.leader = be.leader || be.checkURI == LeaderPath
	if !be.leader && (len(be.check) > 0 || be.anyServerOption("check")) {
		if err := be.readActiveCheck(); err != nil {
			return nil, err
		}
	}
	if err := be.readServers(); err != nil {
		return nil, err
	}
	return be, be.resolve()
}

// setAsideDisabled takes the disabled servers (disabled on their line or
// default-server's, unless a later enabled says otherwise) out of the
// servers, with a note: HAProxy starts them in maintenance, where they
// get no request and no check until its runtime API enables them.
func (be *backend) setAsideDisabled() {
	var enabled []server
	for _, s := range be.servers {
		if !be.isDisabled(s) {
			enabled = append(enabled, s)
			continue
		}
		be.notes = append(be.notes, note{line: s.line, what: "disabled: HAProxy starts this server in maintenance (no request, no check), so it is not among the upstreams; " +
			"where HAProxy's runtime API would enable it, Caddy's admin API can change the upstreams"})
	}
	be.servers = enabled
}

// isDisabled tells whether a server starts disabled: the last of disabled
// and enabled among its default-server's options and its own.
func (be *backend) isDisabled(s server) bool {
	disabled := false
	for _, o := range append(append([]option{}, be.defaults...), s.opts...) {
		switch o.word {
		case "disabled":
			disabled = true
		case "enabled":
			disabled = false
		}
	}
	return disabled
}

// readOwnStats reads a backend section's own stats page, if its own
// lines make one (they replace its defaults').
func (t *translator) readOwnStats(be *backend) error {
	s := be.section
	if s.Kind != "backend" || len(statsLines(s)) == 0 {
		return nil
	}
	var replaced []note
	var err error
	be.stats, replaced, err = t.readStats(s)
	be.notes = append(be.notes, replaced...)
	return err
}

// readSetting reads one of the backend's settings: its own, or its
// defaults' of its side (the others noted as another side's).
func (be *backend) readSetting(l Line) error {
	s := be.section
	if s.Kind == "listen" && keywordSide(l) != backendSide && !slices.Contains([]string{"mode", "description", "stick-table"}, l.Words[0]) {
		return nil // the listen's frontend's (see the site)
	}
	if !ownLine(s, l) && keywordSide(l) == frontendSide {
		be.notes = append(be.notes, note{line: l, what: fromDefaultsNote(l, s.Kind)})
		return nil
	}
	return be.read(l)
}

// readAfterResponse refuses a backend's http-after-response rule (its
// own, or its defaults': HAProxy takes a defaults section with rules in
// frontends or in backends, not both), which HAProxy applies to that
// backend's answers only.
func (be *backend) readAfterResponse(l Line) error {
	return refuse(l, "a backend's http-after-response (its own or its defaults') is not translated yet (a frontend's is)")
}

func (be *backend) readBufferRequest(l Line) error {
	on, err := bufferRequest(l)
	be.bufferRequest = on
	return err
}

// bufferRequest reads option http-buffer-request (its line) or no option
// http-buffer-request (nil).
func bufferRequest(l Line) (*Line, error) {
	if len(l.Words) != 2 && !(len(l.Words) == 3 && l.Words[0] == "no") {
		return nil, refuse(l, "takes no value")
	}
	if l.Words[0] == "no" {
		return nil, nil
	}
	return &l, nil
}

func (be *backend) readMode(l Line) error {
	what, err := modeNote(l, be.mode, "reverse_proxy speaks HTTP")
	if err != nil {
		return err
	}
	be.notes = append(be.notes, note{line: l, what: what})
	return nil
}

func (be *backend) readKeywordNote(l Line) error {
	n, err := keywordNote(l, "Caddy keeps upstream connections alive by default")
	if err != nil {
		return err
	}
	be.notes = append(be.notes, n)
	return nil
}

func (be *backend) readTimeout(l Line) error {
	w := l.Words
	if len(w) != 3 {
		return refuse(l, "takes a name and a duration")
	}
	d, err := duration(w[2], l.Pos)
	if err != nil {
		return err
	}
	switch w[1] {
	case "http-keep-alive":
		be.keepAlive = d
	case "http-request":
		be.notes = append(be.notes, note{line: l, what: "a frontend's: see the servers option"})
		return nil
	default: // connect, server, tunnel, check, queue
		be.timeouts[w[1]] = d
	}
	be.timeoutSrc = append(be.timeoutSrc, l)
	return nil
}

func (be *backend) readLog(l Line) error {
	if err := be.log.read(l); err != nil {
		return err
	}
	be.notes = append(be.notes, note{line: l, what: be.log.backendNote(l)})
	return nil
}

func (be *backend) readDescription(l Line) error {
	be.leader = be.leader || strings.Contains(strings.Join(l.Words[1:], " "), leaderMark)
	be.notes = append(be.notes, note{line: l, what: ""})
	return nil
}

func (be *backend) readHTTPCheck(l Line) error {
	be.check = append(be.check, l)
	switch w := l.Words; len(w) { // option httpchk [<method> <uri> [<version>]]
	case 2:
	case 4, 5:
		be.checkMeth, be.checkURI = w[2], w[3]
	default:
		return refuse(l, "takes [<method> <uri> [<version>]]")
	}
	return nil
}

func (be *backend) readDefaultServer(l Line) error {
	be.defaults = append(be.defaults, optionsOf(l, 1)...)
	be.notes = append(be.notes, note{line: l, what: "in every server below"})
	return nil
}

func (be *backend) readServer(l Line) error {
	if len(l.Words) < 3 {
		return refuse(l, "takes a name and an address")
	}
	addr, err := hostPort(l.Words[2], l.Pos)
	if err != nil {
		return err
	}
	be.servers = append(be.servers, server{line: l, name: l.Words[1], addr: addr, opts: optionsOf(l, 3)})
	return nil
}

func (be *backend) readReuse(l Line) error {
	switch arg(l, 1) {
	case "never", "safe", "aggressive", "always":
		be.reuse = &l
		return nil
	}
	return refuse(l, "takes never, safe, aggressive or always")
}

func (be *backend) readErrorFile(l Line) error {
	if ownLine(be.section, l) {
		return refuse(l, "a backend's own errorfile is not translated yet (a frontend's or the defaults' is)")
	}
	be.notes = append(be.notes, note{line: l, what: "the site's handle_errors"})
	return nil
}

// readCookie reads cookie <name> insert [indirect] [nocache], Caddy's
// cookie policy, and cookie <name> prefix|rewrite [nocache], where
// HAProxy writes the server into the server's own cookie: the policy with
// a cookie of Caddy's own beside it (a warning).
func (be *backend) readCookie(l Line) error {
	w := l.Words
	if len(w) < 3 || w[2] != "insert" && w[2] != "prefix" && w[2] != "rewrite" {
		return refuse(l, "only cookie <name> insert [indirect] [nocache], prefix [nocache] and rewrite [nocache] are translated")
	}
	for _, o := range w[3:] {
		if o != "nocache" && (o != "indirect" || w[2] != "insert") {
			return refuse(l, "cookie option %s is not translated yet", o)
		}
	}
	be.cookie = be.replace(be.cookie, l)
	be.cookieName, be.cookieNote = w[1], ""
	if w[2] != "insert" {
		be.cookieName += pinCookieSuffix
		be.cookieNote = fmt.Sprintf("Caddy keeps the client on its server with a cookie of its own, %s (a hash of the server's address), set on its first answer; the server's %s passes unchanged both ways, where HAProxy %s", be.cookieName, w[1], cookieModes[w[2]])
	}
	return nil
}

// cookieModes say what HAProxy does with the server's own cookie.
var cookieModes = map[string]string{
	"prefix":  "prefixes its value with the server's cookie value (<value>~) and strips that before the server sees it",
	"rewrite": "rewrites its value to the server's cookie value",
}

func (be *backend) readRetries(l Line) error {
	if n, err := strconv.Atoi(arg(l, 1)); err != nil || n < 0 || len(l.Words) != 2 {
		return refuse(l, "takes a whole number")
	}
	be.retries = be.replace(be.retries, l)
	return nil
}

func (be *backend) readRedispatch(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "an interval is not translated")
	}
	be.redispatch = &l
	return nil
}

func (be *backend) readAllBackups(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes no argument")
	}
	be.allBackups = &l
	return nil
}

func (be *backend) readForwardFor(l Line) error {
	if err := checkForwardFor(l); err != nil {
		return err
	}
	be.forwardFor = &l
	return nil
}

func (be *backend) readResponseHeader(l Line) error {
	if arg(l, 1) == "cache-store" {
		return be.readCacheUse(l, nil, nil)
	}
	h, err := responseHeader(l)
	be.responseActions = append(be.responseActions, requestRule{line: l, cond: h.cond, header: &h})
	return err
}

func (be *backend) readBalance(l Line) error {
	be.balance = be.replace(be.balance, l)
	return nil
}

func (be *backend) readHashType(l Line) error {
	be.hashType = be.replace(be.hashType, l)
	return nil
}

// readCheckRule reads an http-check line, a part of the health check.
func (be *backend) readCheckRule(l Line) error {
	be.check = append(be.check, l)
	return be.httpCheck(l)
}

func (be *backend) httpCheck(l Line) error {
	w := l.Words
	switch arg(l, 1) {
	case "send":
		for i := 2; i < len(w); i += 2 {
			if i+1 >= len(w) {
				return refuse(l, "%s needs a value", w[i])
			}
			switch v := w[i+1]; w[i] {
			case "meth":
				be.checkMeth = v
			case "uri":
				be.checkURI = v
			case "hdr":
				if i+2 >= len(w) {
					return refuse(l, "hdr takes a name and a value")
				}
				if !strings.EqualFold(v, "Host") {
					return refuse(l, "only the Host header of a check is translated")
				}
				be.checkHost = w[i+2]
				i++
			default:
				return refuse(l, "http-check send %s is not translated yet", w[i])
			}
		}
	case "expect":
		return be.readExpect(l)
	case "disable-on-404":
		if len(w) != 2 {
			return refuse(l, "takes no argument")
		}
		be.disableOn404 = &l
	default:
		return refuse(l, "http-check %s is not translated yet", arg(l, 1))
	}
	return nil
}

// checkExpect is an http-check expect rule: [!] <match> <pattern>.
type checkExpect struct {
	line           Line
	negate         bool
	match, pattern string
}

// readExpect reads http-check expect [!] <match> <pattern>: one status is
// Caddy's active health check's; the other statuses (a list, ranges),
// rstatus, string and rstring are dynamic checked's expect, which judges
// them as HAProxy does (string and rstring on the body, whatever the
// status).
func (be *backend) readExpect(l Line) error {
	if be.expectAt != nil && ownLine(be.section, *be.expectAt) == ownLine(be.section, l) {
		return refuse(l, "a second http-check expect: HAProxy checks each rule in turn, one is translated")
	}
	// The backend's own expect replaces its defaults'.
	be.expectAt, be.expect, be.expectRule = be.replace(be.expectAt, l), "", nil
	e := checkExpect{line: l}
	w := l.Words[2:]
	if len(w) > 0 && w[0] == "!" {
		e.negate, w = true, w[1:]
	}
	if len(w) != 2 {
		return refuse(l, "only http-check expect [!] status|rstatus|string|rstring <pattern> is translated (no min-recv, comment, ok-status, error-status, tout-status, on-success, on-error or status-code)")
	}
	e.match, e.pattern = w[0], w[1]
	switch e.match {
	case "status":
		if n, err := strconv.Atoi(e.pattern); err == nil && n >= 100 && n <= 599 && !e.negate {
			be.expect = e.pattern
			return nil
		}
		if _, err := healthcheck.StatusRanges(e.pattern); err != nil {
			return refuse(l, "%v", err)
		}
	case "rstatus", "rstring":
		if err := checkRE2(e.pattern, l); err != nil {
			return err
		}
	case "string":
	default:
		return refuse(l, "http-check expect %s is not translated yet (status, rstatus, string and rstring are)", e.match)
	}
	be.expectRule = &e
	return nil
}

// readActiveCheck reads the checks of a checked backend other than the
// leader's: Caddy's active health checks where they check as HAProxy
// does (option httpchk with http-check expect status <code>) and no
// nbsrv counts its servers (Caddy keeps their state to the proxy), else
// dynamic checked (HAProxy's checks as an upstream source): a TCP connect
// check without option httpchk, any 2xx or 3xx answer without an expect,
// another expect, disable-on-404.
func (be *backend) readActiveCheck() error {
	be.active = true
	httpchk := slices.ContainsFunc(be.check, func(l Line) bool { return l.Words[0] == "option" })
	switch {
	case !httpchk && len(be.check) > 0:
		return refuse(be.check[0], "http-check without option httpchk: HAProxy checks the servers' TCP connection then, and uses no http-check rule (not translated: write option httpchk, or drop the http-check lines)")
	case !httpchk:
		be.checked = "tcp"
	}
	if err := be.checkOwnRules(); err != nil {
		return err
	}
	be.noteUncheckedServers()
	if be.checked != "" {
		return nil
	}
	if be.expectAt == nil || be.expectRule != nil || be.disableOn404 != nil || be.counted {
		// Without an expect HAProxy passes any 2xx or 3xx answer; an
		// expect other than one status, disable-on-404, and the count an
		// nbsrv reads are dynamic checked's.
		be.checked = "http"
		if be.disableOn404 != nil && be.cookie != nil {
			be.notes = append(be.notes, note{line: *be.disableOn404, approximated: true,
				what: "a server drained by a 404 gets no request from Caddy, where HAProxy still sends it those whose cookie names it (its persistent sessions)"})
		}
	}
	return nil
}

// checkOwnRules refuses http-check rules of the backend's own beside an
// option httpchk of its defaults' alone: HAProxy's check rules are then
// the backend's, without the request option httpchk sends (HAProxy 2.6
// sends none, and the check times out).
func (be *backend) checkOwnRules() error {
	var ownOption, ownRule *Line
	for i, l := range be.check {
		switch own := ownLine(be.section, l); {
		case own && l.Words[0] == "option":
			ownOption = &be.check[i]
		case own && ownRule == nil:
			ownRule = &be.check[i]
		}
	}
	if ownRule != nil && ownOption == nil {
		return refuse(*ownRule, "http-check in a backend whose option httpchk is its defaults': HAProxy then checks with the backend's rules alone and sends no request, so every check times out (not translated: write option httpchk in the backend too)")
	}
	return nil
}

// noteUncheckedServers notes each server without check: HAProxy keeps it
// in rotation unchecked, where Caddy checks every upstream of the
// reverse_proxy (issue 28).
func (be *backend) noteUncheckedServers() {
	checker := "Caddy's active health check checks"
	if be.checked != "" {
		checker = "dynamic checked checks"
	}
	for _, srv := range be.servers {
		if !slices.ContainsFunc(append(append([]option{}, be.defaults...), srv.opts...), func(o option) bool { return o.word == "check" }) {
			be.notes = append(be.notes, note{line: srv.line, what: "HAProxy does not check this server (it stays in rotation whatever it answers); " + checker + " every upstream of the reverse_proxy, this one too", approximated: true})
		}
	}
}

// replace is the line that replaces an earlier one of its keyword (nil
// if none), which is noted: the later line wins, as in HAProxy.
func (be *backend) replace(earlier *Line, l Line) *Line {
	if earlier != nil {
		be.notes = append(be.notes, note{line: *earlier, what: "replaced by line " + strconv.Itoa(l.Pos.Line)})
	}
	return &l
}

// anyServerOption tells whether a server or default-server has the option.
func (be *backend) anyServerOption(word string) bool {
	for _, o := range be.defaults {
		if o.word == word {
			return true
		}
	}
	for _, s := range be.servers {
		for _, o := range s.opts {
			if o.word == word {
				return true
			}
		}
	}
	return false
}

// balancePolicies are the lb_policy of each HAProxy balance algorithm, for
// a backend without checks.
var balancePolicies = map[string]string{"roundrobin": "round_robin", "static-rr": "round_robin", "leastconn": "least_conn",
	"first": "first", "source": "ip_hash", "uri": "uri_hash"}

// lbPolicy is the lb_policy line of a backend other than the leader's.
func (be *backend) lbPolicy() (string, error) {
	if be.stickSource != nil {
		return "ip_hash", nil // in place of the balance (settleStick's warning)
	}
	if be.balance == nil {
		return "round_robin", nil // HAProxy's default
	}
	l := *be.balance
	algo := arg(l, 1)
	if p := balancePolicies[algo]; p != "" && len(l.Words) == 2 {
		return p, nil
	}
	if strings.HasPrefix(algo, "hdr(") && strings.HasSuffix(algo, ")") && len(algo) > 5 && len(l.Words) == 2 {
		return "header " + algo[4:len(algo)-1], nil // the field name goes out through the token writer (policyToken)
	}
	if draws, ok := strings.CutPrefix(algo, "random"); ok && len(l.Words) == 2 {
		return randomPolicy(draws, l)
	}
	return "", refuse(l, "takes roundrobin, static-rr, leastconn, first, source, uri, random[(<draws>)] or hdr(<name>) without options")
}

// randomPolicy is balance random(<draws>): the least loaded of that many
// servers drawn at random (2 by default, the power of two choices), as
// Caddy's random_choose does; one draw is plain random.
func randomPolicy(draws string, l Line) (string, error) {
	n := 2
	if draws != "" {
		var err error
		if !strings.HasPrefix(draws, "(") || !strings.HasSuffix(draws, ")") {
			return "", refuse(l, "random takes (<draws>)")
		}
		if n, err = strconv.Atoi(draws[1 : len(draws)-1]); err != nil || n < 1 || n > 1000 {
			return "", refuse(l, "random(<draws>) takes a whole number from 1 to 1000")
		}
	}
	if n == 1 {
		return "random", nil
	}
	return "random_choose " + strconv.Itoa(n), nil
}

// resolve checks what the backend's lines say together and settles
// what its reverse_proxy will be, once its lines and servers are read:
// the notes of balance and hash-type, the leader's check, the transport
// (pinned for http-reuse never), its versions and maxconn, and the
// policy.
func (be *backend) resolve() error {
	if err := be.resolveRules(); err != nil {
		return err
	}
	be.noteBalance()
	if err := be.settleResolved(); err != nil {
		return err
	}
	if err := be.checkChecks(); err != nil {
		return err
	}
	be.transport = "http"
	if be.reuse != nil && arg(*be.reuse, 1) == "never" {
		be.transport = "pinned" // one upstream connection per client connection
	}
	if err := be.settleFastCGI(); err != nil {
		return err
	}
	if err := be.checkMaxConns(); err != nil {
		return err
	}
	if be.tls.proto == "h2" {
		if err := be.settleH2C(); err != nil {
			return err
		}
	} else if err := be.settleALPN(); err != nil {
		return err
	}
	if err := be.settleStick(); err != nil {
		return err
	}
	if be.leader {
		return nil
	}
	p, err := be.lbPolicy()
	if err != nil {
		return err
	}
	be.selection, err = be.readSelection(p)
	return err
}

// settleALPN settles the transport's versions by the servers' alpn.
func (be *backend) settleALPN() error {
	switch be.tls.alpn {
	case "", "http/1.1":
		be.versions = "1.1"
	case "h2,http/1.1", "http/1.1,h2":
		be.versions = "1.1 2"
	default:
		return refuse(be.servers[0].line, "alpn %s is not translated yet", be.tls.alpn)
	}
	return nil
}

// settleH2C settles proto h2: HAProxy speaks HTTP/2 to the servers from
// the first byte, as versions h2c alone has Go's transport do in clear.
// Over TLS that transport offers h2 and http/1.1 by ALPN and speaks what
// the server picks, where HAProxy speaks HTTP/2 whatever ALPN says;
// transport pinned and dynamic checked's HTTP checks speak HTTP/1.1 only
// (HAProxy 2.6 checks such a server over HTTP/2).
func (be *backend) settleH2C() error {
	switch {
	case be.tls.ssl:
		return refuse(be.servers[0].line, "proto h2 with ssl is not translated: HAProxy speaks HTTP/2 over TLS whatever ALPN says, Caddy's transport speaks HTTP/1.1 to a server that picks it (versions h2c is HTTP/2 in clear only)")
	case be.transport == "pinned":
		return refuse(*be.reuse, "http-reuse never with proto h2 servers is not translated: transport pinned speaks HTTP/1.1 only")
	case be.checked == "http":
		return refuse(be.check[0], "this HTTP check of proto h2 servers is not translated: dynamic checked checks over HTTP/1.1, HAProxy over HTTP/2 (a check alone, a TCP connect check, is translated, and so is option httpchk with one http-check expect status)")
	}
	be.versions = "h2c"
	return nil
}

// checkCheckedAddrs refuses two servers of one address among dynamic
// checked's, which checks each address once (HAProxy checks each server).
func (be *backend) checkCheckedAddrs() error {
	if be.checked == "" {
		return nil
	}
	seen := map[string]server{}
	for _, s := range be.servers {
		if first, ok := seen[s.addr]; ok {
			return refuse(s.line, "%s is server %s's address too (line %d): dynamic checked checks each address once, as one upstream", s.addr, first.name, first.line.Pos.Line)
		}
		seen[s.addr] = s
	}
	return nil
}

// noteBalance notes balance and hash-type: ignored in the leader's pool,
// and Caddy's hashes its own.
func (be *backend) noteBalance() {
	for _, l := range []*Line{be.balance, be.hashType} {
		switch {
		case l == nil:
		case be.leader:
			be.notes = append(be.notes, note{line: *l, what: "ignored for the leader's pool: the leader, whichever node it is, gets every request"})
		case l == be.hashType:
			be.notes = append(be.notes, note{line: *l, what: "Caddy's hash policies are its own: a client or key keeps its server while the servers stay the same"})
		}
	}
}

// checkChecks refuses what the servers' checks cannot be in Caddy.
func (be *backend) checkChecks() error {
	if err := be.checkCheckedAddrs(); err != nil {
		return err
	}
	if be.checkOpts.port != "" && (be.leader || be.checked != "") {
		why := ""
		if be.counted {
			why = " (an nbsrv names this backend: dynamic checked checks it, to count its servers up)"
		}
		return refuse(be.servers[0].line, "port: a check on another port is translated for Caddy's active health checks only (option httpchk with http-check expect status <code>), not yet for dynamic checked's or the leader's%s", why)
	}
	return be.checkLeaderCheck()
}

// checkLeaderCheck refuses a check the leader's pool cannot take: the
// leader's answers a GET with 200.
func (be *backend) checkLeaderCheck() error {
	if be.leader && be.checkMeth != "" && be.checkMeth != "GET" {
		return refuse(be.check[0], "the leader's check is a GET")
	}
	if be.leader && (be.expectRule != nil || be.disableOn404 != nil) {
		return refuse(be.check[len(be.check)-1], "the leader answers 200: lb_policy leader's check takes no other http-check expect, nor disable-on-404")
	}
	if be.leader && be.expect != "" && be.expect != "200" {
		return refuse(be.check[len(be.check)-1], "the leader answers 200: expect status %s cannot be the leader's check", be.expect)
	}
	return nil
}

// forwardForUse is what option forwardfor does for the requests a
// frontend sends to a backend, as HAProxy joins the two: the header is
// added if either asks for it, in the backend's header if it has the
// option; not for a client in either's except network; and only to a
// request without one if every option there says if-none.
type forwardForUse struct {
	lines  []Line // the frontend's option, then the backend's
	header string // "": none added
	except []string
	ifNone bool
}

func sentForwardFor(fe *frontend, be *backend) forwardForUse {
	u := forwardForUse{ifNone: true}
	for _, l := range []*Line{fe.forwardFor, be.forwardFor} {
		if l == nil || slices.ContainsFunc(u.lines, func(o Line) bool { return o.Pos == l.Pos }) {
			continue
		}
		o, _ := forwardForOptions(*l)
		u.lines = append(u.lines, *l)
		u.header = o.header // the backend's, if it has one
		u.ifNone = u.ifNone && o.ifNone
		if o.except != "" && !slices.Contains(u.except, o.except) {
			u.except = append(u.except, o.except)
		}
	}
	u.ifNone = u.ifNone && u.header != ""
	return u
}

// conditional tells whether the header is added to some requests only.
func (u forwardForUse) conditional() bool { return len(u.except) > 0 || u.ifNone }

// plainXFF tells whether reverse_proxy's own X-Forwarded-For, after what
// the request has, is the header HAProxy adds for the requests fe sends
// to be (the forwarded handler's is not).
func (u forwardForUse) plainXFF(fe *frontend) bool {
	return strings.EqualFold(u.header, "X-Forwarded-For") && !fe.forwarding.handler
}

// checkFrontend refuses the backend where the frontend fe sends to it
// with an option forwardfor the translation cannot join with fe's: two
// headers, or except and if-none with another header than
// reverse_proxy's own X-Forwarded-For.
func (be *backend) checkFrontend(fe *frontend) error {
	if err := be.checkForwardingRules(fe); err != nil {
		return err
	}
	if err := be.checkDeferredResponse(fe); err != nil {
		return err
	}
	if err := be.checkReplaceOrder(fe); err != nil {
		return err
	}
	l := be.forwardFor
	if l == nil {
		return sentForwardFor(fe, be).checkConditional(fe)
	}
	if ff := fe.forwardFor; ff != nil && !strings.EqualFold(forwardForHeader(*ff), forwardForHeader(*l)) {
		return refuse(*l, "backend %s adds %s, where %s %s adds %s: HAProxy adds the backend's only, which is not translated", be.section.Name, forwardForHeader(*l), fe.section.Kind, fe.section.Name, forwardForHeader(*ff))
	}
	if fe.forwarding.handler && !sendsXFF(l) {
		return refuse(*l, "backend %s adds %s, where %s %s deletes and adds X-Forwarded-For (the forwarded handler): not translated", be.section.Name, forwardForHeader(*l), fe.section.Kind, fe.section.Name)
	}
	return sentForwardFor(fe, be).checkConditional(fe)
}

// checkConditional refuses except and if-none where reverse_proxy's own
// X-Forwarded-For is not the header added: the forwarded handler's, or
// another header's.
func (u forwardForUse) checkConditional(fe *frontend) error {
	if !u.conditional() || u.plainXFF(fe) {
		return nil
	}
	return refuse(u.lines[len(u.lines)-1], "except and if-none are translated for X-Forwarded-For without http-request del-header X-Forwarded-For only")
}

// weighting is a server's weight option: its value, and its line.
type weighting struct {
	n  int
	at Line
}

// weightOf is a server's weight, HAProxy's default 1 without one.
func (be *backend) weightOf(s server) (int, *Line) {
	if w, ok := be.weights[s.line.Pos]; ok {
		return w.n, &w.at
	}
	return 1, nil
}

// isBackup tells whether a server (or default-server) says backup.
func (be *backend) isBackup(s server) bool {
	return slices.ContainsFunc(append(append([]option{}, be.defaults...), s.opts...), func(o option) bool { return o.word == "backup" })
}

// groupPolicy is the policy that balances a group of servers (the
// primaries, or the backups with option allbackups) as the balance's
// policy p does: weights change nothing while they are equal; with
// roundrobin or static-rr, weighted_round_robin gives each server its
// share (a weight of 0 none, as in HAProxy); balance first ignores them,
// as HAProxy does; Caddy's other policies have no weights.
func (be *backend) groupPolicy(p string, group []server) (string, error) {
	weights, odd, uneven, zero := be.groupWeights(group)
	if !uneven {
		return p, nil
	}
	if be.checked != "" {
		return "", refuse(*odd, "weights with dynamic checked's checks are not translated: weighted_round_robin weighs the upstreams by their place, which changes as servers go down and come back")
	}
	algo := "roundrobin"
	if be.balance != nil {
		algo = arg(*be.balance, 1)
	}
	switch {
	case zero:
		return "", refuse(*odd, "every server of the group has weight 0: HAProxy balances none of them, which is not translated")
	case algo == "roundrobin" || algo == "static-rr":
		return "weighted_round_robin " + strings.Join(weights, " "), nil
	case algo == "first" && !slices.Contains(weights, "0"):
		return p, nil
	case algo == "first":
		return "", refuse(*odd, "weight 0 with balance first is not translated (Caddy's first has no weights)")
	}
	return "", refuse(*odd, "weights that differ are translated with balance roundrobin or static-rr: Caddy's %s has no weights", strings.Fields(p)[0])
}

// groupWeights are the weights of a group of servers, a weight line (one
// of 0 if there is one), whether they differ or one is 0, and whether all
// are 0.
func (be *backend) groupWeights(group []server) (weights []string, odd *Line, uneven, zero bool) {
	first, _ := be.weightOf(group[0])
	zero = true
	for _, s := range group {
		n, at := be.weightOf(s)
		if at != nil && (odd == nil || n == 0 && !slices.Contains(weights, "0")) {
			odd = at
		}
		uneven = uneven || n != first || n == 0
		zero = zero && n == 0
		weights = append(weights, strconv.Itoa(n))
	}
	return weights, odd, uneven, zero
}

// readSelection is how the backend picks a server, written as lb_policy or
// as the cookie policy's fallback: the balance's policy p (with weights,
// see groupPolicy), or, with backup servers, lb_policy backup with that
// policy for the others, and the first backup up when none of them is (or
// with option allbackups, the backups balanced as the others are).
func (be *backend) readSelection(p string) (selection, error) {
	var primaries, backups []server
	for _, s := range be.servers {
		if be.isBackup(s) {
			backups = append(backups, s)
		} else {
			primaries = append(primaries, s)
		}
	}
	if len(backups) == 0 {
		policy, err := be.groupPolicy(p, primaries)
		return selection{policy: policy}, err
	}
	sel := selection{policy: "round_robin", backups: backups} // only backups: the policy is never asked
	if len(primaries) > 0 {
		var err error
		if sel.policy, err = be.groupPolicy(p, primaries); err != nil {
			return sel, err
		}
	}
	sel.backupPolicy = sel.policy
	if be.allBackups != nil {
		var err error
		sel.backupPolicy, err = be.groupPolicy(p, backups)
		return sel, err
	}
	for _, s := range backups {
		if n, at := be.weightOf(s); n == 0 {
			return sel, refuse(*at, "weight 0 on a backup without option allbackups is not translated (HAProxy never takes it as the first backup)")
		}
	}
	return sel, nil
}

// selection is how a backend picks a server: policy (lb_policy's, or the
// primaries' with backups), and the backups with their policy.
type selection struct {
	policy       string
	backups      []server
	backupPolicy string
}

// shorter is the shorter of two Caddy durations; a is "" for none.
func shorter(a, b string) string {
	da, errA := time.ParseDuration(a)
	db, _ := time.ParseDuration(b)
	if errA != nil || db < da {
		return b
	}
	return a
}

// duration reads an HAProxy time (a number with an optional unit us, ms,
// s, m, h or d; milliseconds without one) as a Caddy duration.
func duration(v string, pos Position) (string, error) {
	i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := v, "ms"
	if i >= 0 {
		num, unit = v[:i], v[i:]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || i == 0 {
		return "", errAt(pos, "%q is not an HAProxy time", v)
	}
	per := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[unit]
	if per == 0 {
		return "", errAt(pos, "%q: unit %q is not one of us, ms, s, m, h, d", v, unit)
	}
	d := time.Duration(n) * per
	if unit == "d" {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h", nil
	}
	return num + unit, nil
}

// LeaderPath is the path whose health check marks a backend as the
// cluster's leader pool: it becomes lb_policy leader. A backend checking
// another path is marked so by "description caddy-ha:leader".
const LeaderPath = "/healthz/leader"

// leaderMark in a backend's description makes it a leader pool whatever
// its check's path.
const leaderMark = "caddy-ha:leader"
