package haproxy

import (
	"net/netip"
	"regexp"
	"strings"
)

// aclFetch is a fetch an ACL may test against its values: the Caddy
// placeholder it reads, and the CEL test of a value ("==", or a string
// method: startsWith, endsWith, matches).
type aclFetch struct {
	subject, test string
}

// aclFetches are the fetches an ACL may test against values (src aside):
// HAProxy's path is the path without the query, hdr(host) the Host header
// as sent, with its port.
var aclFetches = map[string]aclFetch{
	"path":          {"{http.request.uri.path}", "=="},
	"path_beg":      {"{http.request.uri.path}", "startsWith"},
	"path_end":      {"{http.request.uri.path}", "endsWith"},
	"path_reg":      {"{http.request.uri.path}", "matches"},
	"method":        {"{http.request.method}", "=="},
	"hdr(host)":     {"{http.request.hostport}", "=="},
	"hdr_beg(host)": {"{http.request.hostport}", "startsWith"},
}

// boolFetches are the fetches that are true or false themselves, tested
// without a value ("{ ssl_fc }"), as the CEL term each is: ssl_fc is true
// on a TLS connection, as Caddy's {http.request.scheme} is https (the
// request's TLS state, whatever its headers say).
var boolFetches = map[string]string{"ssl_fc": `{http.request.scheme} == "https"`}

// aclExpression is an ACL's words (a fetch, its flags, its values) as a
// CEL expression of Caddy's expression matcher: true if any value
// matches, as HAProxy tests them. Only the -i flag is translated.
func aclExpression(words []string, l Line) (string, error) {
	fetch, values := words[0], words[1:]
	if e, ok := boolFetches[fetch]; ok {
		if len(values) > 0 {
			return "", refuse(l, "%s takes no flag or value (true on a TLS connection): %s is not translated", fetch, strings.Join(values, " "))
		}
		return e, nil
	}
	fold, values, err := aclFlags(values, l)
	if err != nil {
		return "", err
	}
	if len(values) == 0 {
		return "", refuse(l, "an ACL without a value")
	}
	if fetch == "src" {
		if fold {
			return "", refuse(l, "src takes no -i")
		}
		return srcExpression(values, l)
	}
	f, ok := aclFetches[fetch]
	if !ok {
		return "", refuse(l, "ACL fetch %s is not translated yet", fetch)
	}
	return f.expression(fetch, values, fold, l)
}

// aclFlags reads the flags before an ACL's values: whether -i (fold case)
// is among them, and the values after them.
func aclFlags(values []string, l Line) (bool, []string, error) {
	fold := false
	for len(values) > 0 && strings.HasPrefix(values[0], "-") {
		if values[0] != "-i" {
			return false, nil, refuse(l, "ACL flag %s is not translated yet", values[0])
		}
		fold = true
		values = values[1:]
	}
	return fold, values, nil
}

// srcExpression is src's test: one remote_ip of every range, the
// connection's peer, as HAProxy's src.
func srcExpression(values []string, l Line) (string, error) {
	var b strings.Builder
	b.WriteString("remote_ip(")
	for i, v := range values {
		if _, err := netip.ParseAddr(v); err != nil {
			if _, err := netip.ParsePrefix(v); err != nil {
				return "", refuse(l, "src %s: want an address or a CIDR range", v)
			}
		}
		lit, err := celString(v, l.envs)
		if err != nil {
			return "", refuseValue(l, "src", v, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(lit)
	}
	b.WriteByte(')')
	return b.String(), nil
}

// expression is the test of fetch (f's name) against each value, folding
// case when fold (-i).
func (f aclFetch) expression(fetch string, values []string, fold bool, l Line) (string, error) {
	subject := f.subject
	if fold {
		subject += ".lowerAscii()"
	}
	var alts []string
	for _, v := range values {
		switch {
		case f.test == "matches" && fold:
			v = "(?i)" + v
		case fold:
			v = strings.ToLower(v)
		}
		if f.test == "matches" {
			if _, err := regexp.Compile(v); err != nil {
				return "", refuse(l, "path_reg %s: not a regular expression RE2 reads: %v", v, err)
			}
		}
		lit, err := celString(v, l.envs)
		if err != nil {
			return "", refuseValue(l, fetch, v, err)
		}
		if f.test == "==" {
			alts = append(alts, subject+" == "+lit)
		} else {
			alts = append(alts, subject+"."+f.test+"("+lit+")")
		}
	}
	return join(alts, " || "), nil
}

// join joins alternatives, in parentheses when there are several.
func join(alts []string, op string) string {
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, op) + ")"
}

// conditionExpression is a rule's condition as a CEL expression, and the
// named ACL lines it uses. A named ACL of several lines holds if any does.
func (fe *frontend) conditionExpression(c *Condition, l Line) (string, []Line, error) {
	var used []Line
	seen := map[Position]bool{} // of used: an ACL named twice is used once
	var anyOf []string
	for _, terms := range c.Any {
		var all []string
		for _, t := range terms {
			var e string
			if t.Anon != nil {
				var err error
				if e, err = aclExpression(t.Anon, l); err != nil {
					return "", nil, err
				}
			} else {
				lines, err := fe.visibleACL(t.ACL, l)
				if err != nil {
					return "", nil, err
				}
				var alts []string
				for _, al := range lines {
					ae, err := aclExpression(al.Words[2:], al)
					if err != nil {
						return "", nil, err
					}
					alts = append(alts, ae)
				}
				for _, al := range lines {
					if !seen[al.Pos] {
						seen[al.Pos] = true
						used = append(used, al)
					}
					fe.usedACLs[al.Pos] = true
				}
				e = join(alts, " || ")
			}
			if t.Not {
				e = "!" + parenthesized(e)
			}
			all = append(all, e)
		}
		anyOf = append(anyOf, join(all, " && "))
	}
	e := join(anyOf, " || ")
	if c.Unless {
		e = "!" + parenthesized(e)
	}
	return e, used, nil
}

// visibleACL is the named ACL's lines that the rule l sees: those of its
// own section, as HAProxy keeps a defaults section's ACLs to that
// section's rules (a proxy that takes the defaults does not see them).
func (fe *frontend) visibleACL(name string, l Line) ([]Line, error) {
	at := fe.cfg.sectionAt(l.Pos)
	var lines []Line
	for _, al := range fe.acls[name] {
		if fe.cfg.sectionAt(al.Pos) == at {
			lines = append(lines, al)
		}
	}
	if len(lines) == 0 {
		if len(fe.acls[name]) > 0 {
			d := fe.cfg.sectionAt(fe.acls[name][0].Pos)
			return nil, refuse(l, "ACL %s is defined in %s %s, whose ACLs only its own rules see (HAProxy refuses it too: no such ACL)", name, d.Kind, d.Name)
		}
		return nil, refuse(l, "ACL %s is not defined before this line", name)
	}
	return lines, nil
}

func parenthesized(e string) string {
	if strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") {
		return e
	}
	return "(" + e + ")"
}
