package haproxy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// caddyfile writes a Caddyfile: blocks with tab indentation, and each
// HAProxy line as a comment above what it became. Every value of the
// HAProxy configuration it writes goes through literal, plain or name
// (token.go); one that no token carries exactly is the error of the line
// being written (the last commented), which translate returns.
type caddyfile struct {
	b        strings.Builder
	depth    int
	at       Line      // the HAProxy line being written
	err      error     // the first value that no token carries
	warnings []Warning // the approximations written (see note)
	// outcomes are what became of each line commented, by its position
	// (the report of Translation.Lines).
	outcomes map[Position]outcome
}

// outcome is what became of a line: its status, and why or how.
type outcome struct {
	status status
	why    string
}

func (c *caddyfile) line(format string, args ...any) {
	c.b.WriteString(strings.Repeat("\t", c.depth))
	fmt.Fprintf(&c.b, format, args...)
	c.b.WriteByte('\n')
}

// remark writes a comment of the translation's own: the values of the
// configuration in it are text (commentText), never Caddyfile syntax.
func (c *caddyfile) remark(format string, args ...any) {
	c.line("%s", commentText("# "+fmt.Sprintf(format, args...)))
}

// comment keeps an HAProxy line, as written, and a note on what became
// of it (see Line.Source for what is redacted).
func (c *caddyfile) comment(l Line, note string) {
	c.at = l
	text := "# " + l.Pos.String() + ": " + l.source()
	if note != "" {
		text += "  (" + l.redactEnv(note) + ")"
	}
	c.line("%s", commentText(text))
	c.record(l.Pos, l.redactEnv(note))
}

// outcomeRank orders the outcomes of a line commented in several places.
var outcomeRank = map[status]int{ignored: 0, translated: 1, approximated: 2}

// record keeps what became of the line at pos, from its note: ignored or
// approximated as the note begins, else translated. A line commented in
// several places (a defaults line in each proxy that takes it) keeps the
// outcome that says most: approximated over translated over ignored.
func (c *caddyfile) record(pos Position, note string) {
	o := outcome{status: translated, why: note}
	for _, st := range []status{ignored, approximated} {
		if why, ok := strings.CutPrefix(note, st.String()+": "); ok {
			o = outcome{status: st, why: why}
		}
	}
	if had, ok := c.outcomes[pos]; ok && (outcomeRank[had.status] > outcomeRank[o.status] || had.status == o.status && had.why != "") {
		return
	}
	if c.outcomes == nil {
		c.outcomes = map[Position]outcome{}
	}
	c.outcomes[pos] = o
}

// note writes n as its line's comment; an approximation is a Warning too.
func (c *caddyfile) note(n note) {
	what := n.what
	if n.approximated {
		what = "approximated: " + what
		// One warning a line: a defaults line is noted in each proxy
		// that takes it.
		w := Warning{Pos: n.line.Pos, Msg: n.line.shownKeyword() + ": " + n.line.redactEnv(n.what)}
		if !slices.Contains(c.warnings, w) {
			c.warnings = append(c.warnings, w)
		}
	}
	c.comment(n.line, what)
}

func (c *caddyfile) open(format string, args ...any) {
	if format == "" {
		c.line("{")
	} else {
		c.line(format+" {", args...)
	}
	c.depth++
}

func (c *caddyfile) close() {
	c.depth--
	c.line("}")
}

// token is tok, or on err the refusal of the line at (the first is kept).
func (c *caddyfile) token(tok string, err error, v string, at Line) string {
	if err != nil && c.err == nil {
		c.err = refuseValue(at, "the value", v, err)
	}
	return tok
}

// literal is literalToken(v) (a value Caddy's replacer reads) of the line
// being written.
func (c *caddyfile) literal(v string) string {
	tok, err := literalToken(v, c.at.envs)
	return c.token(tok, err, v, c.at)
}

// composed is formatToken(f) (a log-format value, which Caddy's replacer
// reads) of the line being written.
func (c *caddyfile) composed(f logFormat) string {
	for _, why := range f.differs {
		c.approximate(why)
	}
	tok, err := formatToken(f, c.at.envs)
	return c.token(tok, err, f.raw, c.at)
}

// approximate says that a value of the line last commented is
// approximated (why): a comment above the directive being written, a
// Warning, and the line's outcome.
func (c *caddyfile) approximate(why string) {
	w := Warning{Pos: c.at.Pos, Msg: c.at.shownKeyword() + ": " + why}
	if !slices.Contains(c.warnings, w) {
		c.warnings = append(c.warnings, w)
	}
	c.line("%s", commentText("# approximated: "+why))
	c.record(c.at.Pos, "approximated: "+why)
}

// celCodePoints is the size of the expressions Caddy's expression matcher
// compiles, at most: CEL's default ExpressionSizeCodePointLimit, of the
// expression with its placeholders expanded as the matcher expands them
// (celPlaceholder).
const celCodePoints = 100000

// celPlaceholder is the expression matcher's expansion of a placeholder
// to a function call (celmatcher.go's placeholderRegexp and
// placeholderExpansion).
var celPlaceholder = regexp.MustCompile(`([^\\]|^){([a-zA-Z][\w.-]+)}`)

// expression is e, a CEL expression of the line being written, as the
// expression matcher's token; one that Caddy would not compile for its
// size (an ACL of many patterns) is the refusal of the line: it would
// adapt, and Caddy then refuse to load it.
func (c *caddyfile) expression(e string) string {
	if n := utf8.RuneCountInString(celPlaceholder.ReplaceAllString(e, `${1}ph(req, "${2}")`)); n > celCodePoints && c.err == nil {
		c.err = refuse(c.at, "its condition is a CEL expression of %d code points, past the %d Caddy's expression matcher compiles (not translated; split the patterns among several ACLs and rules)", n, celCodePoints)
	}
	return "`" + e + "`"
}

// celOf is celString(v) of line l: a CEL string literal.
func (c *caddyfile) celOf(l Line, v string) string {
	lit, err := celString(v, l.envs)
	return c.token(lit, err, v, l)
}

// plain is plainToken(v) (a value Caddy takes as written) of the line
// being written.
func (c *caddyfile) plain(v string) string { return c.plainOf(c.at, v) }

// plainOf is plainToken(v) of line l (one written before, whose value
// this is).
func (c *caddyfile) plainOf(l Line, v string) string {
	tok, err := plainToken(v, l.envs)
	return c.token(tok, err, v, l)
}

// plainIn is plainToken(v) of a value that comes from any of lines (a
// proxy's settings, and the global base directories: a path joined from
// two of them), whose uses of the environment it writes as {$NAME}.
func (c *caddyfile) plainIn(v string, lines []Line) string {
	var envs []envUse
	for _, l := range lines {
		envs = append(envs, l.envs...)
	}
	tok, err := plainToken(v, envs)
	return c.token(tok, err, v, c.at)
}

// plainIfAny is plain(v), or "" for "".
func (c *caddyfile) plainIfAny(v string) string {
	if v == "" {
		return ""
	}
	return c.plain(v)
}

// nameIfAny is name(v), or "" for "".
func (c *caddyfile) nameIfAny(v string) string {
	if v == "" {
		return ""
	}
	return c.name(v)
}

// name is nameToken(v) (an HTTP field or cookie name).
func (c *caddyfile) name(v string) string { return c.nameOf(c.at, v) }

// nameOf is nameToken(v) of line l.
func (c *caddyfile) nameOf(l Line, v string) string {
	tok, err := nameToken(v, l.envs)
	return c.token(tok, err, v, l)
}

// placeholderNameOf is placeholderNameToken(v) (a field or cookie name in
// a placeholder's name) of line l.
func (c *caddyfile) placeholderNameOf(l Line, v string) string {
	tok, err := placeholderNameToken(v, l.envs)
	return c.token(tok, err, v, l)
}
