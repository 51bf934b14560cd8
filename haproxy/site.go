package haproxy

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// What a frontend's site is, settled by resolve once its lines are read,
// and how it is written.

// siteCerts are a TLS site's certificates (each crt of its first TLS
// bind: a file holding a certificate and its key, or a directory of them)
// with the global section's TLS defaults.
type siteCerts struct {
	bind        *bind
	files, dirs []string // each crt's path, crt-base joined
	based       []string // the crt-base notes: "crt <f> is <path>"
	settings    []string // the tls block's subdirectives
	notes       []note   // the TLS defaults' notes
}

// forwarding is what the frontend's option forwardfor and header rules
// make of the forwarded headers.
type forwarding struct {
	handler bool   // the forwarded handler: the client's chain deleted, then the client appended
	proto   string // the forwarded handler's proto, set by a set-header
	used    []Line // the header rules the forwarded handler does
	rest    []headerRule
}

// resolve checks what the frontend's lines say together and settles its
// site: its binds' sites, certificates, conditions and forwarded headers.
func (fe *frontend) resolve() error {
	if err := fe.resolveBinds(); err != nil {
		return err
	}
	if _, ok := fe.errorPages["429"]; ok && fe.rateLimited != nil {
		return refuse(*fe.rateLimited, "edge_rate_limit answers 429 itself: not translated with an errorfile 429")
	}
	if err := fe.resolveConditions(); err != nil {
		return err
	}
	fe.resolveForwarding()
	return fe.resolveCerts()
}

// resolveBinds splits the binds into a site without TLS and one with.
// HAProxy's bind address is where it listens, never a Host to match: a
// site is every host on the port, bound to the address's host.
func (fe *frontend) resolveBinds() error {
	var hosts []string
	for i, b := range fe.binds {
		if b.isTLS {
			if fe.certs.bind != nil && !slices.Equal(fe.certs.bind.crts, b.crts) {
				return refuse(b.line, "one frontend with two certificates is not translated yet")
			}
			fe.certs.bind = &fe.binds[i]
		}
		host, port, _ := net.SplitHostPort(b.addr)
		if !b.isTLS && port == "443" {
			// Caddy's Caddyfile refuses http://:443 ("scheme and port
			// violate convention"), which HAProxy serves.
			return refuse(b.line, "plain HTTP on port 443 (no ssl on this bind) is not translated: a Caddyfile site cannot serve http:// on port 443; bind another port, or add ssl crt")
		}
		if host != "" {
			hosts = append(hosts, host)
		} else if len(hosts) > 0 {
			return refuse(b.line, "binds on every address and on %s in one frontend are not translated yet", hosts[0])
		}
	}
	return nil
}

// resolveConditions settles each rule's matcher: its condition's ACLs,
// as the rule's section sees them.
func (fe *frontend) resolveConditions() error {
	for _, rules := range [][]answerRule{fe.answers, fe.redirects} {
		for i, a := range rules {
			if a.cond == nil {
				continue
			}
			var err error
			if rules[i].when, err = fe.conditionMatcher(a.cond, a.line); err != nil {
				return err
			}
		}
	}
	for i, r := range fe.rules {
		// A use_backend without a condition always holds: HAProxy runs
		// no rule after it, nor the default_backend.
		if r.cond == nil {
			fe.rules[i].when = matcher{always: true}
			if i < len(fe.rules)-1 || fe.backendLine.Words != nil {
				fe.rules[i].note = "without a condition: every request that reaches it, so what follows is never used, as in HAProxy"
			}
			continue
		}
		var err error
		if fe.rules[i].when, err = fe.conditionMatcher(r.cond, r.line); err != nil {
			return err
		}
	}
	return nil
}

// resolveForwarding settles what the header rules and option forwardfor
// make of the forwarded headers: with X-Forwarded-For, the forwarded
// handler where the client's chain is deleted first, else reverse_proxy's
// own X-Forwarded-For after the client's (plainForwardFor).
func (fe *frontend) resolveForwarding() {
	fe.forwarding.rest = fe.headers
	if !sendsXFF(fe.forwardFor) {
		return
	}
	f := forwarding{}
	deleted := false
	for _, h := range fe.headers {
		name := strings.ToLower(h.name)
		switch {
		case h.op == "del-header" && forwardedHeaders[name]:
			deleted = deleted || name == "x-forwarded-for"
			f.used = append(f.used, h.line)
		case h.op == "set-header" && name == "x-forwarded-proto" && (h.v == "https" || h.v == "http"):
			f.proto = h.v
			f.used = append(f.used, h.line)
		default:
			f.rest = append(f.rest, h)
		}
	}
	if deleted {
		f.handler = true
		fe.forwarding = f
		return
	}
	fe.plainForwardFor = true
}

// resolveCerts settles the TLS site's certificates: files, or
// directories (Caddy picks among them by the client's SNI, as HAProxy
// does), and the global section's TLS defaults.
func (fe *frontend) resolveCerts() error {
	crt := fe.certs.bind
	if crt == nil {
		return nil
	}
	g := fe.global
	for _, f := range crt.crts {
		path := resolve(g.crtBase, f)
		if path != f {
			fe.certs.based = append(fe.certs.based, "crt "+f+" is "+path)
		}
		if isDir(fe.cfg.files(), path) {
			fe.certs.dirs = append(fe.certs.dirs, path)
		} else {
			fe.certs.files = append(fe.certs.files, path)
		}
	}
	if c := fe.certs; len(c.files) > 0 && len(c.dirs) > 0 {
		// Caddy's tls with a file picks among its files' certificates
		// only (a certificate_selection of their tags), which a
		// directory's do not carry.
		return refuse(crt.line, "crt %s is a directory and %s a file: one bind with both is not translated (Caddy would pick among the files' certificates only)", c.dirs[0], c.files[0])
	}
	var err error
	fe.certs.settings, fe.certs.notes, err = g.bindTLS.site()
	return err
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
	c.line("# binds with and without ssl: a site for each (a Caddy server is HTTP or HTTPS), both importing (%s)", snippet)
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
	fe.log.writeSite(c, fe.global)
	if withTLS {
		fe.writeTLS(c)
	}
	for _, code := range slices.Sorted(maps.Keys(fe.errorPages)) {
		fe.errorPages[code].write(c)
	}
	routed := len(fe.answers)+len(fe.redirects) > 0 || fe.stats != nil
	if routed {
		// In the order written, as HAProxy runs its rules: the header
		// rules, those that answer, the stats page, the redirect rules,
		// then the backends.
		c.open("route")
	}
	fe.writeHeaders(c)
	writeAnswers(c, fe.answers)
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
	c.comment(certs.bind.line, "")
	for _, based := range certs.based {
		c.comment(*fe.global.crtBase, based)
	}
	for _, n := range certs.notes {
		c.note(n)
	}
	if len(certs.files) > 1 {
		c.line("# %d crt files: each a tls directive; Caddy picks the certificate by the client's SNI, as HAProxy does", len(certs.files))
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
		name := ""
		if a.cond != nil {
			for _, l := range a.when.acls {
				c.comment(l, "")
			}
			name = "@answer_" + strconv.Itoa(a.line.Pos.Line)
			c.comment(a.line, "")
			c.line("%s expression `%s`", name, a.when.expression(c))
			name = " " + name
		} else {
			c.comment(a.line, "")
		}
		a.answer.write(c, name)
	}
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
		c.line("@%s expression `%s`", name, r.when.expression(c))
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
	case ff != nil && !sendsXFF(ff):
		h := forwardForHeader(*ff)
		c.comment(*ff, "the client's address in "+h+", after any the client sent, as HAProxy adds it: header_up +"+h+" {remote_host} in each reverse_proxy below, which sends no X-Forwarded-For")
	case f.handler:
		// A client's chain deleted, then the client appended: the
		// forwarded handler's chain, which starts afresh at the client.
		for _, l := range f.used {
			c.comment(l, "")
		}
		c.comment(*ff, "")
		c.open("forwarded")
		if f.proto != "" {
			c.line("proto %s", f.proto)
		}
		c.close()
	case fe.plainForwardFor:
		c.comment(*ff, "X-Forwarded-For as HAProxy sends it: what the client sent, which it can forge, then its address (see the reverse_proxy); http-request del-header X-Forwarded-For would make it the forwarded handler's")
	}
	for _, h := range f.rest {
		h.write(c, "request_header")
	}
}
