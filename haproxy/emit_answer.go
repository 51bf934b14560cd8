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
		if a.ctype == "" {
			c.line("respond%s %s", matcher, a.status)
			return
		}
		c.line("header%s Content-Type %s", matcher, c.literal(a.ctype))
		c.line("respond%s %s %s", matcher, c.composed(a.body, asWritten), a.status)
	case redirAnswer:
		c.line("redir%s %s %s", matcher, c.composed(a.target, redirectTargets[a.redirect]), a.status)
	case rateLimitAnswer:
		c.open("edge_rate_limit%s", matcher)
		c.open("zone %s", a.zone.name) // letters, digits, _ and - only (rateLimitAnswer)
		c.line("key {remote_host}")    // HAProxy's src: the connection's peer
		c.line("events %s", strconv.Itoa(a.zone.events))
		c.line("window %s", a.zone.window)
		c.line("sliding") // as HAProxy's rate, over the last period
		c.close()
		c.close()
	}
}
