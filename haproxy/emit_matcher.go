package haproxy

import "strings"

// expression is the matcher as a CEL expression of Caddy's expression
// matcher, its values through the token writer.
func (m matcher) expression(c *caddyfile) string {
	if m.always {
		return "true"
	}
	var anyOf []string
	for _, terms := range m.any {
		var all []string
		for _, t := range terms {
			alts := make([]string, len(t.alts))
			for i, a := range t.alts {
				alts[i] = a.expression(c)
			}
			e := join(alts, " || ")
			if t.not {
				e = "!" + parenthesized(e)
			}
			all = append(all, e)
		}
		anyOf = append(anyOf, join(all, " && "))
	}
	e := join(anyOf, " || ")
	if m.unless {
		e = "!" + parenthesized(e)
	}
	return e
}

// expression is the ACL's test as CEL: true if any value matches.
func (a acl) expression(c *caddyfile) string {
	switch {
	case a.term != "":
		return a.term
	case a.src:
		// One remote_ip of every range: the connection's peer, as
		// HAProxy's src.
		lits := make([]string, len(a.values))
		for i, v := range a.values {
			lits[i] = c.celOf(a.line, v)
		}
		return "remote_ip(" + strings.Join(lits, ", ") + ")"
	}
	subject := a.test.subject
	if a.fold {
		subject += ".lowerAscii()"
	}
	alts := make([]string, len(a.values))
	for i, v := range a.values {
		if lit := c.celOf(a.line, v); a.test.test == "==" {
			alts[i] = subject + " == " + lit
		} else {
			alts[i] = subject + "." + a.test.test + "(" + lit + ")"
		}
	}
	return join(alts, " || ")
}

// join joins alternatives, in parentheses when there are several.
func join(alts []string, op string) string {
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, op) + ")"
}

func parenthesized(e string) string {
	if strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") {
		return e
	}
	return "(" + e + ")"
}
