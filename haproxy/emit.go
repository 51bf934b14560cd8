package haproxy

import "strings"

// emit writes the model as a Caddyfile, every value through the token
// writer (caddyfile.go, token.go): the global options (process keywords,
// the servers' timeouts and protocols), then a site per frontend with the
// backends it sends to. The writer holds the text, the warnings, and the
// first value no token carries.
func emit(m *model) *caddyfile {
	c := &caddyfile{}
	c.remark("Written by caddy ha migrate from the HAProxy configuration %s: each of", m.cfg.file())
	c.line("# its lines is kept as a comment above what it became.")
	writeDirectives(c, m.cfg.directives)
	writeBeyond(c, m.beyond())
	c.open("")
	c.line("# HAProxy listens only where a bind says: no redirects from port 80")
	c.line("auto_https disable_redirects")
	if g := m.cfg.Section("global", ""); g != nil {
		c.comment(Line{Pos: g.Pos, Words: []string{"global"}}, "")
		writeGlobal(c, m.global)
	}
	writeDefaults(c, m.defaults)
	writeResolvers(c, m.resolvers)
	for _, cs := range m.caches {
		for _, n := range cs.notes {
			c.note(n)
		}
	}
	writeUnusedFcgiApps(c, m.fcgiApps)
	for _, fe := range m.frontends {
		fe.writeOwnLoggers(c)
	}
	writeDefaultSNI(c, m.sni)
	for _, fe := range m.frontends {
		fe.writeServers(c, m.global.maxconn)
	}
	c.close()
	for _, fe := range m.frontends {
		fe.writeSite(c)
	}
	return c
}

// writeDirectives comments the lines of the conditional blocks and of
// their branches not taken: a .if's comment (and Warning) says which
// branch the translation holds.
func writeDirectives(c *caddyfile, ds []directive) {
	for _, d := range ds {
		if d.approximated {
			c.note(note{line: d.line, what: d.why, approximated: true})
		} else {
			c.comment(d.line, "ignored: "+d.why)
		}
	}
}

// writeBeyond says what the adapter's JSON carries that the Caddyfile
// cannot say: caddy adapt of this Caddyfile alone would not do it.
func writeBeyond(c *caddyfile, b Beyond) {
	if at := b.SessionTicketsOff; at != nil {
		c.line("# Not in this Caddyfile, which cannot say it: caddy adapt --adapter haproxy of the HAProxy file turns TLS session")
		c.remark("tickets off in its JSON (apps.tls.session_tickets.disabled), as line %d's no-tls-tickets asks; this Caddyfile adapted", at.Line)
		c.line("# by itself leaves them on.")
	}
}

// writeGlobal writes the global section's lines as their notes say, a
// log line as its logger and hard-stop-after as grace_period.
func writeGlobal(c *caddyfile, g *global) {
	for _, n := range g.notes {
		if lt, name, ok := g.loggerAt(n.line.Pos); ok {
			lt.write(c, name, g.tag, g.chroot)
			continue
		}
		c.note(n)
		if n.line.Pos == g.gracePeriodAt {
			c.line("grace_period %s", g.gracePeriod)
		}
	}
}

// writeResolvers writes each resolvers section as comments: its lines
// are settings of the dynamic checked of the servers that name it.
func writeResolvers(c *caddyfile, sections []*resolvers) {
	for _, r := range sections {
		c.comment(r.section.line(), "the DNS servers and timings of the dynamic checked of the servers that name it")
		for _, n := range r.notes {
			c.note(n)
		}
	}
}

// writeDefaults writes each defaults section as a comment: who takes it,
// or, taken by none, each of its lines.
func writeDefaults(c *caddyfile, defaults []defaultsUse) {
	for _, d := range defaults {
		if len(d.takers) > 0 {
			c.comment(d.section.line(), "taken by "+strings.Join(d.takers, ", ")+": each of its lines is kept where it applies")
			continue
		}
		c.comment(d.section.line(), "no frontend or backend takes these defaults: HAProxy applies them to none")
		for _, l := range d.section.Lines {
			c.comment(l, "ignored: read, and applied to no proxy")
		}
	}
}

// writeDefaultSNI writes the default certificate's notes and options.
func writeDefaultSNI(c *caddyfile, notes []sniNote) {
	for _, n := range notes {
		c.comment(n.line, n.what)
		if n.name != "" {
			c.line("default_sni %s", c.plain(n.name))
			c.line("fallback_sni %s", c.plain(n.name))
		}
	}
}
