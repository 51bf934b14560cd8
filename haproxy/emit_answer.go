package haproxy

import "strconv"

// write writes the answer as Caddy's directive, with matcher (" @name",
// or "" for a rule without a condition); its values through the token
// writer, as values of the line last commented (the rule's).
func (a answer) write(c *caddyfile, matcher string) {
	switch a.kind {
	case errorAnswer:
		c.line("error%s %s", matcher, a.status)
	case respondAnswer:
		// hdr adds (HAProxy's answer takes each, a name twice too).
		for _, h := range a.headers {
			c.line("header%s +%s %s", matcher, c.name(h.name), c.composed(h.v))
		}
		if a.body.raw == "" {
			c.line("respond%s %s", matcher, a.status)
			return
		}
		if a.ctype != "" { // else an errorfile's own headers have it
			c.line("header%s Content-Type %s", matcher, c.literal(a.ctype))
		}
		c.line("respond%s %s %s", matcher, c.composed(a.body), a.status)
	case redirAnswer:
		if a.setCookie != "" {
			c.line("header%s +Set-Cookie %s", matcher, c.literal(a.setCookie))
		}
		c.line("redir%s %s %s", matcher, c.composed(redirectTargets[a.redirect](a.target, a.tail)), a.status)
	case authAnswer:
		c.remark("HAProxy's http-request auth: 401 with WWW-Authenticate to a request without an account of userlist %s", a.userlist.section.Name)
		c.comment(a.userlist.section.line(), "")
		for _, n := range a.userlist.notes {
			c.note(n)
		}
		for _, u := range a.userlist.users {
			c.comment(u.line, "")
		}
		if a.userlist.crypt {
			c.line("# a SHA-crypt hash among them: basic_auth_crypt checks it (basic_auth checks bcrypt only)")
			c.open("basic_auth_crypt%s %s", matcher, c.plain(a.realm))
		} else {
			c.open("basic_auth%s bcrypt %s", matcher, c.plain(a.realm))
		}
		for _, u := range a.userlist.users {
			c.line("%s %s", c.plainOf(u.line, u.name), c.plainOf(u.line, u.hash))
		}
		c.close()
	case rateLimitAnswer:
		c.open("edge_rate_limit%s", matcher)
		c.open("zone %s", a.zone.name) // letters, digits, _ and - only (rateLimitAnswer)
		a.zone.writeKey(c)
		c.line("events %s", strconv.Itoa(a.zone.events))
		c.line("window %s", a.zone.window)
		c.line("sliding") // as HAProxy's rate, over the last period
		c.close()
		c.close()
	}
}

// writeKey writes the zone's key and, for a header or a cookie, or a
// track rule with a condition, the requests it counts: those that have the
// key and that the condition takes, as HAProxy tracks them.
func (z rateZone) writeKey(c *caddyfile) {
	tr := z.track
	for _, l := range tr.when.acls { // of the condition, kept above its rule
		c.comment(l, "")
	}
	if tr.key.kind == "src" {
		if tr.cond != nil {
			c.comment(tr.line, "")
			c.open("match")
			writeMatcher(c, "", tr.when)
			c.close()
		}
		c.line("key {remote_host}") // HAProxy's src: the connection's peer
		return
	}
	name := c.placeholderNameOf(tr.line, tr.key.name)
	key := "{http.request.cookie." + name + "}"
	has := key + ` != ""`
	if tr.key.kind == "header" {
		// Its last value, as HAProxy tracks it, a map's (resolveFormatMaps),
		// of a request that has the header, sent empty too (the key "").
		key = "{" + headerPlaceholder(name) + "}"
		has = "header({'" + name + "': ['*']})"
	}
	if tr.cond != nil {
		has += " && " + parenthesized(tr.when.expression(c))
	}
	c.comment(tr.line, "")
	c.open("match")
	c.line("expression %s", c.expression(has))
	c.close()
	c.line("key %s", key)
}
