package haproxy

import (
	"cmp"
	"regexp"
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
	check      []Line
	checkMeth  string
	checkURI   string
	checkHost  string
	expect     string
	leader     bool // its check asks for the leader (or its description says so)
	active     bool // checked, and not the leader's: Caddy's active health checks
	balance    *Line
	hashType   *Line
	retries    *Line // retries <n>
	cookie     *Line // cookie <name> insert [indirect] [nocache]
	redispatch *Line // option redispatch
	forwardFor *Line // option forwardfor, from the defaults

	allBackups *Line                  // option allbackups
	weights    map[Position]weighting // by server line: the servers with a weight
	// http-response header rules, applied before the frontend's.
	responseHeaders []headerRule
	reuse           *Line
	timeouts        map[string]string // connect, server, tunnel, check, queue
	keepAlive       string            // timeout http-keep-alive, for idle upstream connections
	timeoutSrc      []Line
	log             proxyLog // log global and the like: notes
	caBase          *Line    // global ca-base
	// What the servers' options say (readServers): the transport's TLS
	// and the checks', alike for every server, and each server's notes.
	tls         tlsOptions
	checkOpts   leaderOptions
	serverNotes [][]string
	// What resolve settled.
	transport      string // http, or pinned
	versions       string // the transport's HTTP versions
	writeSelection func(c *caddyfile, key string)
}

type server struct {
	line Line
	name string
	addr string
	opts []option
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

func (t *translator) readBackend(s *Section) (*backend, error) {
	be := &backend{section: s, timeouts: map[string]string{}, caBase: t.global.caBase, lines: t.settingsOf(s)}
	if be.caBase != nil {
		be.lines = append(be.lines, *be.caBase)
	}
	var err error
	if be.mode, err = proxyMode(s, be.lines); err != nil {
		return nil, err
	}
	for _, l := range t.settingsOf(s) {
		if s.Kind == "listen" && keywordSide(l) != backendSide && l.Words[0] != "mode" && l.Words[0] != "description" {
			continue // the listen's frontend's (see the site)
		}
		if !ownLine(s, l) && keywordSide(l) == frontendSide {
			be.notes = append(be.notes, note{line: l, what: fromDefaultsNote(l, s.Kind)})
			continue
		}
		if err := be.read(l); err != nil {
			return nil, err
		}
	}
	if len(be.servers) == 0 {
		return nil, errAt(s.Pos, "backend %s has no server", s.Name)
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

func (be *backend) readCookie(l Line) error {
	w := l.Words
	if len(w) < 3 || w[2] != "insert" {
		return refuse(l, "only cookie <name> insert [indirect] [nocache] is translated")
	}
	for _, o := range w[3:] {
		if o != "indirect" && o != "nocache" {
			return refuse(l, "cookie option %s is not translated yet", o)
		}
	}
	be.cookie = be.replace(be.cookie, l)
	return nil
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
	if ownLine(be.section, l) {
		return refuse(l, "a backend's own option forwardfor is not translated yet (a frontend's or the defaults' is)")
	}
	if err := checkForwardFor(l); err != nil {
		return err
	}
	be.forwardFor = &l
	return nil
}

func (be *backend) readResponseHeader(l Line) error {
	r, err := responseHeader(l)
	be.responseHeaders = append(be.responseHeaders, r)
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
		if len(w) != 4 || w[2] != "status" {
			return refuse(l, "only 'http-check expect status <code>' is translated")
		}
		be.expect = w[3]
	default:
		return refuse(l, "http-check %s is not translated yet", arg(l, 1))
	}
	return nil
}

// readActiveCheck checks that a checked backend other than the leader's
// is one Caddy's active health checks can do: an HTTP check (option
// httpchk) of every server.
func (be *backend) readActiveCheck() error {
	if len(be.check) == 0 || arg(be.check[0], 1) != "httpchk" {
		return errAt(be.section.Pos, "backend %s: a check without option httpchk is a TCP check, which Caddy's active health checks do not do", be.section.Name)
	}
	for _, srv := range be.servers {
		if !slices.ContainsFunc(append(append([]option{}, be.defaults...), srv.opts...), func(o option) bool { return o.word == "check" }) {
			// Issue 28: HAProxy keeps a server without check in rotation
			// unchecked; Caddy's active health check is the whole
			// reverse_proxy's.
			be.notes = append(be.notes, note{line: srv.line, what: "HAProxy does not check this server (it stays in rotation whatever it answers); Caddy's active health check checks every upstream of the reverse_proxy, this one too", approximated: true})
		}
	}
	// HAProxy passes any 2xx or 3xx answer unless told otherwise; Caddy's
	// active health check expects one status (or one class).
	var expect *Line
	for i, l := range be.check {
		if arg(l, 1) == "expect" {
			expect = &be.check[i]
		}
	}
	if expect == nil {
		return refuse(be.check[0], "without http-check expect HAProxy passes any 2xx or 3xx answer, Caddy's active health check one status: write http-check expect status <code>")
	}
	if n, err := strconv.Atoi(be.expect); err != nil || n < 100 || n > 599 {
		return refuse(*expect, "status %s: only one status code (100 to 599) is translated, as Caddy's active health check expects one", be.expect)
	}
	be.active = true
	return nil
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
	if be.balance == nil {
		return "round_robin", nil // HAProxy's default
	}
	l := *be.balance
	algo := arg(l, 1)
	if p := balancePolicies[algo]; p != "" && len(l.Words) == 2 {
		return p, nil
	}
	if strings.HasPrefix(algo, "hdr(") && strings.HasSuffix(algo, ")") && len(algo) > 5 && len(l.Words) == 2 {
		name, err := nameToken(algo[4:len(algo)-1], l.envs)
		if err != nil {
			return "", refuseValue(l, "balance hdr", algo, err)
		}
		return "header " + name, nil
	}
	// random(<draws>): the least loaded of that many servers drawn at
	// random (2 by default, the power of two choices), as Caddy's
	// random_choose does; one draw is plain random.
	if draws, ok := strings.CutPrefix(algo, "random"); ok && len(l.Words) == 2 {
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
	return "", refuse(l, "takes roundrobin, static-rr, leastconn, first, source, uri, random[(<draws>)] or hdr(<name>) without options")
}

// resolve checks what the backend's lines say together and settles
// what its reverse_proxy will be, once its lines and servers are read:
// the notes of balance and hash-type, the leader's check, the transport
// (pinned for http-reuse never), its versions and maxconn, and the
// policy.
func (be *backend) resolve() error {
	for _, l := range []*Line{be.balance, be.hashType} {
		switch {
		case l == nil:
		case be.leader:
			be.notes = append(be.notes, note{line: *l, what: "ignored for the leader's pool: the leader, whichever node it is, gets every request"})
		case l == be.hashType:
			be.notes = append(be.notes, note{line: *l, what: "Caddy's hash policies are its own: a client or key keeps its server while the servers stay the same"})
		}
	}
	if be.leader && be.checkMeth != "" && be.checkMeth != "GET" {
		return refuse(be.check[0], "the leader's check is a GET")
	}
	if be.leader && be.expect != "" && be.expect != "200" {
		return refuse(be.check[len(be.check)-1], "the leader answers 200: expect status %s cannot be the leader's check", be.expect)
	}
	be.transport = "http"
	if be.reuse != nil && arg(*be.reuse, 1) == "never" {
		be.transport = "pinned" // one upstream connection per client connection
	}
	if err := be.checkMaxConns(); err != nil {
		return err
	}
	switch be.tls.alpn {
	case "", "http/1.1":
		be.versions = "1.1"
	case "h2,http/1.1", "http/1.1,h2":
		be.versions = "1.1 2"
	default:
		return refuse(be.servers[0].line, "alpn %s is not translated yet", be.tls.alpn)
	}
	if be.leader {
		return nil
	}
	p, err := be.lbPolicy()
	if err != nil {
		return err
	}
	be.writeSelection, err = be.selection(p)
	return err
}

// checkFrontend refuses the backend where the frontend fe sends to it
// with another option forwardfor than the backend's defaults give it:
// HAProxy adds the header if the frontend or the backend asks for it (in
// the backend's header if both do).
func (be *backend) checkFrontend(fe *frontend) error {
	l := be.forwardFor
	if l == nil || fe.forwardFor != nil && strings.EqualFold(forwardForHeader(*fe.forwardFor), forwardForHeader(*l)) {
		return nil
	}
	return refuse(*l, "backend %s takes it from its defaults, where %s %s has no option forwardfor or another header: a backend's option forwardfor is not translated yet", be.section.Name, fe.section.Kind, fe.section.Name)
}

// write writes the backend's reverse_proxy; fe is the frontend that sends
// to it: its option forwardfor (reverse_proxy sends X-Forwarded-For
// unless told not to) and its http-response header rules.
func (be *backend) write(c *caddyfile, fe *frontend) {
	c.comment(be.section.line(), "")
	if l := be.forwardFor; l != nil {
		c.comment(*l, "the frontend's too: see its forwarded headers")
	}
	var addrs []string
	for i, s := range be.servers {
		c.comment(s.line, strings.Join(be.serverNotes[i], "; "))
		addrs = append(addrs, c.plainOf(s.line, s.addr))
	}
	for _, n := range be.notes {
		c.note(n)
	}
	// Caddy's own Via goes on the answer after header_down: a deferred
	// header removes it.
	c.line("# HAProxy adds no Via header (reverse_proxy would, both ways)")
	c.line("header -Via")
	c.open("reverse_proxy %s", strings.Join(addrs, " "))
	be.writeHeadersUp(c, fe)
	// HAProxy runs the backend's http-response rules, then the frontend's.
	for _, h := range append(append([]headerRule{}, be.responseHeaders...), fe.responseHeaders...) {
		h.write(c, "header_down")
	}
	be.writePolicy(c)
	be.writeTransport(c)
	if d := be.timeouts["tunnel"]; d != "" {
		c.line("# timeout tunnel: HAProxy closes a tunnel (a WebSocket) idle both ways that long; stream_timeout closes it that long after it began, busy or not,")
		c.line("# and the transport's read_timeout and write_timeout (timeout server) still bound each read and write of the upgraded connection")
		c.line("stream_timeout %s", d)
	}
	c.close()
}

// writeHeadersUp writes what the request's headers become on their way to
// the server: the forwarded headers as the frontend's option forwardfor
// asks, the client's Host over TLS, and no Via.
func (be *backend) writeHeadersUp(c *caddyfile, fe *frontend) {
	switch ff := fe.forwardFor; {
	case ff == nil:
		c.line("# no option forwardfor: reverse_proxy's X-Forwarded-* are not sent")
	case !sendsXFF(ff):
		c.line("# option forwardfor header %s: the client's address in it, after any the client sent; reverse_proxy's X-Forwarded-* are not sent", forwardForHeader(*ff))
	}
	if !sendsXFF(fe.forwardFor) {
		c.line("header_up -X-Forwarded-For")
		c.line("header_up -X-Forwarded-Proto")
		c.line("header_up -X-Forwarded-Host")
	}
	if ff := fe.forwardFor; ff != nil && !sendsXFF(ff) {
		c.line("header_up +%s {remote_host}", c.name(forwardForHeader(*ff)))
	}
	if fe.plainForwardFor {
		c.line("# option forwardfor: the client's address after any X-Forwarded-For the client sent, as HAProxy adds it (reverse_proxy trusting every peer's chain); X-Forwarded-Proto and X-Forwarded-Host are not sent (HAProxy sends neither)")
		c.line("trusted_proxies 0.0.0.0/0 ::/0")
		c.line("header_up -X-Forwarded-Proto")
		c.line("header_up -X-Forwarded-Host")
	}
	if be.tls.ssl {
		c.line("# HAProxy passes the client's Host on (reverse_proxy would send the node's address over TLS)")
		c.line("header_up Host {hostport}")
	}
	c.line("header_up -Via")
}

// writeTransport writes the transport: its timeouts, maxconn, TLS and
// HTTP versions.
func (be *backend) writeTransport(c *caddyfile) {
	if be.reuse != nil {
		c.comment(*be.reuse, "")
	}
	for _, l := range be.timeoutSrc {
		c.comment(l, "")
	}
	c.open("transport %s", be.transport)
	if d := be.timeouts["connect"]; d != "" {
		c.line("dial_timeout %s", d)
	}
	if d := be.timeouts["server"]; d != "" {
		c.line("read_timeout %s", d)
		c.line("write_timeout %s", d)
	}
	if be.keepAlive != "" {
		c.line("keepalive %s", be.keepAlive)
	}
	if be.tls.maxConn != "" {
		c.line("# maxconn: at most %s requests at once to each server, one per connection; the next waits for a free one", be.tls.maxConn)
		c.line("# of the server the policy picked, until the client leaves (HAProxy: any server with room, else 503 after timeout queue)")
		c.line("max_conns_per_host %s", be.tls.maxConn)
	}
	if tls := be.tls; tls.ssl {
		c.line("tls")
		if tls.skipVerify {
			c.line("tls_insecure_skip_verify")
		}
		if tls.serverName != "" {
			c.line("tls_server_name %s", c.plainIn(tls.serverName, be.lines))
		}
		if tls.ca != "" {
			c.line("tls_trust_pool file %s", c.plainIn(tls.ca, be.lines))
		}
	}
	c.line("versions %s", be.versions)
	c.close()
}

// writeHealth writes the active health checks of a checked backend other
// than the leader's, with HAProxy's defaults: OPTIONS / every 2s, down
// after 3 failures, up after 2 passes, a 2xx or 3xx answer passes.
func (be *backend) writeHealth(c *caddyfile, lo leaderOptions) {
	for _, l := range be.check {
		c.comment(l, "")
	}
	uri, meth := be.checkURI, be.checkMeth
	if uri == "" {
		uri = "/"
	}
	if meth == "" {
		meth = "OPTIONS"
	}
	c.line("health_uri %s", c.plain(uri))
	c.line("health_method %s", c.name(meth))
	if be.checkHost != "" {
		c.open("health_headers")
		c.line("Host %s", c.plain(be.checkHost))
		c.close()
	}
	status := "2xx 3xx"
	if be.expect != "" {
		status = be.expect
	}
	c.line("health_status %s", status)
	c.line("health_interval %s", cmp.Or(lo.interval, "2s"))
	c.line("health_fails %s", cmp.Or(lo.fails, "3"))
	c.line("health_passes %s", cmp.Or(lo.passes, "2"))
	if d := be.timeouts["check"]; d != "" {
		c.line("health_timeout %s", d)
	}
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
	var weights []string
	var odd *Line // a weight line, one of 0 if there is one
	first, _ := be.weightOf(group[0])
	uneven, zero := false, true
	for _, s := range group {
		n, at := be.weightOf(s)
		if at != nil && (odd == nil || n == 0 && !slices.Contains(weights, "0")) {
			odd = at
		}
		uneven = uneven || n != first || n == 0
		zero = zero && n == 0
		weights = append(weights, strconv.Itoa(n))
	}
	if !uneven {
		return p, nil
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

// selection is how the backend picks a server, written as lb_policy or
// as the cookie policy's fallback: the balance's policy p (with weights,
// see groupPolicy), or, with backup servers, lb_policy backup with that
// policy for the others, and the first backup up when none of them is (or
// with option allbackups, the backups balanced as the others are).
func (be *backend) selection(p string) (func(c *caddyfile, key string), error) {
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
		return func(c *caddyfile, key string) {
			if be.allBackups != nil {
				c.comment(*be.allBackups, "no backup server")
			}
			c.line("%s %s", key, policy)
		}, err
	}
	policy := "round_robin" // only backups: the policy is never asked
	if len(primaries) > 0 {
		var err error
		if policy, err = be.groupPolicy(p, primaries); err != nil {
			return nil, err
		}
	}
	backupPolicy := policy
	if be.allBackups != nil {
		var err error
		if backupPolicy, err = be.groupPolicy(p, backups); err != nil {
			return nil, err
		}
	} else {
		for _, s := range backups {
			if n, at := be.weightOf(s); n == 0 {
				return nil, refuse(*at, "weight 0 on a backup without option allbackups is not translated (HAProxy never takes it as the first backup)")
			}
		}
	}
	return func(c *caddyfile, key string) {
		dials := make([]string, len(backups))
		for i, s := range backups {
			dials[i] = c.plainOf(s.line, s.addr)
		}
		if be.allBackups != nil {
			c.comment(*be.allBackups, "")
		}
		c.open("%s backup", key)
		c.line("backups %s", strings.Join(dials, " "))
		c.line("primary_policy %s", policy)
		if be.allBackups != nil {
			c.line("all_backups")
			if backupPolicy != policy {
				c.line("backup_policy %s", backupPolicy)
			}
		}
		c.close()
	}, nil
}

// writeRetries writes HAProxy's retries (3 by default) as lb_retries:
// both retry a request whose connection failed; Caddy picks the server
// again for each retry, as HAProxy does with option redispatch on the last.
func (be *backend) writeRetries(c *caddyfile) {
	n := "3"
	if be.retries != nil {
		c.comment(*be.retries, "")
		n = arg(*be.retries, 1)
	}
	if be.redispatch != nil {
		c.comment(*be.redispatch, "")
	}
	if n != "0" {
		c.line("lb_retries %s", n)
	}
}

// writePolicy writes the backend's lb_policy: the leader's, with its
// check, or the one of its balance.
func (be *backend) writePolicy(c *caddyfile) {
	if be.leader {
		be.writeLeaderPolicy(c)
		return
	}
	if be.active {
		be.writeHealth(c, be.checkOpts)
	}
	if be.balance != nil {
		c.comment(*be.balance, "")
	}
	if be.cookie == nil {
		be.writeSelection(c, "lb_policy")
		be.writeRetries(c)
		return
	}
	// HAProxy's inserted cookie names the server; Caddy's cookie policy
	// sets one that hashes the server's address, and picks by the
	// balance policy while a client has none. A cookie naming a backup
	// that is up sends to it, as in HAProxy.
	l := *be.cookie
	c.comment(l, "")
	c.open("lb_policy cookie %s", c.name(l.Words[1]))
	be.writeSelection(c, "fallback")
	c.close()
	if slices.Contains(l.Words[3:], "indirect") { // the server never sees the cookie
		c.line(`header_up Cookie "(^|;\s*)%s=[^;]*" ""`, regexp.QuoteMeta(l.Words[1]))
	}
	if slices.Contains(l.Words[3:], "nocache") { // no cache keeps an answer that may set it
		c.line("header_down Cache-Control private")
	}
	be.writeRetries(c)
}

// writeLeaderPolicy writes lb_policy leader, with the check's settings.
func (be *backend) writeLeaderPolicy(c *caddyfile) {
	for _, l := range []*Line{be.retries, be.redispatch} {
		if l != nil {
			c.comment(*l, "ignored: lb_policy leader holds a request and tries the leader until hold")
		}
	}
	if be.cookie != nil {
		// A server's cookie is refused in the leader's pool: HAProxy
		// inserts a cookie only for a server with a cookie value.
		c.comment(*be.cookie, "ignored: no server of the leader's pool has a cookie value, so HAProxy inserts none; the leader gets every request")
	}
	for _, l := range be.check {
		c.comment(l, "")
	}
	c.open("lb_policy leader")
	if be.checkURI != LeaderPath && be.checkURI != "" {
		c.line("uri %s", c.plain(be.checkURI))
	}
	lo := be.checkOpts
	for _, setting := range [][2]string{{"host", c.plainIfAny(be.checkHost)}, {"interval", lo.interval}, {"fails", lo.fails}, {"passes", lo.passes},
		{"timeout", be.timeouts["check"]}, {"hold", be.timeouts["queue"]}} { // hold: how long a request waits for a server: here, for a leader
		if setting[1] != "" {
			c.line("%s %s", setting[0], setting[1])
		}
	}
	c.close()
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
