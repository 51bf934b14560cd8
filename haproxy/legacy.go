package haproxy

import (
	"regexp"
	"strings"
)

// The HAProxy 1.x keywords that HAProxy 2.1 removed (2.6 refuses them),
// read as the 2.x lines that replaced them, each a warning: an operator
// on an old configuration gets it translated rather than refused.
var legacyTimeouts = map[string]string{"contimeout": "connect", "clitimeout": "client", "srvtimeout": "server"}

// legacyHeaderAdds are the 1.x rules that add a header line, by the
// 2.x rule that replaced them.
var legacyHeaderAdds = map[string]string{"reqadd": "http-request", "rspadd": "http-response"}

// legacyHeaderDels are the 1.x rules that delete the header lines a
// regular expression matches, by the 2.x rule that replaced them.
var legacyHeaderDels = map[string]string{"reqdel": "http-request", "reqidel": "http-request", "rspdel": "http-response", "rspidel": "http-response"}

// wholeHeader matches the regular expressions of a 1.x delete that name
// one header whole: ^<name>: and what follows, as most were written.
var wholeHeader = regexp.MustCompile(`^\^([!#$%&'*+.^_|~0-9A-Za-z-]+):(\.\*)?$`)

// legacyHeaderReplaces are the 1.x rules that rewrite the header lines a
// regular expression matches (the i ones without case), by the 2.x rule
// that replaced them.
var legacyHeaderReplaces = map[string]string{"reqrep": "http-request", "reqirep": "http-request", "rsprep": "http-response", "rspirep": "http-response"}

// headerLinePrefix matches the beginning of a 1.x rewrite's expression of
// one header's lines: ^<name>: and a space, as most were written.
var headerLinePrefix = regexp.MustCompile(`^\^([!#$%&'*+.^_|~0-9A-Za-z-]+): ?`)

// legacyReplace is a 1.x rewrite "^<name>: <regex>" "<name>: <format>" of
// one header's lines as the 2.x replace-header of that header's value
// (the expression anchored at the value's beginning, without case for
// the i rules), and false for another form (a request line's, a header
// renamed).
func legacyReplace(rule string, w []string) ([]string, bool) {
	m := headerLinePrefix.FindStringSubmatch(w[1])
	if m == nil {
		return nil, false
	}
	name := m[1]
	format, ok := strings.CutPrefix(w[2], name+":")
	if !ok {
		return nil, false
	}
	expr := "^" + strings.TrimPrefix(w[1], m[0])
	if strings.Contains(w[0], "irep") {
		expr = "(?i)" + expr
	}
	return []string{rule, "replace-header", name, expr, strings.TrimPrefix(format, " ")}, true
}

// requestLineMethod matches the beginning of a 1.x rewrite's expression
// of the request line: ^, the method as a group of its own (a class that
// takes no space, nor a colon where the group is [^ :]), and a space;
// its format begins with the method (\1) and a space.
var requestLineMethod = regexp.MustCompile(`^\^\(\[\^ (:?)\][*+]\) `)

// laterGroup is a reference to a group after the method's, \2 to \9:
// \1 to \8 of the URI's expression.
var laterGroup = regexp.MustCompile(`\\[2-9]`)

// legacyRequestLine is a 1.x rewrite "^([^ :]*) <regex>[ HTTP]"
// "\1 <format>[ HTTP]" [<condition>] of the request line as the 2.x replace-uri <regex>
// <format> [<condition>] (its groups one less: the method's is gone;
// without case for reqirep), what its warning adds, and false for
// another form. 1.x matched each header line too: the method's group
// [^ ] (without the colon) takes a header's name and colon, so that the
// expression matches a header line whose value it matches, which
// replace-uri leaves as it is.
func legacyRequestLine(w []string) ([]string, string, bool) {
	m := requestLineMethod.FindStringSubmatch(w[1])
	format, ok := strings.CutPrefix(w[2], `\1 `)
	conditional := len(w) > 4 && (w[3] == "if" || w[3] == "unless")
	if m == nil || !ok || strings.Contains(format, `\0`) || strings.Contains(format, `\1`) || len(w) > 3 && !conditional {
		return nil, "", false
	}
	expr := "^" + strings.TrimPrefix(w[1], m[0])
	if w[0] == "reqirep" {
		expr = "(?i)" + expr
	}
	format = laterGroup.ReplaceAllStringFunc(format, func(g string) string { return `\` + string(g[1]-1) })
	// "<regex> HTTP" "<format> HTTP": the URI up to the line's version,
	// which the format writes back.
	if e, f, ok := cutBoth(expr, format, " HTTP"); ok {
		expr, format = e, f
	}
	note := ""
	if m[1] == "" {
		note = "; 1.x rewrote a header line the expression matched too (its [^ ] takes the header's name and colon), which replace-uri leaves as it is"
	}
	return append([]string{"http-request", "replace-uri", expr, format}, w[3:]...), note, true
}

// cutBoth is a and b without the suffix they both end with, and false
// where either does not.
func cutBoth(a, b, suffix string) (string, string, bool) {
	a, okA := strings.CutSuffix(a, suffix)
	b, okB := strings.CutSuffix(b, suffix)
	return a, b, okA && okB
}

// modernized is l as the 2.x line that replaced its 1.x keyword, and
// what the warning says, or l and "" for a line of another keyword (or a
// 1.x one in a form not translated, which is then refused as it is).
func modernized(l Line) (Line, string) {
	w := l.Words
	if name, ok := legacyTimeouts[w[0]]; ok && len(w) == 2 {
		l.Words = []string{"timeout", name, w[1]}
		return l, "read as timeout " + name + ", which replaced " + w[0] + " (removed in HAProxy 2.1)"
	}
	if w[0] == "block" && len(w) >= 3 && (w[1] == "if" || w[1] == "unless") {
		l.Words = append([]string{"http-request", "deny"}, w[1:]...)
		return l, "read as http-request deny, which replaced block with the same syntax (removed in HAProxy 2.1)"
	}
	return modernizedHeader(l)
}

// modernizedHeader is l, a 1.x header rule (reqadd, reqdel, reqrep and
// the like), as the 2.x rule that replaced it, and what the warning says,
// or l and "" for another line or form.
func modernizedHeader(l Line) (Line, string) {
	w := l.Words
	if rule, ok := legacyHeaderAdds[w[0]]; ok && len(w) == 2 {
		// reqadd "<name>: <value>" (its space escaped), a whole header
		// line, its value taken as written: a % in it is text, which
		// add-header's log-format writes %%.
		name, value, found := strings.Cut(w[1], ":")
		if found && name != "" && !strings.ContainsAny(name, " \t") {
			l.Words = []string{rule, "add-header", name, strings.ReplaceAll(strings.TrimLeft(value, " \t"), "%", "%%")}
			return l, "read as " + rule + " add-header " + name + ", which replaced " + w[0] + " (removed in HAProxy 2.1)"
		}
	}
	if rule, ok := legacyHeaderDels[w[0]]; ok && len(w) == 2 {
		if m := wholeHeader.FindStringSubmatch(w[1]); m != nil {
			l.Words = []string{rule, "del-header", m[1]}
			return l, "read as " + rule + " del-header " + m[1] + ", which replaced " + w[0] + " (removed in HAProxy 2.1): the header by its name, in any case"
		}
	}
	if rule, ok := legacyHeaderReplaces[w[0]]; ok && len(w) >= 3 {
		return modernizedReplace(l, rule)
	}
	return l, ""
}

// modernizedReplace is the 1.x rewrite l (reqrep and the like) as the
// 2.x rule (rule) that replaced it, and what the warning says: of one
// header's lines, replace-header; of the request line (with a condition
// or none), replace-uri; l and "" for another form.
func modernizedReplace(l Line, rule string) (Line, string) {
	w := l.Words
	if words, ok := legacyReplace(rule, w); ok && len(w) == 3 {
		l.Words = words
		return l, "read as " + rule + " replace-header " + words[2] + ", which replaced " + w[0] + " (removed in HAProxy 2.1): the header by its name, in any case, its value's expression matched after the name's colon and spaces, where 1.x matched the line as sent"
	}
	if words, note, ok := legacyRequestLine(w); rule == "http-request" && ok {
		l.Words = words
		return l, "read as http-request replace-uri " + words[2] + " " + words[3] + ", which replaced " + w[0] + " (removed in HAProxy 2.1): the request line's URI, its method kept" + note
	}
	return l, ""
}
