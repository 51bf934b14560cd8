package haproxy

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A backend's own http-request and redirect rules: HAProxy runs them on
// the requests that backend gets, after the frontend's, in the order
// written (its redirect rules after its http-request rules).

// requestRule is a backend's rule: a header rule, a path rewrite or an
// answer, when its condition (nil: always) holds.
type requestRule struct {
	line   Line
	cond   *Condition
	when   matcher // the condition, resolved
	header *headerRule
	path   *pathRewrite
	answer *answer
}

// httpRequest reads a backend's http-request rule through the actions'
// registry.
func (be *backend) httpRequest(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	a := requestAction(l)
	switch {
	case a == nil:
		return refuse(l, "http-request %s is not translated yet", arg(l, 1))
	case a.backend == nil:
		return refuse(l, "http-request %s in a backend is not translated yet", arg(l, 1))
	}
	// Every action takes a condition here: the backend's rules are
	// written in order, each with its matcher.
	return a.backend(be, l, words[2:], cond)
}

// readCacheUse reads http-request cache-use or http-response cache-store
// (see cacheRule).
func (be *backend) readCacheUse(l Line, _ []string, _ *Condition) error {
	n, err := cacheRule(l, be.cfg)
	if err != nil {
		return err
	}
	be.notes = append(be.notes, n)
	return nil
}

func (be *backend) readFilter(l Line) error {
	n, err := filterNote(l, be.cfg)
	if err != nil {
		return err
	}
	be.notes = append(be.notes, n)
	return nil
}

func (be *backend) readRequestHeader(l Line, args []string, cond *Condition) error {
	h, err := headerRuleOf(l, args)
	be.requestRules = append(be.requestRules, requestRule{line: l, cond: cond, header: &h})
	return err
}

func (be *backend) readAnswer(l Line, args []string, cond *Condition) error {
	a, err := answerReaders[arg(l, 1)](args, l, be.cfg.files())
	be.requestRules = append(be.requestRules, requestRule{line: l, cond: cond, answer: &a})
	return err
}

func (be *backend) readRedirect(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	a, err := redirectAnswer(words[1:], l)
	be.redirects = append(be.redirects, requestRule{line: l, cond: cond, answer: &a})
	return err
}

// readPathRewrite reads a path rewrite (pathRewriteOf).
func (be *backend) readPathRewrite(l Line, args []string, cond *Condition) error {
	r, err := pathRewriteOf(l, args)
	be.requestRules = append(be.requestRules, requestRule{line: l, cond: cond, path: &r})
	return err
}

// pathByte refuses a byte of a path's format that Go would send escaped
// (HAProxy sends it as it is): a letter, a digit, and the bytes Go's
// url keeps as they are in a rewritten path (validEncoded) go, any other
// (a space, ?, #, ", \, a brace, …) is refused.
func pathByte(c byte) string {
	if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') && strings.IndexByte("-_.~!$&'()*+,;=:@[]/", c) < 0 {
		return "in a path: Go would send it escaped, HAProxy as it is"
	}
	return ""
}

// headerValueByte refuses a control character in a header value's
// format, which no header carries.
func headerValueByte(c byte) string {
	if c < ' ' && c != '\t' || c == 0x7f {
		return "a control character in a header value"
	}
	return ""
}

// expandTemplate is an HAProxy format as Go's regexp.Expand template of
// an expression whose groups from shift+1 are HAProxy's \0 to \9
// (wholeValueMatch's from 2: shift 1), of which HAProxy's expression has
// groups (-1: there is none, a backslash is text): \N its group N+shift,
// nothing past the expression's groups (HAProxy's empty group, where
// N+shift could be the wrapper's own), '$' itself; a log-format
// expression, another escape, or a byte refused by badByte (why, or "")
// is refused. Caddy expands its placeholders in a replacement before the
// template, so that a sample's value would be read as part of the
// template: log-format is not translated here.
func expandTemplate(format string, l Line, badByte func(byte) string, shift, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		switch c := format[i]; {
		case c == '%':
			return "", refuse(l, "%s: log-format expressions are not translated yet", format)
		case groups >= 0 && c == '\\' && i+1 < len(format) && format[i+1] >= '0' && format[i+1] <= '9':
			if n := int(format[i+1] - '0'); n <= groups {
				b.WriteString("${" + strconv.Itoa(n+shift) + "}")
			}
			i++
		case groups >= 0 && c == '\\':
			return "", refuse(l, "%s: only \\0 to \\9 are translated after a backslash", format)
		case c == '$':
			b.WriteString("$$")
		case badByte(c) != "":
			return "", refuse(l, "%s: %q %s", format, c, badByte(c))
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// wholeValueMatch is a regular expression (checked by checkRE2) as Go
// matches HAProxy's replace-path and replace-header: its leftmost match,
// as PCRE finds it, and the rest of the value around it, so that the
// whole value is replaced. Its match is group 1, and its groups follow:
// HAProxy's \0 is ${1}, \N ${N+1} (expandTemplate).
func wholeValueMatch(expr string) string { return "^(?s:.*?)(" + expr + ")(?s:.*)$" }

// groupsOf is the number of groups of expr (checked by checkRE2).
func groupsOf(expr string) int { return regexp.MustCompile(expr).NumSubexp() }

// re2Escapes are the letters after a backslash that RE2 and PCRE read
// alike (classes, anchors, control characters, hexadecimal codes, Unicode
// classes); any other letter or digit is refused: RE2 reads \v as a
// vertical tab (PCRE: any vertical space), and fails to compile most
// others (\Z, \h, \R, \K, back-references).
const re2Escapes = "dDwWsSbBAztnrfxpP"

// checkRE2 refuses an HAProxy regular expression (PCRE) that Go's RE2
// cannot compile or reads otherwise: back-references, lookarounds,
// possessive quantifiers and atomic groups fail to compile; escapes
// outside re2Escapes are refused.
func checkRE2(expr string, l Line) error {
	if _, err := regexp.Compile(expr); err != nil {
		return refuse(l, "%s: not a regular expression Go's RE2 reads: %v", expr, err)
	}
	for i := 0; i+1 < len(expr); i++ {
		if expr[i] != '\\' {
			continue
		}
		next := expr[i+1]
		if (next >= 'a' && next <= 'z' || next >= 'A' && next <= 'Z' || next >= '0' && next <= '9') && !strings.ContainsRune(re2Escapes, rune(next)) {
			return refuse(l, "%s: \\%c reads otherwise in PCRE (HAProxy's) than in Go's RE2: not translated", expr, next)
		}
		i++
	}
	return nil
}

// resolveRules settles each rule's matcher: its condition's ACLs, as the
// backend sees them.
func (be *backend) resolveRules() error {
	for _, rules := range [][]requestRule{be.requestRules, be.redirects, be.responseActions} {
		for i, r := range rules {
			if r.cond == nil {
				continue
			}
			var err error
			if rules[i].when, err = be.conditionMatcher(r.cond, r.line); err != nil {
				return err
			}
		}
	}
	for i := range be.responseActions {
		if n := neverInResponse(be.responseActions[i].line, &be.responseActions[i].when); n != nil {
			be.notes = append(be.notes, *n)
		}
	}
	return nil
}

// ruledForwarding is which forwarding headers the header rules leave set
// or added (their value reaches the server): the frontend's (ruled),
// then the backend's own.
func (be *backend) ruledForwarding(ruled map[string]bool) map[string]bool {
	ruled = maps.Clone(ruled)
	for _, r := range be.requestRules {
		if r.header != nil {
			// A rule with a condition leaves the header as the request
			// has it, as HAProxy passes it.
			ruled[http.CanonicalHeaderKey(r.header.name)] = r.header.op != "del-header" || r.cond != nil
		}
	}
	return ruled
}

// mayLack are the forwarding headers that the frontend's rules (fe's
// mayLack) or the backend's may leave out of a request (a backend's last
// rule of it has a condition): the request is checked for each once
// every rule ran.
func (be *backend) mayLack(fe *frontend) []string {
	last := map[string]requestRule{}
	for _, r := range be.requestRules {
		if r.header != nil {
			last[http.CanonicalHeaderKey(r.header.name)] = r
		}
	}
	var lacking []string
	for _, name := range forwardingHeaders {
		if r, ok := last[name]; ok && r.cond != nil || slices.Contains(fe.forwarding.mayLack, name) {
			lacking = append(lacking, name)
		}
	}
	return lacking
}

// deferredResponse tells whether the backend's http-response rules are
// deferred header handlers: one has a condition, which header_down
// cannot take.
func (be *backend) deferredResponse() bool {
	return slices.ContainsFunc(be.responseActions, func(r requestRule) bool { return r.cond != nil })
}

// checkDeferredResponse refuses the backend's http-response rules as
// deferred header handlers where a frontend's rule changes a header they
// do: the frontend's would run first, HAProxy runs them after.
func (be *backend) checkDeferredResponse(fe *frontend) error {
	if !be.deferredResponse() {
		return nil
	}
	for _, r := range be.responseActions {
		for _, h := range fe.responseHeaders {
			if strings.EqualFold(h.name, r.header.name) {
				return refuse(r.line, "with a condition, the backend's http-response rules run after %s %s's (line %d), which changes %s too: not translated", fe.section.Kind, fe.section.Name, h.line.Pos.Line, h.name)
			}
		}
	}
	return nil
}

// checkReplaceOrder refuses a replace-header among the rules written as
// the reverse_proxy's header_down (the backend's, then the frontend's
// without a condition) that a set-header or add-header of the same
// header follows: Caddy applies a header_down's additions and settings
// before its replacements, HAProxy the rules in order.
func (be *backend) checkReplaceOrder(fe *frontend) error {
	var down []headerRule
	if !be.deferredResponse() {
		for _, r := range be.responseActions {
			down = append(down, *r.header)
		}
	}
	for _, h := range fe.responseHeaders {
		if h.cond == nil {
			down = append(down, h)
		}
	}
	for i, h := range down {
		if h.op != "replace-header" {
			continue
		}
		for _, later := range down[i+1:] {
			if (later.op == "set-header" || later.op == "add-header") && strings.EqualFold(later.name, h.name) {
				return refuse(h.line, "a replace-header before a %s of %s (line %d) is not translated: Caddy's header_down sets and adds before it replaces", later.op, h.name, later.line.Pos.Line)
			}
		}
	}
	return nil
}

// checkForwardingRules refuses a backend's header rule on a forwarding
// header behind the frontend's forwarded handler, which writes them all.
func (be *backend) checkForwardingRules(fe *frontend) error {
	for _, r := range be.requestRules {
		if r.header != nil && fe.forwarding.handler && forwardedHeaders[strings.ToLower(r.header.name)] {
			return refuse(r.line, "%s %s writes the forwarding headers with the forwarded handler: a backend's rule on %s is not translated", fe.section.Kind, fe.section.Name, r.header.name)
		}
	}
	return nil
}
