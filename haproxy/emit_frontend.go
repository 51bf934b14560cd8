package haproxy

import (
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// write writes the rule, after its line as a comment (with its
// condition's ACLs and matcher), as directive (request_header,
// header_down).
func (h headerRule) write(c *caddyfile, directive string) {
	c.line("%s%s %s", directive, h.head(c, "header_"), h.operation(c))
}

// writeDeferred writes a rule of the frontend's http-response with a
// condition as the header directive with its matcher, deferred until the
// server's answer is written, after each header_down.
func (h headerRule) writeDeferred(c *caddyfile) {
	c.open("header%s", h.head(c, "response_"))
	c.line("%s", h.operation(c))
	c.line("defer")
	c.close()
}

// head writes the rule's line as a comment, with its condition's ACLs and
// matcher (named prefix and its line), and returns " @<matcher>" ("" for
// a rule without a condition).
func (h headerRule) head(c *caddyfile, prefix string) string {
	if h.cond != nil {
		for _, l := range h.when.acls {
			c.comment(l, "")
		}
	}
	c.comment(h.line, "")
	if h.cond == nil {
		return ""
	}
	name := "@" + prefix + strconv.Itoa(h.line.Pos.Line)
	writeMatcher(c, name, h.when)
	return " " + name
}

// operation is the rule as a header operation of Caddy: -name, name
// value, +name value, or name find replace (a replacement of each line).
func (h headerRule) operation(c *caddyfile) string {
	switch h.op {
	case "del-header":
		return "-" + c.name(h.name)
	case "set-header":
		return c.name(h.name) + " " + c.composed(h.v)
	case "replace-header":
		return c.name(h.name) + " " + c.plain(h.find) + " " + c.literal(h.replace)
	}
	return "+" + c.name(h.name) + " " + c.composed(h.v)
}

// writeOp writes the rule as directive ("": a line of a header block),
// without its line.
func (h headerRule) writeOp(c *caddyfile, directive string) {
	if directive != "" {
		directive += " "
	}
	c.line("%s%s", directive, h.operation(c))
}

// writeServers writes the servers option of each listener of the
// frontend; global is the global section's maxconn, nil if none.
func (fe *frontend) writeServers(c *caddyfile, global *Line) {
	for _, b := range fe.binds {
		c.comment(b.line, "")
		for _, l := range fe.timeoutLines {
			c.comment(l, "")
		}
		c.open("servers %s", c.plainOf(b.line, listener(b.addr)))
		fe.writeListenerWrappers(c, global, b)
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
func (fe *frontend) writeSite(c *caddyfile) {
	c.line("")
	c.comment(fe.section.line(), "")
	var plain, secure []bind
	for _, b := range fe.binds {
		if b.isTLS {
			secure = append(secure, b)
		} else {
			plain = append(plain, b)
		}
	}
	if len(plain) == 0 || len(secure) == 0 {
		openSite(c, append(plain, secure...))
		fe.writeSiteBody(c, len(secure) > 0)
		c.close()
		return
	}
	// A Caddy server is HTTP or HTTPS: a site for the binds without ssl,
	// one for those with, each importing what the frontend does.
	snippet := "haproxy_" + fe.section.Kind + "_" + fe.section.Name
	c.remark("binds with and without ssl: a site for each (a Caddy server is HTTP or HTTPS), both importing (%s)", snippet)
	c.open("(%s)", snippet)
	fe.writeSiteBody(c, false)
	c.close()
	openSite(c, plain)
	c.line("import %s", snippet)
	c.close()
	openSite(c, secure)
	fe.writeTLS(c)
	c.line("import %s", snippet)
	c.close()
}

// openSite opens the site of binds (all with ssl or all without): its
// addresses, and the hosts it binds.
func openSite(c *caddyfile, binds []bind) {
	var addrs, hosts []string
	for _, b := range binds {
		scheme := "http://"
		if b.isTLS {
			scheme = "https://"
		}
		host, port, _ := net.SplitHostPort(b.addr)
		addrs = append(addrs, c.plainOf(b.line, scheme+":"+port))
		if host != "" {
			hosts = append(hosts, c.plainOf(b.line, host))
		}
	}
	c.open("%s", strings.Join(addrs, ", "))
	if len(hosts) > 0 {
		c.line("bind %s", strings.Join(hosts, " "))
	}
}

// writeSiteBody writes what the frontend's site does: its notes, its
// log, its TLS (withTLS: in this block, not a site of its own), its error
// pages and its route.
func (fe *frontend) writeSiteBody(c *caddyfile, withTLS bool) {
	for _, n := range fe.notes {
		c.note(n)
	}
	fe.log.writeSite(c, fe.global, fe.accessLogger())
	writeLogSkips(c, fe.logSkips)
	if withTLS {
		fe.writeTLS(c)
	}
	writeNoServerHeader(c)
	writeAfterResponse(c, fe.afterResponse)
	for _, code := range slices.Sorted(maps.Keys(fe.errorPages)) {
		fe.errorPages[code].write(c, fe.afterResponse)
	}
	for _, status := range fe.ownPages {
		writeOwnPage(c, status, fe.afterResponse)
	}
	for _, name := range fe.formatMaps {
		writeFormatMap(c, name)
	}
	// A header rule with a matcher would go before those without (Caddy
	// sorts a directive's matched routes first) but for a route.
	routed := len(fe.answers)+len(fe.redirects)+len(fe.connectionRules)+len(fe.pathRewrites) > 0 || fe.stats != nil || fe.monitorURI != nil || slices.ContainsFunc(fe.headers, func(h headerRule) bool { return h.cond != nil })
	if routed {
		// In the order written, as HAProxy runs its rules: the
		// connection rules, the monitor URI, the header rules, those that
		// answer and the path rewrites (in their order), the stats page,
		// the redirect rules, then the backends.
		c.open("route")
	}
	fe.writeConnectionRules(c)
	fe.writeMonitor(c)
	fe.writeHeaders(c)
	fe.writeAnswersAndRewrites(c)
	if fe.stats != nil {
		fe.stats.write(c)
	}
	writeAnswers(c, fe.redirects)
	fe.writeRules(c)
	fe.writeDefaultBackend(c)
	if routed {
		c.close()
	}
}

// writeDefaultBackend writes what no rule takes: the default_backend's
// reverse_proxy, or without one (a port-80 frontend that only redirects
// to HTTPS, say) 503, as HAProxy answers it.
func (fe *frontend) writeDefaultBackend(c *caddyfile) {
	if fe.backend == nil {
		c.line("# no default_backend: HAProxy answers 503 to what no rule or page took")
		c.line("error 503")
		return
	}
	c.comment(fe.backendLine, "")
	if len(fe.rules) > 0 {
		c.open("handle")
	}
	fe.backend.write(c, fe)
	if len(fe.rules) > 0 {
		c.close()
	}
}

// writeTLS writes the TLS site's certificates, with the global section's
// TLS defaults.
func (fe *frontend) writeTLS(c *caddyfile) {
	certs := fe.certs
	if !slices.ContainsFunc(certs.notes, func(n note) bool { return n.line.Pos == certs.bind.line.Pos }) {
		c.comment(certs.bind.line, "")
	}
	for _, based := range certs.based {
		c.comment(*fe.global.crtBase, based)
	}
	for _, n := range certs.notes {
		c.note(n)
	}
	if len(certs.files) > 1 {
		c.remark("%d crt files: each a tls directive; Caddy picks the certificate by the client's SNI, as HAProxy does", len(certs.files))
	}
	if len(certs.dirs) > 0 {
		// Every PEM bundle (certificate and key) in the directories.
		c.open("tls")
		loads := make([]string, len(certs.dirs))
		for i, d := range certs.dirs {
			loads[i] = c.plainIn(d, fe.lines)
		}
		c.line("load %s", strings.Join(loads, " "))
		writeLines(c, certs.settings)
		c.close()
		return
	}
	for _, path := range certs.files {
		// HAProxy's crt file holds the certificate and its key: Caddy
		// reads each from the same file.
		tok := c.plainIn(path, fe.lines)
		if len(certs.settings) == 0 {
			c.line("tls %s %s", tok, tok)
			continue
		}
		c.open("tls %s %s", tok, tok)
		writeLines(c, certs.settings)
		c.close()
	}
}

func writeLines(c *caddyfile, lines []string) {
	for _, d := range lines {
		c.line("%s", d)
	}
}

// writeAnswers writes rules that answer the client, each with its
// condition's matcher.
func writeAnswers(c *caddyfile, answers []answerRule) {
	for _, a := range answers {
		matcher := writeCondition(c, a.line, a.cond, a.when, "answer")
		if a.inFlight != 0 {
			c.line("# the client's requests in progress, this one included, until each is answered: HAProxy's conn_cur of http-request track-sc src")
			c.open("in_flight")
			c.line("size %s", strconv.Itoa(a.inFlight))
			c.close()
		}
		a.answer.write(c, matcher)
	}
}

// writeAnswersAndRewrites writes the http-request rules that answer and
// the path rewrites in the order written, as HAProxy runs them.
func (fe *frontend) writeAnswersAndRewrites(c *caddyfile) {
	answers, rewrites := fe.answers, fe.pathRewrites
	for len(answers) > 0 || len(rewrites) > 0 {
		if len(rewrites) == 0 || len(answers) > 0 && comparePos(answers[0].line.Pos, rewrites[0].line.Pos) < 0 {
			writeAnswers(c, answers[:1])
			answers = answers[1:]
			continue
		}
		rewrites[0].writePath(c)
		rewrites = rewrites[1:]
	}
}

// writeCondition writes a rule's line, after its ACLs' and before the
// named matcher of its condition (cond nil: none), and returns the
// matcher as the rule's directive takes it (" @<kind>_<line>", or "").
func writeCondition(c *caddyfile, l Line, cond *Condition, when matcher, kind string) string {
	return writeNotedCondition(c, note{line: l}, cond, when, kind)
}

// writeNotedCondition is writeCondition of a rule whose line is noted
// with what became of it (n).
func writeNotedCondition(c *caddyfile, n note, cond *Condition, when matcher, kind string) string {
	for _, acl := range when.acls {
		c.comment(acl, "")
	}
	c.note(n)
	if cond == nil {
		return ""
	}
	name := "@" + kind + "_" + strconv.Itoa(n.line.Pos.Line)
	writeMatcher(c, name, when)
	return " " + name
}

// writeRules writes each use_backend rule as an expression matcher and a
// handle with its backend's reverse_proxy. Caddy keeps handle blocks with
// named matchers in the order written, and runs the first that matches,
// as HAProxy runs the first use_backend whose condition holds; the
// default_backend's handle comes last.
func (fe *frontend) writeRules(c *caddyfile) {
	for _, r := range fe.rules {
		for _, l := range r.when.acls {
			c.comment(l, "")
		}
		c.comment(r.line, r.note)
		name := "use_backend_" + strconv.Itoa(r.line.Pos.Line)
		writeMatcher(c, "@"+name, r.when)
		c.open("handle @%s", name)
		r.backend.write(c, fe)
		c.close()
	}
	for _, l := range fe.aclLines {
		if !fe.usedACLs[l.Pos] {
			c.comment(l, "used by no rule")
		}
	}
}

// writeHeaders writes the header rules: those that make up what the
// forwarded handler does as the forwarded handler, the others as
// request_header.
func (fe *frontend) writeHeaders(c *caddyfile) {
	f := fe.forwarding
	switch ff := fe.forwardFor; {
	case ff == nil:
		if removed := fe.removedByAll(); len(removed) > 0 && len(fe.backends()) > 0 {
			c.note(note{line: fe.section.line(), what: removedClaims(removed), approximated: true})
		}
	case !sendsXFF(ff):
		h := forwardForHeader(*ff)
		what := "the client's address in " + h + ", after any the client sent, as HAProxy adds it: header_up +" + h + " {remote_host} in each reverse_proxy below, which sends no X-Forwarded-For"
		if len(f.removed) > 0 {
			what += "; " + removedClaims(f.removed)
		}
		c.note(note{line: *ff, what: what, approximated: len(f.removed) > 0})
	case f.handler:
		// A client's chain deleted, then the client appended: the
		// forwarded handler's chain, which starts afresh at the client.
		for _, l := range f.used {
			c.comment(l, "")
		}
		c.note(note{line: *ff, what: "the forwarded handler writes one consistent set, X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host (the request's Host, which HAProxy does not add); it removes the other forwarding headers a client sends (X-Real-IP, Forwarded, a client's X-Forwarded-Host and the rest of docs/forwarded.md's list), where HAProxy passes what these rules do not delete", approximated: true})
		c.open("forwarded")
		if f.proto != "" {
			c.line("proto %s", f.proto)
		}
		c.close()
	case fe.plainForwardFor:
		what := "X-Forwarded-For as HAProxy sends it: what the client sent, which it can forge, then its address (see the reverse_proxy); http-request del-header X-Forwarded-For would make it the forwarded handler's"
		if len(f.removed) > 0 {
			what += "; " + removedClaims(f.removed)
		}
		c.note(note{line: *ff, what: what, approximated: len(f.removed) > 0})
	}
	for _, h := range f.rest {
		h.write(c, "request_header")
	}
}

// removedByAll are the forwarding headers a client sends that no
// backend's reverse_proxy passes: X-Forwarded-For is not among them where
// every backend has its own option forwardfor.
func (fe *frontend) removedByAll() []string {
	sentByAll := !slices.ContainsFunc(fe.backends(), func(be *backend) bool { return !sentForwardFor(fe, be).plainXFF(fe) })
	return slices.DeleteFunc(slices.Clone(fe.forwarding.removed), func(h string) bool { return sentByAll && h == "X-Forwarded-For" })
}

// writeFormatMap writes the map that makes the placeholder name of a
// sample (of a log-format, or a rate limit's key): Caddy evaluates it where
// the placeholder is read.
func writeFormatMap(c *caddyfile, name string) {
	if !placeholderKey.MatchString(name) { // its rule's formatToken refuses it
		return
	}
	m, _ := formatMapOf(name)
	c.remark("{%s}, for the samples of the rules below", name)
	c.open("map %s {%s}", m.source, name)
	for _, io := range m.cases {
		c.line("%s %s", io[0], io[1])
	}
	if m.fallback != "" {
		c.line("default %s", m.fallback)
	}
	c.close()
}

// removedClaims says which forwarding headers a client sends are removed.
func removedClaims(removed []string) string {
	return "the " + strings.Join(removed, ", ") + " a client sends are removed before its requests reach the servers, where HAProxy passes them as sent (caddy-ha passes no client's forwarding claims the rules do not make)"
}

// write writes the page as the site's handle_errors for its status, with
// the http-after-response rules.
func (p errorPage) write(c *caddyfile, after []headerRule) {
	c.comment(p.line, "")
	c.open("handle_errors %s", p.line.Words[1])
	writeNoServerHeader(c)
	writeAfterResponse(c, after)
	for _, h := range p.headers {
		c.line("header %s %s", c.name(h[0]), c.literal(h[1]))
	}
	c.line("respond %s %s", c.literal(p.body), p.status)
	c.close()
}

// writeListenerWrappers writes the listener wrappers of bind b's servers
// option: the max_connections wrappers (the frontend's, then the global
// maxconn's), which count TCP connections, then proxy_protocol for
// accept-proxy, all before TLS.
func (fe *frontend) writeListenerWrappers(c *caddyfile, global *Line, b bind) {
	if global == nil && fe.maxconn == nil && !b.acceptProxy {
		return
	}
	for _, l := range []*Line{fe.maxconn, global} {
		if l != nil {
			c.comment(*l, "")
		}
	}
	c.open("listener_wrappers")
	if fe.maxconn != nil {
		c.open("max_connections %s", arg(*fe.maxconn, 1))
		c.line("group %s", c.plain(fe.section.Kind+"/"+fe.section.Name))
		c.close()
	}
	if global != nil {
		c.open("max_connections %s", arg(*global, 1))
		c.line("group %s", globalMaxconnGroup)
		c.close()
	}
	if b.acceptProxy {
		c.line("# accept-proxy: each connection begins with a PROXY header, from any peer as in HAProxy (allow <ranges> would take it from those only)")
		c.open("proxy_protocol")
		c.line("fallback_policy require")
		c.close()
	}
	c.line("tls")
	c.close()
}

// write writes the page: its lines as comments, its matcher, and a handle
// with basic_auth (if there are users) and ha_status.
func (p *statsPage) write(c *caddyfile) {
	for _, n := range p.lines {
		c.note(n)
	}
	if !slices.ContainsFunc(p.lines, func(n note) bool { return arg(n.line, 1) == "uri" }) {
		c.remark("HAProxy's default stats uri: %s", defaultStatsURI)
	}
	if p.refresh == "off" {
		c.line("# no stats refresh: the page does not reload itself, as in HAProxy")
	}
	// HAProxy tests the uri as a prefix of the path and query as sent
	// (Caddy's {http.request.uri}), for GET, HEAD and POST only.
	c.line("%s expression %s", p.matcher(), c.expression("{http.request.uri}.startsWith("+c.celOf(c.at, p.uri)+`) && ({http.request.method} == "GET" || {http.request.method} == "HEAD" || {http.request.method} == "POST")`))
	c.open("handle %s", p.matcher())
	if len(p.users) > 0 {
		c.open("basic_auth bcrypt %s", c.plain(p.realm))
		for _, u := range p.users {
			c.line("%s %s", c.plain(u.name), u.hash)
		}
		c.close()
	}
	c.open("ha_status")
	c.line("refresh %s", p.refresh)
	c.close()
	c.close()
}

// write writes the logger: the default one (name "") or a named one;
// chroot is the global chroot line, if any.
func (lt logTarget) write(c *caddyfile, name, tag string, chroot *Line) {
	lt.comment(c, "Caddy's own log, and the access log of each site with log global", tag, chroot)
	lt.writeLogger(c, name, tag, "")
}

// comment keeps the log line, saying whose log (whose) goes where.
func (lt logTarget) comment(c *caddyfile, whose, tag string, chroot *Line) {
	what := []string{whose + ", to " + lt.describe(tag)}
	if p, ok := strings.CutPrefix(lt.output, "net unixgram/"); ok && chroot != nil && len(chroot.Words) == 2 {
		what = append(what, "HAProxy, in its chroot, sends to "+filepath.Join(chroot.Words[1], p)+" (where Debian's rsyslog listens for it); Caddy, in none, to "+p+": syslog files both by the tag")
	}
	c.comment(lt.line, strings.Join(append(what, lt.notes...), "; "))
}

// writeLogger writes the logger's block; include, if not empty, is the
// one site's access logger whose entries alone it writes.
func (lt logTarget) writeLogger(c *caddyfile, name, tag, include string) {
	if name == "" {
		c.open("log")
	} else {
		c.open("log %s", c.plainOf(lt.line, name))
	}
	if include != "" {
		c.line("include %s", c.plainOf(lt.line, "http.log.access."+include))
	}
	if net, ok := strings.CutPrefix(lt.output, "net "); ok {
		// HAProxy starts without its syslog socket; Caddy then writes to
		// stderr until it can reach it.
		c.open("output net %s", c.plain(net))
		c.line("soft_start")
		c.close()
	} else {
		c.line("output %s", lt.output)
	}
	switch lt.format {
	case "syslog":
		c.open("format syslog")
		c.line("facility %s", lt.facility)
		c.line("tag %s", c.plain(tag))
		c.close()
	case "journald":
		c.line("format journald")
	}
	if lt.level != "" {
		c.line("level %s", lt.level)
	}
	c.close()
}

// writeSite writes a frontend's logging lines, and the site's log
// directive when it logs: to its access logger (name) if it has log
// addresses of its own (their loggers are in the global options).
func (pl *proxyLog) writeSite(c *caddyfile, g *global, name string) {
	for _, l := range pl.lines {
		if _, own := pl.ownAt(l.Pos); !own {
			c.comment(l, pl.note(l, g))
		}
	}
	switch {
	case len(pl.own) > 0:
		c.line("# the site's access log, which its own loggers write (see the global options)")
		c.line("log %s", c.plain(name))
	case pl.logs(g):
		c.line("# log global: the site's access log, which the global section's loggers write")
		c.line("log")
	}
}

// writeLogSkips writes each http-request set-log-level silent as
// log_skip, with its condition's matcher.
func writeLogSkips(c *caddyfile, skips []logSkip) {
	for _, s := range skips {
		for _, acl := range s.when.acls {
			c.comment(acl, "")
		}
		c.note(s.note())
		if s.cond == nil {
			c.line("log_skip")
			continue
		}
		name := "@log_skip_" + strconv.Itoa(s.line.Pos.Line)
		writeMatcher(c, name, s.when)
		c.line("log_skip %s", name)
	}
}

// accessLogger is the name of the frontend's access logger, when it has
// log addresses of its own.
func (fe *frontend) accessLogger() string {
	return "haproxy_" + fe.section.Kind + "_" + fe.section.Name
}

// writeOwnLoggers writes a logger for each log address of the frontend's
// own, each taking the site's access log alone (include); with log
// global, the global section's first log line's too, as Caddy's default
// logger gets none of a site's own logger's entries (the global
// section's other loggers take every entry).
func (fe *frontend) writeOwnLoggers(c *caddyfile) {
	pl := &fe.log
	if len(pl.own) == 0 {
		return
	}
	name := fe.accessLogger()
	tag, chroot := "haproxy", (*Line)(nil)
	if fe.global != nil {
		tag, chroot = fe.global.tag, fe.global.chroot
	}
	for _, lt := range pl.own {
		lt.comment(c, "the access log of "+fe.section.Kind+" "+fe.section.Name, tag, chroot)
		lt.writeLogger(c, name+"_"+strconv.Itoa(lt.line.Pos.Line), tag, name)
	}
	if pl.logsGlobal(fe.global) {
		first := fe.global.loggers[0]
		c.remark("log global: the access log of %s %s to the global section's first log line (line %d) too, which as Caddy's default logger gets none of a site's own logger's entries", fe.section.Kind, fe.section.Name, first.line.Pos.Line)
		first.writeLogger(c, name+"_global", tag, name)
	}
}

// writeOwnPage writes HAProxy's own page for status as the site's
// handle_errors: what HAProxy sends without an errorfile.
func writeOwnPage(c *caddyfile, status string, after []headerRule) {
	c.remark("HAProxy's own page for %s (no errorfile), as HAProxy sends it", status)
	c.open("handle_errors %s", status)
	writeNoServerHeader(c)
	writeAfterResponse(c, after)
	c.line("header Content-Type text/html")
	c.line("header Cache-Control no-cache")
	c.line("respond %s %s", c.literal(haproxyPages[status].body(status)), status)
	c.close()
}

// writeNoServerHeader removes Caddy's own Server header from the site's
// answers (Caddy sets Server: Caddy on every one; HAProxy adds none, and a
// configuration that deletes a server's Server header means to send none),
// leaving a server's own (one that says Caddy aside).
func writeNoServerHeader(c *caddyfile) {
	c.line("# HAProxy adds no Server header (Caddy would say Server: Caddy)")
	c.open("header")
	c.line("-Server")
	c.open("match")
	c.line("header Server Caddy")
	c.close()
	c.close()
}

// writeAfterResponse writes the http-after-response header rules as
// deferred header directives, applied to the answer as it goes out. Each
// wraps the answer of those after it, so that the last written applies
// first: they are written last first, to apply in HAProxy's order.
func writeAfterResponse(c *caddyfile, rules []headerRule) {
	for i := len(rules) - 1; i >= 0; i-- {
		h := rules[i]
		c.comment(h.line, "")
		c.open("header %s", h.operation(c))
		c.line("defer")
		c.close()
	}
}

// writeConnectionRules writes each tcp-request connection reject as an
// abort whose matcher is its condition and none of the earlier accepts'
// (after an accept without a condition, no rule is written: none runs).
func (fe *frontend) writeConnectionRules(c *caddyfile) {
	var accepted []string // the earlier accepts' conditions
	for _, r := range fe.connectionRules {
		for _, l := range r.when.acls {
			c.comment(l, "")
		}
		e := "true"
		if r.cond != nil {
			e = r.when.expression(c)
		}
		if !r.reject {
			c.comment(r.line, "an accepted connection skips the reject rules below")
			if r.cond == nil {
				return
			}
			accepted = append(accepted, "!"+parenthesized(e))
			continue
		}
		c.note(note{line: r.line, what: connectionNote, approximated: true})
		name := "@connection_" + strconv.Itoa(r.line.Pos.Line)
		if r.cond != nil && len(accepted) == 0 {
			writeMatcher(c, name, r.when) // a block list's: remote_ip
		} else {
			c.line("%s expression %s", name, c.expression(strings.Join(append([]string{parenthesized(e)}, accepted...), " && ")))
		}
		c.line("abort %s", name)
	}
}

// writeMonitor writes monitor-uri: HAProxy's own 200 at that URI (as
// sent, its query included), for any method, before any rule; 503 (the
// site's page of it) while a monitor fail rule's condition holds.
func (fe *frontend) writeMonitor(c *caddyfile) {
	l := fe.monitorURI
	if l == nil {
		for _, f := range fe.monitorFails {
			c.comment(f.line, "ignored: no monitor-uri, whose answer it fails (HAProxy never tests it)")
		}
		return
	}
	c.comment(*l, "HAProxy's own answer, before every rule")
	uri := "{http.request.uri} == " + c.celOf(*l, l.Words[1])
	c.line("@monitor_uri expression %s", c.expression(uri))
	if len(fe.monitorFails) > 0 {
		fails := make([]string, len(fe.monitorFails))
		for i, f := range fe.monitorFails {
			for _, acl := range f.when.acls {
				c.comment(acl, "")
			}
			c.comment(f.line, "")
			fails[i] = f.when.expression(c)
		}
		c.line("@monitor_fail expression %s", c.expression(uri+" && "+parenthesized(join(fails, " || "))))
		c.line("error @monitor_fail 503")
	}
	c.line("header @monitor_uri Content-Type text/html")
	c.line("header @monitor_uri Cache-Control no-cache")
	c.line("respond @monitor_uri %s 200", c.literal(monitorPage))
}
