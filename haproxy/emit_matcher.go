package haproxy

import (
	"regexp"
	"strconv"
	"strings"
)

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

// writeMatcher writes m as the named matcher name (inside a match
// block: name ""): Caddy's remote_ip matcher where m tests the
// connection's peer alone (a block list's thousands of addresses, past
// the code points an expression compiles), else an expression.
func writeMatcher(c *caddyfile, name string, m matcher) {
	prefix := strings.TrimPrefix(name+" ", " ")
	if ranges, not, ok := m.peerRanges(c); ok {
		if not {
			prefix += "not "
		}
		c.line("%sremote_ip %s", prefix, strings.Join(ranges, " "))
		return
	}
	c.line("%sexpression %s", prefix, c.expression(m.expression(c)))
}

// peerRanges are the addresses and ranges of m's one term when it is src
// ACLs alone, as remote_ip takes them, and whether m holds where the peer
// is not among them; ok false for another condition.
func (m matcher) peerRanges(c *caddyfile) (ranges []string, not, ok bool) {
	if m.always || len(m.any) != 1 || len(m.any[0]) != 1 {
		return nil, false, false
	}
	t := m.any[0][0]
	for _, a := range t.alts {
		if !a.src || a.never {
			return nil, false, false
		}
		for _, v := range a.values {
			ranges = append(ranges, c.plainOf(a.line, v))
		}
	}
	return ranges, t.not != m.unless, len(ranges) > 0
}

// expression is the ACL's test as CEL: true if any value matches.
func (a acl) expression(c *caddyfile) string {
	switch {
	case a.never:
		return "false"
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
	subject := a.subject(c)
	if a.test.method == "found" {
		return subject + ` != ""`
	}
	if a.test.subject == portSubject || a.test.subject == countSubject {
		return integersTest(subject, a.values)
	}
	if a.test.subject == headerSubject && a.sample == nil {
		// HAProxy tests each of a header's values (its lines, and the
		// parts between commas), trimmed.
		return subject + `.split(",").exists(v, ` + a.valuesTest(c, "v.trim()") + ")"
	}
	return a.valuesTest(c, subject)
}

// valuesTest is the test of subject against each value: true if any
// matches, by the ACL's method.
func (a acl) valuesTest(c *caddyfile, subject string) string {
	if a.fold {
		subject += ".lowerAscii()"
	}
	alts := make([]string, len(a.values))
	for i, v := range a.values {
		alts[i] = matchTest(subject, a.test.method, c.celOf(a.line, matchPattern(a.test.method, v)))
	}
	return join(alts, " || ")
}

// matchTest is subject tested against the CEL string lit by method.
func matchTest(subject, method, lit string) string {
	switch method {
	case "str":
		return subject + " == " + lit
	case "beg":
		return subject + ".startsWith(" + lit + ")"
	case "end":
		return subject + ".endsWith(" + lit + ")"
	case "sub":
		return subject + ".contains(" + lit + ")"
	}
	return subject + ".matches(" + lit + ")" // reg, dir, dom: a regular expression
}

// matchPattern is a value as its method's test takes it: dir and dom as
// the regular expressions of HAProxy's definitions (the value between
// slashes or question marks; between dots, slashes, colons or question
// marks; or at an end), as HAProxy matches a word between delimiters.
func matchPattern(method, v string) string {
	switch method {
	case "dir":
		return `(^|[/?])` + regexp.QuoteMeta(v) + `($|[/?])`
	case "dom":
		return `(^|[./?:])` + regexp.QuoteMeta(v) + `($|[./?:])`
	}
	return v
}

// subject is the CEL expression of what the ACL's fetch reads; a header's
// or a cookie's name through the token writer.
func (a acl) subject(c *caddyfile) string {
	if a.sample != nil {
		return a.sample.expression(c, a.line)
	}
	if a.count != nil {
		return a.count.expression(c, a.line)
	}
	return fetchExpression(c, a.line, a.test.subject, a.arg)
}

// fetchExpression is the CEL expression of what a fetch of subject reads
// (of the header or cookie arg), arg through the token writer.
func fetchExpression(c *caddyfile, l Line, subject fetchSubject, arg string) string {
	switch subject {
	case pathSubject:
		return rawPath
	case urlSubject:
		return "{http.request.uri}"
	case querySubject:
		return "{http.request.uri.query}"
	case methodSubject:
		return "{http.request.method}"
	case hostSubject:
		return "{http.request.hostport}"
	case sniSubject:
		return "{http.request.tls.server_name}"
	case portSubject:
		return "{http.request.local.port}" // the accepting socket's port, a number
	case cookieSubject:
		return "{http.request.cookie." + c.placeholderNameOf(l, arg) + "}"
	}
	return "{http.request.header." + c.placeholderNameOf(l, arg) + "}"
}

// expression is the sample's value as CEL, as set-var computes it: a
// header's last value (after its last comma, trimmed), then each
// converter in turn.
func (s sample) expression(c *caddyfile, l Line) string {
	if s.subject == constSubject {
		return c.celOf(l, s.arg)
	}
	e := fetchExpression(c, l, s.subject, s.arg)
	if s.subject == headerSubject {
		e += `.substring(` + e + `.lastIndexOf(",") + 1).trim()`
	}
	for _, conv := range s.converters {
		switch conv.name {
		case "lower":
			e += ".lowerAscii()"
		case "upper":
			e += ".upperAscii()"
		case "field":
			// HAProxy's field past the last is empty.
			d := c.celOf(l, conv.delim)
			e = "(" + e + ".split(" + d + ").size() >= " + strconv.Itoa(conv.index) + " ? " + e + ".split(" + d + ")[" + strconv.Itoa(conv.index-1) + "] : \"\")"
		}
	}
	return e
}

// expression is nbsrv's count as CEL, an int: caddy-ha's usable_servers
// of the name dynamic checked publishes it under, or the constant.
func (n serverCount) expression(c *caddyfile, l Line) string {
	if n.published == "" {
		return strconv.Itoa(n.constant)
	}
	return "usable_servers(" + c.celOf(l, n.published) + ")"
}

// integersTest is subject (a number) tested against ranges "lo:hi" (an
// end left out is open): true if it is in any. The ends are whole numbers
// (readIntegers), written as CEL integers.
func integersTest(subject string, ranges []string) string {
	alts := make([]string, len(ranges))
	for i, r := range ranges {
		lo, hi, _ := strings.Cut(r, ":")
		var both []string
		switch {
		case lo != "" && lo == hi:
			both = append(both, subject+" == "+lo)
		default:
			if lo != "" {
				both = append(both, subject+" >= "+lo)
			}
			if hi != "" {
				both = append(both, subject+" <= "+hi)
			}
		}
		alts[i] = join(both, " && ")
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
