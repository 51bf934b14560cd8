package haproxy

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// Writing a backend's reverse_proxy.

// write writes the backend's reverse_proxy; fe is the frontend that sends
// to it: its option forwardfor (reverse_proxy sends X-Forwarded-For
// unless told not to) and its http-response header rules.
func (be *backend) write(c *caddyfile, fe *frontend) {
	c.comment(be.section.line(), "")
	if l := be.forwardFor; l != nil {
		c.comment(*l, "HAProxy adds the header if the frontend or the backend asks for it, in the backend's: see the reverse_proxy's header_up")
	}
	routed := be.writeRequestSide(c, fe)
	if len(be.servers) == 0 {
		be.writeWithoutServer(c, fe, routed)
		return
	}
	var addrs []string
	for i, s := range be.servers {
		c.comment(s.line, strings.Join(be.serverNotes[i], "; "))
		addrs = append(addrs, c.plainOf(s.line, s.addr))
	}
	for _, n := range be.notes {
		c.note(n)
	}
	be.writeDeferredResponse(c)
	// Caddy's own Via goes on the answer after header_down: a deferred
	// header removes it.
	comp := effectiveCompression(fe, be)
	comp.write(c)
	c.line("# HAProxy adds no Via header (reverse_proxy would, both ways)")
	c.line("header -Via")
	fe.writeDeferredResponseHeaders(c)
	if be.checked != "" {
		c.open("reverse_proxy")
		be.writeChecked(c, addrs)
	} else {
		c.open("reverse_proxy %s", strings.Join(addrs, " "))
	}
	be.writeHeadersUp(c, fe)
	for _, l := range []*Line{fe.bufferRequest, be.bufferRequest} {
		if l != nil {
			c.comment(*l, "the body, up to HAProxy's buffer size (tune.bufsize), read before the request goes to a server")
			c.line("request_buffers %s", fe.global.requestBuffers())
			break
		}
	}
	if comp.offload {
		c.line("# compression offload: the server is not asked to compress")
		c.line("header_up -Accept-Encoding")
	}
	// HAProxy runs the backend's http-response rules, then the frontend's.
	if !be.deferredResponse() {
		for _, r := range be.responseActions {
			r.header.write(c, "header_down")
		}
	}
	for _, h := range fe.responseHeaders {
		if h.cond == nil {
			h.write(c, "header_down")
		}
	}
	be.writePolicy(c)
	be.writeTransport(c)
	if d := be.timeouts["tunnel"]; d != "" {
		c.line("# timeout tunnel: HAProxy closes a tunnel (a WebSocket) idle both ways that long; stream_timeout closes it that long after it began, busy or not,")
		c.line("# and the transport's read_timeout and write_timeout (timeout server) still bound each read and write of the upgraded connection")
		c.line("stream_timeout %s", d)
	}
	c.close()
	if routed {
		c.close()
	}
}

// writeWithoutServer writes the end of a backend without a server (its
// servers all disabled, or none written): HAProxy answers 503, with its
// own page, to what its rules did not answer; what only a server's
// answers or the choice of a server would use is noted as ignored.
func (be *backend) writeWithoutServer(c *caddyfile, fe *frontend, routed bool) {
	for _, n := range be.notes {
		c.note(n)
	}
	unused := append(append(append([]Line{}, be.check...), be.timeoutSrc...), be.compression.lines...)
	for _, l := range []*Line{be.balance, be.hashType, be.retries, be.redispatch, be.cookie, be.allBackups, be.reuse, be.bufferRequest, fe.bufferRequest} {
		if l != nil {
			unused = append(unused, *l)
		}
	}
	for _, r := range be.responseActions {
		unused = append(unused, r.line)
	}
	for _, h := range fe.responseHeaders {
		unused = append(unused, h.line)
	}
	for _, l := range unused {
		c.comment(l, "ignored: "+be.section.Kind+" "+be.section.Name+" has no server to send to or answer")
	}
	c.line("# no server: HAProxy answers 503 to what the rules above did not answer")
	c.line("error 503")
	if routed {
		c.close()
	}
}

// writeRequestSide writes what runs before the backend's reverse_proxy:
// its own rules and the vars its header_up reads, in a route (in the
// order written, after the frontend's rules, as HAProxy runs a backend's
// rules on the requests it gets) it tells whether it opened.
func (be *backend) writeRequestSide(c *caddyfile, fe *frontend) bool {
	u := sentForwardFor(fe, be)
	kept := u.conditional() && u.plainXFF(fe)
	lacking := be.mayLack(fe)
	routed := kept || len(lacking) > 0 || len(be.requestRules)+len(be.redirects) > 0 || be.stats != nil || be.writesFcgiIndex()
	if routed {
		c.open("route")
	}
	be.writeRules(c)
	if be.writesFcgiIndex() {
		be.writeFcgiIndex(c)
	}
	for _, name := range lacking {
		// header_up sends the request's (its value "" where it lacks
		// one); HAProxy sends none: the name of a deletion then.
		c.remark("the rules may leave the request without %s: then none reaches the server (header_up deletes the name this var holds)", name)
		c.line("@lacks_%s header !%s", name, name)
		c.line("vars @lacks_%s %s %s", name, lacksVar(name), name)
	}
	if kept {
		writeKeptXFF(c, u)
	}
	return routed
}

// writeDeferredResponse writes the backend's http-response rules, when
// one has a condition, as deferred header handlers in order (each with
// its matcher), which change the server's answer as it is written: after
// the rules that answer themselves, as HAProxy applies no http-response
// rule to those.
func (be *backend) writeDeferredResponse(c *caddyfile) {
	if !be.deferredResponse() {
		return
	}
	c.line("# http-response rules with a condition: deferred header handlers, which change the answer as it is written")
	for _, r := range be.responseActions {
		c.open("header%s", writeCondition(c, r.line, r.cond, r.when, "response"))
		r.header.writeOp(c, "")
		c.line("defer")
		c.close()
	}
}

// writePath writes the rule's path rewrite as uri path_regexp (a query
// or a URI set as rewrite <uri>), with its condition's matcher.
func (r requestRule) writePath(c *caddyfile) {
	n := note{line: r.line, what: r.path.approx, approximated: r.path.approx != ""}
	m := writeNotedCondition(c, n, r.cond, r.when, "path")
	if r.path.uri != "" {
		c.line("rewrite%s %s", m, c.literal(r.path.uri))
		return
	}
	c.line("uri%s path_regexp %s %s", m, c.plain(r.path.find), c.literal(r.path.replace))
}

// writeRules writes the backend's own http-request rules, its stats
// page, then its redirect rules, each with its condition's matcher.
func (be *backend) writeRules(c *caddyfile) {
	writeRequestRules(c, be.requestRules)
	if be.stats != nil {
		be.stats.write(c)
	}
	writeRequestRules(c, be.redirects)
	for _, l := range be.aclLines {
		if !be.usedACLs[l.Pos] {
			c.comment(l, "used by no rule")
		}
	}
}

// writeRequestRules writes a backend's rules, in order.
func writeRequestRules(c *caddyfile, rules []requestRule) {
	for _, r := range rules {
		switch {
		case r.header != nil:
			r.header.writeOp(c, "request_header"+writeCondition(c, r.line, r.cond, r.when, "header"))
		case r.path != nil:
			r.writePath(c)
		default:
			r.answer.write(c, writeCondition(c, r.line, r.cond, r.when, "answer"))
		}
	}
}

// writeKeptXFF writes which requests keep their X-Forwarded-For as they
// have it, where HAProxy adds none (a client of an except network, or a
// request that has one with if-none): vars that reverse_proxy's header_up
// reads (see writeHeadersUp) to take its own address back off, or to
// remove the header it would add to a request that has none.
func writeKeptXFF(c *caddyfile, u forwardForUse) {
	var nets []string
	for _, l := range u.lines {
		c.comment(l, "")
		if o, _ := forwardForOptions(l); o.except != "" {
			nets = append(nets, c.plain(o.except))
		}
	}
	c.line("# HAProxy adds no X-Forwarded-For to these requests: they keep the one they have, or none")
	c.line("vars %s $0", keptVar)
	if u.ifNone {
		c.line("@forwardfor_present header X-Forwarded-For *")
		c.line("vars @forwardfor_present %s $1", keptVar)
	}
	if len(nets) > 0 {
		c.line("@forwardfor_except remote_ip %s", strings.Join(nets, " "))
		c.line("vars @forwardfor_except %s $1", keptVar)
		c.open("@forwardfor_except_none")
		c.line("remote_ip %s", strings.Join(nets, " "))
		c.line("header !X-Forwarded-For")
		c.close()
		c.line("vars @forwardfor_except_none %s X-Forwarded-For", droppedVar)
	}
}

// keptVar is the replacement of reverse_proxy's X-Forwarded-For ("<the
// request's>, <client>"): $0 as it is, $1 the request's; droppedVar names
// the header where the request had none to keep.
const keptVar, droppedVar = "haproxy_forwardfor_kept", "haproxy_forwardfor_dropped"

// writeDeferredResponseHeaders writes the frontend's http-response rules
// with a condition (header_down takes no matcher): each a deferred header
// directive, the last first, since the deferred operation of a handler
// that runs later is applied first.
func (fe *frontend) writeDeferredResponseHeaders(c *caddyfile) {
	var conditional []headerRule
	for _, h := range fe.responseHeaders {
		if h.cond != nil {
			conditional = append(conditional, h)
		}
	}
	if len(conditional) > 1 {
		c.line("# the frontend's http-response rules with a condition, the last first: Caddy applies the one written last first")
	}
	for _, h := range slices.Backward(conditional) {
		h.writeDeferred(c)
	}
}

// writeHeadersUp writes what the request's headers become on their way to
// the server: the forwarded headers as the frontend's option forwardfor
// asks, the client's Host over TLS, and no Via.
func (be *backend) writeHeadersUp(c *caddyfile, fe *frontend) {
	u := sentForwardFor(fe, be)
	plain := u.plainXFF(fe)
	switch {
	case u.header == "":
		c.line("# no option forwardfor: reverse_proxy's X-Forwarded-* are not sent")
	case !strings.EqualFold(u.header, "X-Forwarded-For"):
		c.remark("option forwardfor header %s: the client's address in it, after any the client sent; reverse_proxy's X-Forwarded-* are not sent", u.header)
	case plain:
		c.line("# option forwardfor: the client's address after any X-Forwarded-For the client sent, as HAProxy adds it (reverse_proxy trusting every peer's chain)")
		c.line("trusted_proxies 0.0.0.0/0 ::/0")
	}
	if plain && u.conditional() {
		c.line("# where HAProxy adds none (see the vars above): the header as the request has it")
		c.line("header_up -{vars.%s}", droppedVar)
		c.line(`header_up X-Forwarded-For "^(.*), [^,]*$" {vars.%s}`, keptVar)
	}
	f := fe.forwarding
	ruled := be.ruledForwarding(f.ruled)
	lacking := be.mayLack(fe)
	for _, name := range forwardingHeaders {
		switch {
		case f.handler, plain && name == "X-Forwarded-For":
			// the forwarded handler's set, or reverse_proxy's after the
			// request's chain
		case ruled[name]:
			c.line("header_up %s {http.request.header.%s}", name, name) // as the header rules made it
			if slices.Contains(lacking, name) {
				c.line("header_up -{http.vars.%s}", lacksVar(name))
			}
		default:
			c.line("header_up -%s", name)
		}
	}
	if u.header != "" && !strings.EqualFold(u.header, "X-Forwarded-For") {
		c.line("header_up +%s {remote_host}", c.name(u.header))
	}
	if h := fe.uniqueID.sentHeader(); h != "" {
		c.remark("unique-id-header %s: Caddy's ID of the request (see the site)", h)
		c.line("header_up +%s {http.request.uuid}", c.name(h))
	}
	if be.tls.ssl {
		c.line("# HAProxy passes the client's Host on (reverse_proxy would send the node's address over TLS)")
		c.line("header_up Host {hostport}")
	}
	be.writeFcgiHeadersUp(c)
	c.line("header_up -Via")
}

// writeTransport writes the transport: its timeouts, maxconn, TLS and
// HTTP versions, and no Accept-Encoding of its own (Go's transport would
// ask a server for gzip where the request has none; HAProxy does not).
func (be *backend) writeTransport(c *caddyfile) {
	if be.reuse != nil {
		c.comment(*be.reuse, "")
	}
	for _, l := range be.timeoutSrc {
		c.comment(l, "")
	}
	if be.transport == "fastcgi" {
		be.writeFastCGITransport(c)
		return
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
		c.remark("maxconn: at most %s requests at once to each server, one per connection; the next waits for a free one", be.tls.maxConn)
		c.line("# of the server the policy picked, until the client leaves (HAProxy: any server with room, else 503 after timeout queue)")
		c.line("max_conns_per_host %s", be.tls.maxConn)
	}
	be.writeTLS(c)
	c.line("compression off")
	if v := be.tls.proxyProtocol; v != "" {
		c.line("proxy_protocol %s", v)
	}
	c.line("versions %s", be.versions)
	c.close()
}

// writeTLS writes the servers' TLS settings, if they have ssl, as the
// transport and dynamic checked both name them.
func (be *backend) writeTLS(c *caddyfile) {
	tls := be.tls
	if !tls.ssl {
		return
	}
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
	if lo.port != "" {
		c.line("health_port %s", lo.port)
	}
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
	if be.active && be.checked == "" {
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
	c.note(note{line: l, what: be.cookieNote, approximated: be.cookieNote != ""})
	c.open("lb_policy cookie %s", c.name(be.cookieName))
	be.writeSelection(c, "fallback")
	c.close()
	if l.Words[0] == "cookie" && slices.Contains(l.Words[3:], "indirect") { // the server never sees the cookie
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

// writeSelection writes how the backend picks a server, as key (lb_policy,
// or the cookie policy's fallback): the balance's policy, or lb_policy
// backup with that policy for the primaries, and the first backup up when
// none of them is (with option allbackups, the backups balanced as well).
func (be *backend) writeSelection(c *caddyfile, key string) {
	sel := be.selection
	if len(sel.backups) == 0 {
		if be.allBackups != nil {
			c.comment(*be.allBackups, "no backup server")
		}
		c.line("%s %s", key, be.policyToken(c, sel.policy))
		return
	}
	dials := make([]string, len(sel.backups))
	for i, s := range sel.backups {
		dials[i] = c.plainOf(s.line, s.addr)
	}
	if be.allBackups != nil {
		c.comment(*be.allBackups, "")
	}
	c.open("%s backup", key)
	c.line("backups %s", strings.Join(dials, " "))
	c.line("primary_policy %s", be.policyToken(c, sel.policy))
	if be.allBackups != nil {
		c.line("all_backups")
		if sel.backupPolicy != sel.policy {
			c.line("backup_policy %s", be.policyToken(c, sel.backupPolicy))
		}
	}
	c.close()
}

// policyToken is a policy as written: header's field name through the
// token writer.
func (be *backend) policyToken(c *caddyfile, p string) string {
	if field, ok := strings.CutPrefix(p, "header "); ok {
		return "header " + c.nameOf(*be.balance, field)
	}
	return p
}

// writeChecked writes the servers as dynamic checked's, with HAProxy's
// check: a TCP connect, or an HTTP request that any 2xx or 3xx answer
// passes; each setting only where the configuration gives it (the
// module's defaults are HAProxy's).
func (be *backend) writeChecked(c *caddyfile, addrs []string) {
	for _, l := range be.check {
		c.comment(l, "")
	}
	if be.checked == "none" {
		c.line("# no check: every server is up while its name resolves, as in HAProxy")
	} else {
		c.line("# HAProxy's server checks: the servers that pass them are the upstreams")
	}
	c.open("dynamic checked")
	if be.resolving.resolvers != nil {
		be.writeResolve(c, addrs)
	} else {
		c.line("servers %s", strings.Join(addrs, " "))
	}
	c.line("check %s", be.checked)
	if be.counted {
		c.line("# its count of servers up, published for nbsrv: usable_servers reads it")
		c.line("name %s", c.plainOf(be.section.line(), be.section.Name))
	}
	if be.checked == "none" {
		c.close()
		return
	}
	lo := be.checkOpts
	settings := [][2]string{{"interval", lo.interval}, {"fast_interval", lo.fastInterval}, {"down_interval", lo.downInterval}, {"fall", lo.fails}, {"rise", lo.passes}}
	if be.checked == "http" {
		settings = append([][2]string{{"method", c.nameIfAny(be.checkMeth)}, {"uri", c.plainIfAny(be.checkURI)}, {"host", c.plainIfAny(be.checkHost)}, {"expect_status", be.expect}}, settings...)
	}
	if e := be.expectRule; e != nil {
		negation := ""
		if e.negate {
			negation = "! "
		}
		c.line("expect %s%s %s", negation, e.match, c.plainOf(e.line, e.pattern))
	}
	if be.disableOn404 != nil {
		c.line("disable_on_404")
	}

	if d := be.timeouts["check"]; d != "" {
		// HAProxy bounds the connection by the smaller of timeout connect
		// and inter, the answer by timeout check.
		settings = append(settings, [2]string{"timeout", d}, [2]string{"connect_timeout", shorter(be.timeouts["connect"], cmp.Or(lo.interval, "2s"))})
	}
	for _, s := range settings {
		if s[1] != "" {
			c.line("%s %s", s[0], s[1])
		}
	}
	if be.tls.ssl {
		c.line("# the servers' ssl: HAProxy checks them over TLS (check-ssl), with their TLS settings")
		be.writeTLS(c)
	}
	c.close()
}

// writeResolve writes the servers of dynamic checked as names it
// resolves at run time (addrs, as written): each with its count of
// servers, through the resolvers section's DNS servers (none: the
// system's resolver), again every hold valid.
func (be *backend) writeResolve(c *caddyfile, addrs []string) {
	res := be.resolving.resolvers
	c.remark("server names resolved at run time, as HAProxy's resolvers %s does: each address found is a server, up to the count", res.section.Name)
	for i, s := range be.servers {
		c.line("resolve %s %d", addrs[i], max(s.slots, 1))
	}
	var nameservers []string
	for _, ns := range res.nameservers {
		nameservers = append(nameservers, c.plainIn(ns, res.lines))
	}
	if len(nameservers) > 0 {
		c.line("resolvers %s", strings.Join(nameservers, " "))
	}
	for _, s := range [][2]string{{"refresh", res.holdValid}, {"resolve_timeout", res.timeout}} {
		if s[1] != "" {
			c.line("%s %s", s[0], s[1])
		}
	}
	if be.resolving.preferIPv4 {
		c.line("prefer_ipv4")
	}
	if be.resolving.allowDupIP {
		c.line("allow_dup_ip")
	}
}

// write writes the compression of a backend's answers, its lines as
// notes: encode gzip for what HAProxy compresses (statuses 200 to 203,
// the types, if any, as prefixes of Content-Type); nothing without gzip.
func (comp compression) write(c *caddyfile) {
	for _, l := range comp.lines {
		c.note(note{line: l, what: keywordAt(l).doc, approximated: true})
	}
	if !comp.gzip() {
		if len(comp.lines) > 0 {
			c.line("# no gzip among the algorithms: nothing is compressed")
		}
		return
	}
	c.open("encode gzip")
	c.line("# HAProxy compresses any length")
	c.line("minimum_length 1")
	c.open("match")
	c.line("status 200 201 202 203")
	for _, t := range comp.types {
		c.line("header Content-Type %s", c.plain(t+"*"))
	}
	c.close()
	c.close()
}

// lacksVar names the var that holds name where the request lacks that
// forwarding header once the frontend's and the backend's rules ran.
func lacksVar(name string) string { return "haproxy_lacks_" + name }
