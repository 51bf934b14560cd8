package haproxy

import "strconv"

// Writing a fcgi-app: the transport fastcgi of the backends that name it,
// and the rewrite of a path ending in / to its index.

// writeUnusedFcgiApps comments the fcgi-app sections no backend names.
func writeUnusedFcgiApps(c *caddyfile, apps []*fcgiApp) {
	for _, a := range apps {
		if a.used {
			continue
		}
		c.comment(a.section.line(), "ignored: no backend names it (use-fcgi-app)")
		for _, l := range a.lines {
			c.comment(l, "ignored: no backend names its fcgi-app")
		}
	}
}

// writesFcgiIndex tells whether the backend rewrites a path ending in /
// to its fcgi-app's index.
func (be *backend) writesFcgiIndex() bool { return be.fcgi != nil && be.fcgi.index != "" }

// writeFcgiIndex writes the rewrite of a path ending in / to the index,
// where path-info's expression does not match: HAProxy appends the index
// to such a script name. The rewrite leaves REQUEST_URI the client's
// (the transport sends the original request's).
func (be *backend) writeFcgiIndex(c *caddyfile) {
	a := be.fcgi
	for _, l := range a.lines {
		if keywordOf(l) == "index" {
			c.comment(l, "HAProxy appends it to a script name ending in /: the path, rewritten before the reverse_proxy")
		}
	}
	name := "fcgi_index_" + strconv.Itoa(be.fcgiAt.Pos.Line)
	c.open("@%s", name)
	c.line("path */")
	if a.pathInfo != "" {
		c.line("not path_regexp %s", c.plain(a.pathInfo))
	}
	c.close()
	c.line("uri @%s path_regexp /$ %s", name, c.literal("/"+a.index))
}

// writeFcgiHeadersUp removes Authorization from a FastCGI request, as
// HAProxy leaves it out of the params unless the fcgi-app passes it
// (pass-header); Caddy would send it as HTTP_AUTHORIZATION.
func (be *backend) writeFcgiHeadersUp(c *caddyfile) {
	if be.fcgi != nil && !be.fcgi.passAuthorization {
		c.line("# HAProxy leaves Authorization out of the FastCGI params, as its fcgi-app passes no such header (pass-header)")
		c.line("header_up -Authorization")
	}
}

// writeFastCGITransport writes transport fastcgi: the fcgi-app's lines as
// its settings, and the backend's timeouts.
func (be *backend) writeFastCGITransport(c *caddyfile) {
	a := be.fcgi
	c.open("transport fastcgi")
	c.comment(a.section.line(), "")
	c.line("# HAProxy's SERVER_NAME is the Host header as sent, its port too (a set-param below may change it)")
	c.line("env SERVER_NAME {http.request.hostport}")
	for _, l := range a.lines {
		be.writeFcgiLine(c, l)
	}
	if d := be.timeouts["connect"]; d != "" {
		c.line("dial_timeout %s", d)
	}
	if d := be.timeouts["server"]; d != "" {
		c.line("read_timeout %s", d)
		c.line("write_timeout %s", d)
	}
	c.close()
}

// writeFcgiLine writes one line of the fcgi-app in its transport.
func (be *backend) writeFcgiLine(c *caddyfile, l Line) {
	a := be.fcgi
	if n, ok := a.notes[l.Pos]; ok {
		c.note(n)
	}
	switch keywordOf(l) {
	case "docroot":
		c.comment(l, "")
		c.line("root %s", c.plain(a.docroot))
	case "path-info":
		c.line("split %s", c.plain(a.split))
	case "log-stderr":
		c.line("capture_stderr")
	case "set-param":
		c.comment(l, "")
		for _, p := range a.params {
			if p.line.Pos == l.Pos {
				c.line("env %s %s", c.name(p.name), c.composed(p.value))
			}
		}
	}
}
