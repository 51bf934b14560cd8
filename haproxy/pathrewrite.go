package haproxy

import (
	"cmp"
	"maps"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// HAProxy's path rewrites, http-request set-path, replace-path, set-uri
// and replace-uri, as Caddy's uri path_regexp: one regular expression of
// the path as sent, whose match becomes a template. A form is read where
// HAProxy rewrites the request exactly so; another is refused.

// pathRewrite is a rewrite as Caddy's uri path_regexp: the path as sent,
// matched by find, becomes replace (a template of Go's regexp.Expand).
type pathRewrite struct {
	find, replace string
	// uri is what Caddy's rewrite <uri> writes instead ("": none):
	// set-query's ?<query>, set-uri's <path>?<query>.
	uri string
	// approx says how HAProxy's rewrite differs ("": it does not), a
	// warning of the line.
	approx string
}

// uriAsPathNote is how a rewrite of the URI read as one of the path
// differs.
const uriAsPathNote = "HAProxy rewrites the URI as the request line has it, Caddy the path, the query kept: alike for a request of a path (origin form); a request in absolute form (GET http://host/…) begins with its scheme, which HAProxy's expression does not match"

// unrootedNote is how HAProxy's path differs where a rewrite leaves it
// without its leading / (an anchored regsub whose subst has none, a
// replace-uri whose format has none: of /legacy, regsub(^/legacy,) leaves
// nothing).
const unrootedNote = "where the rewritten path is empty or does not begin with /, HAProxy sends it so (GET  HTTP/1.1 for an empty one), Go's request / for an empty one"

// pathRewriteOf reads set-path <format> and set-uri <format>, and
// replace-path <regex> <format> and replace-uri <regex> <format>: HAProxy
// replaces the whole path (the URI) with the format where the regular
// expression matches it anywhere, the format's \0 to \9 its groups.
func pathRewriteOf(l Line, args []string) (pathRewrite, error) {
	switch op := arg(l, 1); {
	case (op == "set-path" || op == "set-uri") && len(args) == 1:
		return setPath(l, args[0])
	case (op == "replace-path" || op == "replace-uri") && len(args) == 2:
		return replacePath(l, args[0], args[1])
	case op == "set-query" && len(args) == 1:
		return setQuery(l, args[0])
	}
	return pathRewrite{}, refuse(l, "set-path, set-uri and set-query take a format, replace-path and replace-uri a regular expression and a format")
}

// setQuery reads set-query <text>: HAProxy writes the query after the
// path's ?, Caddy's rewrite ?<text> the same (its literal components as
// they are). A sample is refused.
func setQuery(l Line, format string) (pathRewrite, error) {
	if s, err := readPathFormat(format, l); err != nil || s.fetch != "" {
		return pathRewrite{}, cmp.Or(err, refuse(l, "%s: log-format samples are not translated in a query", format))
	}
	return pathRewrite{uri: "?" + format}, checkQueryText(format, l)
}

// checkQueryText refuses a query as text that Caddy's rewrite would not
// write as it is: an empty one (HAProxy keeps the ?, Go's request drops
// it), one with a byte Caddy reads otherwise or Go escapes.
func checkQueryText(query string, l Line) error {
	if query == "" {
		return refuse(l, "an empty query: HAProxy keeps the ?, which Go's request drops: not translated")
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("#{}", c) >= 0 {
			return refuse(l, "%s: %q in a query: Caddy's rewrite would read it otherwise (a fragment, a placeholder) or Go send it escaped", query, c)
		}
	}
	return nil
}

// rewrittenPathBytes are the bytes besides letters and digits that Go
// sends as they are in a path that Caddy's rewrite set (it escapes the
// others, HAProxy sends them as written).
const rewrittenPathBytes = "-_.~$&+,/:;=@"

// setURIText reads set-uri <path>[?<query>] as text: Caddy's rewrite of
// the path and the query, none where the text has none (HAProxy drops
// the request's).
func setURIText(l Line, format string) (pathRewrite, error) {
	path, query, hasQuery := strings.Cut(format, "?")
	if !strings.HasPrefix(path, "/") {
		return pathRewrite{}, refuse(l, "%s: only a path (/…) is translated in set-uri (HAProxy sends another URI as it is)", format)
	}
	for i := 0; i < len(path); i++ {
		if c := path[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') && strings.IndexByte(rewrittenPathBytes, c) < 0 {
			return pathRewrite{}, refuse(l, "%s: %q in a path: Caddy's rewrite has Go send it escaped, HAProxy as it is", format, c)
		}
	}
	if hasQuery {
		if err := checkQueryText(query, l); err != nil {
			return pathRewrite{}, err
		}
	}
	return pathRewrite{uri: path + "?" + query}, nil
}

// replacePath reads replace-path, and replace-uri where it rewrites the
// path alone (checkURIAsPath).
func replacePath(l Line, expr, format string) (pathRewrite, error) {
	if err := checkRE2(expr, l); err != nil {
		return pathRewrite{}, err
	}
	r := pathRewrite{find: wholeValueMatch(expr)}
	if arg(l, 1) == "replace-uri" {
		if err := checkURIReplace(expr, format, l); err != nil {
			return r, err
		}
		r.approx = uriAsPathNote
		if !strings.HasPrefix(format, "/") {
			r.approx += "; " + unrootedNote
		}
	}
	var err error
	r.replace, err = expandTemplate(format, l, pathByte, 1, groupsOf(expr))
	return r, err
}

// checkURIReplace refuses a replace-uri that is not a rewrite of the path
// alone: its expression ^<prefix>(.*), the prefix not matching the
// query's ? nor the path's end (checkPathPrefix), and its format ending
// with that last group (the rest of the URI: of the path, the query
// kept), which it names nowhere else, nor \0 (the whole URI).
func checkURIReplace(expr, format string, l Line) error {
	parts := topSequence(expr)
	if n := len(parts); n > 1 && parts[n-1].Op == syntax.OpEndText {
		parts = parts[:n-1]
	}
	last := parts[len(parts)-1]
	if last.Op != syntax.OpCapture || !isGreedyAny(last.Sub[0]) {
		return refuse(l, "%s: only ^<prefix>(.*), the rest of the URI carried over by the format's last group, is translated (a rewrite of the path, the query kept)", expr)
	}
	if err := checkPathPrefix(expr, parts[:len(parts)-1], l); err != nil {
		return err
	}
	rest := `\` + strconv.Itoa(last.Cap)
	if last.Cap > 9 || !strings.HasSuffix(format, rest) || strings.Contains(strings.TrimSuffix(format, rest), rest) || strings.Contains(format, `\0`) {
		return refuse(l, "%s: only a format that ends with %s (the rest of the URI, its query too), and names neither it elsewhere nor \\0, is translated", format, rest)
	}
	return nil
}

// topSequence is the parts of expr (which checkRE2 compiled) in
// sequence at its top level.
func topSequence(expr string) []*syntax.Regexp {
	re, _ := syntax.Parse(expr, syntax.Perl)
	if re.Op == syntax.OpConcat {
		return re.Sub
	}
	return []*syntax.Regexp{re}
}

// isGreedyAny tells whether re is .* (greedy).
func isGreedyAny(re *syntax.Regexp) bool {
	return re.Op == syntax.OpStar && re.Flags&syntax.NonGreedy == 0 && (re.Sub[0].Op == syntax.OpAnyCharNotNL || re.Sub[0].Op == syntax.OpAnyChar)
}

// checkPathPrefix refuses an expression of a URI (parts, its top-level
// sequence) that may match otherwise in the path: one not anchored at
// the beginning (^), or with a part that may match the query's ? or
// test the path's end ($, \b), where the URI goes on.
func checkPathPrefix(expr string, parts []*syntax.Regexp, l Line) error {
	if len(parts) == 0 || parts[0].Op != syntax.OpBeginText {
		return refuse(l, "%s: only an expression anchored at the URI's beginning (^) is translated as a rewrite of the path", expr)
	}
	for _, p := range parts {
		if why := mayLeaveThePath(p); why != "" {
			return refuse(l, "%s: %s, which the URI has after the path: not translated as a rewrite of the path", expr, why)
		}
	}
	return nil
}

// mayLeaveThePath says why re may match past the path in a URI ("" if it
// cannot): a ? or any character, or an end or word boundary.
func mayLeaveThePath(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return "any character matches the query's ?"
	case syntax.OpLiteral:
		if strings.ContainsRune(string(re.Rune), '?') {
			return "it matches the query's ?"
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '?' && '?' <= re.Rune[i+1] {
				return "its class matches the query's ?"
			}
		}
	case syntax.OpEndText, syntax.OpEndLine, syntax.OpBeginLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return "it tests where the path ends"
	}
	for _, sub := range re.Sub {
		if why := mayLeaveThePath(sub); why != "" {
			return why
		}
	}
	return ""
}

// setPath reads set-path's format: text alone (the whole path
// replaced), %[path] with text around it, or %[path,regsub(…)] alone;
// set-uri's: text alone, or %[url,regsub(^…)] alone, where it rewrites
// the path alone.
func setPath(l Line, format string) (pathRewrite, error) {
	fetch := map[string]string{"set-path": "path", "set-uri": "url"}[arg(l, 1)]
	s, err := readPathFormat(format, l)
	switch {
	case err != nil:
		return pathRewrite{}, err
	case s.fetch == "" && fetch == "url":
		return setURIText(l, format)
	case s.fetch == "":
		// text alone: a backslash is text, as HAProxy sends it
		replace, err := expandTemplate(format, l, pathByte, 1, -1)
		return pathRewrite{find: "^(.*)$", replace: replace}, err
	case s.fetch != fetch:
		return pathRewrite{}, refuse(l, "%s: only %%[%s] and %%[%s,regsub(…)] are translated in %s", format, fetch, fetch, arg(l, 1))
	case s.regsub == nil && fetch == "url":
		return pathRewrite{}, refuse(l, "%s: set-uri of %%[url] alone is not translated", format)
	case s.regsub == nil:
		return textAround(l, s)
	case s.before != "" || s.after != "":
		return pathRewrite{}, refuse(l, "%s: text around %%[…,regsub(…)] is not translated (HAProxy adds it where the expression does not match too)", format)
	}
	return s.regsub.rewrite(l, fetch == "url")
}

// textAround is set-path's <before>%[path]<after>: the path as sent with
// text before and after it.
func textAround(l Line, s pathFormat) (pathRewrite, error) {
	var replace [2]string
	for i, text := range []string{s.before, s.after} {
		if strings.ContainsAny(text, `\%`) {
			return pathRewrite{}, refuse(l, "%s: only text and one %%[path] are translated here", text)
		}
		var err error
		if replace[i], err = expandTemplate(text, l, pathByte, 1, -1); err != nil {
			return pathRewrite{}, err
		}
	}
	return pathRewrite{find: "^(.*)$", replace: replace[0] + "${1}" + replace[1]}, nil
}

// pathFormat is set-path's or set-uri's format as read: text (fetch
// ""), or the text before and after one sample of a fetch, with a regsub
// converter or none.
type pathFormat struct {
	before, fetch, after string
	regsub               *regsub
}

// regsub is the converter regsub(<regex>,<subst>[,<flags>]): HAProxy
// replaces the first match of the expression with subst, its \0 to \9
// the match and its groups; every match with the flag g, without case
// with i.
type regsub struct {
	expr, subst, flags string
}

// readPathFormat reads a format of a path rewrite: text, or one sample
// %[<fetch>] or %[<fetch>,regsub(…)] with text around it.
func readPathFormat(format string, l Line) (pathFormat, error) {
	start := strings.Index(format, "%[")
	if start < 0 {
		if strings.Contains(format, "%") {
			return pathFormat{}, refuse(l, "%s: log-format variables are not translated in a path", format)
		}
		return pathFormat{}, nil
	}
	f := pathFormat{before: format[:start]}
	rest := format[start+2:]
	n := strings.IndexAny(rest, ",]")
	if n < 0 {
		return f, refuse(l, "%%[ without its ]: HAProxy refuses it too")
	}
	f.fetch, rest = rest[:n], rest[n:]
	if conv, ok := strings.CutPrefix(rest, ",regsub("); ok {
		r, end, err := readRegsub(conv, l)
		if err != nil {
			return f, err
		}
		f.regsub, rest = &r, conv[end:]
	}
	after, ok := strings.CutPrefix(rest, "]")
	if !ok {
		return f, refuse(l, "%s: only the converter regsub is translated in a path", format)
	}
	f.after = after
	return f, nil
}

// readRegsub reads regsub's arguments (after its parenthesis) up to its
// closing one, and where that ends: as HAProxy reads them, a comma
// between two, single quotes around text taken as written; a double
// quote or a backslash outside single quotes is refused.
func readRegsub(args string, l Line) (regsub, int, error) {
	var words []string
	var word strings.Builder
	quoted := false
	for i := 0; i < len(args); i++ {
		switch c := args[i]; {
		case c == '\'':
			quoted = !quoted
		case quoted:
			word.WriteByte(c)
		case c == ',' || c == ')':
			words = append(words, word.String())
			word.Reset()
			if c == ')' {
				return regsubOf(words, i+1, l)
			}
		case c == '"' || c == '\\':
			return regsub{}, 0, refuse(l, "regsub(%s: a %c outside single quotes is not translated", args, c)
		default:
			word.WriteByte(c)
		}
	}
	return regsub{}, 0, refuse(l, "regsub(%s without its ): HAProxy refuses it too", args)
}

// regsubOf is regsub of its arguments (words), which end at end.
func regsubOf(words []string, end int, l Line) (regsub, int, error) {
	if len(words) < 2 || len(words) > 3 {
		return regsub{}, 0, refuse(l, "regsub takes a regular expression, a substitution and flags")
	}
	r := regsub{expr: words[0], subst: words[1]}
	if len(words) == 3 {
		r.flags = words[2]
	}
	return r, end, nil
}

// rewrite is the rewrite of the path that makes its first match of the
// expression the substitution (ofURI: of the URI, where the expression
// matches within the path alone, checkPathPrefix): the path around the
// match kept as groups of their own, the expression's groups after the
// first, so that \N is ${N+2}. With the flag g, every match: Caddy's
// path_regexp replaces each, the match a group of its own (\N is
// ${N+1}).
func (r regsub) rewrite(l Line, ofURI bool) (pathRewrite, error) {
	expr, global, err := r.flagged(l)
	if err != nil {
		return pathRewrite{}, err
	}
	p := pathRewrite{find: "^((?s:.*?))(" + expr + ")((?s:.*))$"}
	var notes []string
	if ofURI {
		if err := checkPathPrefix(r.expr, topSequence(r.expr), l); err != nil {
			return p, err
		}
		notes = append(notes, uriAsPathNote)
	}
	if topSequence(r.expr)[0].Op == syntax.OpBeginText && !strings.HasPrefix(r.subst, "/") {
		notes = append(notes, unrootedNote)
	}
	p.approx = strings.Join(notes, "; ")
	if global {
		p.find = "(" + expr + ")"
		p.replace, err = expandTemplate(r.subst, l, pathByte, 1, groupsOf(r.expr))
		return p, err
	}
	subst, err := expandTemplate(r.subst, l, pathByte, 2, groupsOf(r.expr))
	rest := groupsOf(r.expr) + 3
	p.replace = "${1}" + subst + "${" + strconv.Itoa(rest) + "}"
	return p, err
}

// flagged is regsub's expression (checked by checkRE2) as its flags make
// it, without case for i (?i:…), and whether g replaces every match. g
// is refused for an expression that may match empty (HAProxy then steps
// one byte on, where Go skips an empty match that abuts the one before)
// or that tests what comes before a match (\A and \b, which HAProxy
// matches again from each match's end, \A at each: PCRE's NOTBOL spares
// ^ alone).
func (r regsub) flagged(l Line) (expr string, global bool, err error) {
	if err := checkRE2(r.expr, l); err != nil {
		return "", false, err
	}
	expr = r.expr
	if strings.Trim(r.flags, "gi") != "" {
		return "", false, refuse(l, "regsub's flags %s: only g and i are translated", r.flags)
	}
	if strings.Contains(r.flags, "i") {
		expr = "(?i:" + expr + ")"
	}
	if global = strings.Contains(r.flags, "g"); !global {
		return expr, false, nil
	}
	re, _ := syntax.Parse(r.expr, syntax.Perl)
	if minLength(re) == 0 || strings.Contains(r.expr, `\A`) || strings.Contains(r.expr, `\b`) || strings.Contains(r.expr, `\B`) {
		return "", false, refuse(l, "regsub(%s,…,%s): g of an expression that may match empty or tests what comes before its match (\\A, \\b, \\B) is not translated: HAProxy steps over empty matches, and matches again from each match's end, otherwise than Go", r.expr, r.flags)
	}
	return expr, true, nil
}

// minLength is the fewest characters re matches.
func minLength(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLength(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLength(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minLength(sub)
		}
		return n
	case syntax.OpAlternate:
		n := minLength(re.Sub[0])
		for _, sub := range re.Sub[1:] {
			n = min(n, minLength(sub))
		}
		return n
	}
	return 0 // an empty match, an assertion, a star or a question mark
}

// resolvePathRewrites settles the matchers of the frontend's path
// rewrites, and refuses what would run in another order than HAProxy's.
// The site's route writes the header rules first, then the answers and
// the rewrites in the order written: a header rule after a rewrite runs
// before it, exact only where neither reads the request (a condition, a
// sample); so runs log_skip and edge_rate_limit's match, and an ACL of a
// variable of the path tests the path as rewritten.
func (fe *frontend) resolvePathRewrites() error {
	for i, r := range fe.pathRewrites {
		if r.cond == nil {
			continue
		}
		var err error
		if fe.pathRewrites[i].when, err = fe.conditionMatcher(r.cond, r.line); err != nil {
			return err
		}
	}
	for _, r := range fe.pathRewrites {
		if err := fe.checkRewriteOrder(r); err != nil {
			return err
		}
	}
	return nil
}

// checkRewriteOrder refuses a rule of the frontend that the translation
// would run on the other side of the rewrite r than HAProxy does, where
// that changes what either does.
func (fe *frontend) checkRewriteOrder(r requestRule) error {
	after := func(l Line) bool { return comparePos(l.Pos, r.line.Pos) > 0 }
	for _, h := range fe.headers {
		_, text := h.v.text()
		reads := h.cond != nil || r.cond != nil || (h.op == "set-header" || h.op == "add-header") && !text
		if after(h.line) && reads {
			return refuse(h.line, "after the path rewrite at line %d, which the translation runs after every header rule: not translated where either has a condition or the header's value a sample", r.line.Pos.Line)
		}
	}
	if err := fe.checkMatchesBefore(r, after); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(fe.vars)) {
		v := fe.vars[name]
		if s := v.sample.subject; !after(v.line) && (s == pathSubject || s == urlSubject || s == querySubject) {
			return refuse(r.line, "rewrites what set-var(%s) at line %d read: its ACLs would test the rewritten request (they test the sample itself)", name, v.line.Pos.Line)
		}
	}
	return nil
}

// checkMatchesBefore refuses a log_skip or a track-sc with a condition
// after the rewrite r: Caddy matches them before any route runs.
func (fe *frontend) checkMatchesBefore(r requestRule, after func(Line) bool) error {
	for _, s := range fe.logSkips {
		if after(s.line) && s.cond != nil {
			return refuse(s.line, "log_skip runs before the path rewrite at line %d: not translated with a condition", r.line.Pos.Line)
		}
	}
	for _, tr := range fe.trackers {
		if tr != nil && after(tr.line) && tr.cond != nil {
			return refuse(tr.line, "edge_rate_limit matches before the path rewrite at line %d: not translated with a condition", r.line.Pos.Line)
		}
	}
	return nil
}
