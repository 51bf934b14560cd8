package haproxy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The one way a value of the HAProxy configuration becomes Caddyfile text.
// HAProxy carries a literal value's bytes as they are; a Caddyfile has
// three readers that could take them for syntax: its lexer (quotes,
// braces, comments, heredocs), its environment expansion ({$NAME}, on the
// raw text before lexing, in comments too) and, at run time, Caddy's
// replacer ({env.NAME}, {file.PATH}, {http.…} in most values). Each
// function here gives a token that those readers turn back into the
// value, byte for byte, or an error where none can (the translation then
// refuses the line).

// Errors of values a Caddyfile cannot carry.
var (
	errNotUTF8         = errors.New("it is not UTF-8, and a Caddyfile is read as UTF-8 (other bytes become U+FFFD)")
	errEnvSpan         = errors.New("it holds {$, which Caddy's Caddyfile adapter expands as an environment variable wherever it stands, with no escape")
	errBraces          = errors.New("it holds a brace, which Caddy would read as a placeholder here")
	errBackslashSample = errors.New("it has a backslash right before a sample, which Caddy's replacer would read as escaping the placeholder's brace")
	errUnquoted        = errors.New("no Caddyfile quoting carries it exactly (a backtick, a backslash before a double quote or at its end, and a carriage return or the heredoc marker)")
)

// checkCarried reports why no Caddyfile can carry v at all, if it cannot.
func checkCarried(v string) error {
	switch {
	case !utf8.ValidString(v):
		return errNotUTF8
	case strings.Contains(v, "{$"):
		return errEnvSpan
	}
	return nil
}

// escapeLiteral returns v as Caddy's replacer reads it back as v: each
// brace escaped (\{, \}), so that nothing in it is a placeholder. A
// backslash before a brace stays a backslash: the replacer takes only the
// one next to the brace as its escape.
func escapeLiteral(v string) (string, error) {
	if err := checkCarried(v); err != nil {
		return "", err
	}
	if !strings.ContainsAny(v, "{}") {
		return v, nil
	}
	return strings.NewReplacer("{", `\{`, "}", `\}`).Replace(v), nil
}

// escapePlain returns v, to be used as written, refusing braces, which
// Caddy may read as placeholders there.
func escapePlain(v string) (string, error) {
	if err := checkCarried(v); err != nil {
		return "", err
	}
	if strings.ContainsAny(v, "{}") {
		return "", errBraces
	}
	return v, nil
}

// literalToken is v, a value Caddy passes through its replacer at run time
// (header values, response bodies, redirect targets), as one token; the
// values of envs (the variables its line read) in it as Caddy's {$NAME}.
func literalToken(v string, envs []envUse) (string, error) {
	s, err := withEnv(v, envs, escapeLiteral)
	if err != nil {
		return "", err
	}
	return quoteToken(s)
}

// formatToken is f, a log-format read into literal text and Caddy's
// placeholders, as one token: each text escaped as a literal (the values
// of envs in it as {$NAME}), each placeholder as Caddy's.
func formatToken(f logFormat, envs []envUse) (string, error) {
	var b strings.Builder
	for _, p := range f.parts {
		if p.placeholder != "" {
			if strings.HasSuffix(b.String(), `\`) {
				return "", errBackslashSample
			}
			if !placeholderKey.MatchString(p.placeholder) {
				return "", errPlaceholderName
			}
			b.WriteString("{" + p.placeholder + "}")
			continue
		}
		s, err := withEnv(p.text, envs, escapeLiteral)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return quoteToken(b.String())
}

// plainToken is v, a value Caddy takes as written or whose handling of
// placeholders is not known here (file paths, names, addresses), as one
// token: a brace in it is refused rather than guessed at.
func plainToken(v string, envs []envUse) (string, error) {
	s, err := withEnv(v, envs, escapePlain)
	if err != nil {
		return "", err
	}
	return quoteToken(s)
}

// nameToken is v, an HTTP field or cookie name, which must be a token of
// RFC 9110 (so it is written bare, and a prefix such as - or + can go
// before it).
func nameToken(v string, envs []envUse) (string, error) {
	if v == "" {
		return "", errors.New("an empty name")
	}
	for i := 0; i < len(v); i++ {
		if !isTokenChar(v[i]) {
			return "", fmt.Errorf("%q is not a name of HTTP (RFC 9110 token characters only)", v)
		}
	}
	if strings.HasPrefix(v, "#") || strings.HasPrefix(v, "<<") || strings.HasPrefix(v, "`") {
		return "", fmt.Errorf("%q: a Caddyfile would read it as a comment, a heredoc or a quote", v)
	}
	return withEnv(v, envs, func(s string) (string, error) { return s, nil })
}

// errPlaceholderName refuses a name that Caddy would not read as part of
// a placeholder's name everywhere.
var errPlaceholderName = errors.New("it holds a byte other than a letter, a digit, '-', '_' or '.', which Caddy's expression matcher does not read in a placeholder's name (a backtick would end the expression's token)")

// placeholderKey matches a placeholder's name as Caddy's expression
// matcher reads it (celmatcher.go's placeholderRegexp), which the
// replacer reads alike.
var placeholderKey = regexp.MustCompile(`^[A-Za-z][\w.-]*$`)

// placeholderNameToken is v, an HTTP field or cookie name, as the end of
// a placeholder's name ({http.request.header.<v>}): a name (nameToken)
// that placeholderKey takes, so that it stays a placeholder in an
// expression too.
func placeholderNameToken(v string, envs []envUse) (string, error) {
	if !placeholderKey.MatchString("x" + v) {
		return "", errPlaceholderName
	}
	return nameToken(v, envs)
}

// errEnvValue refuses a value of the environment that {$NAME} cannot
// stand for: Caddy's adapter puts it into the Caddyfile's text as it is.
var errEnvValue = errors.New("it holds a value of the environment with a quote, a backslash, a brace, a '#', a '$' or white space, which {$NAME} would put into the Caddyfile's text as syntax")

// withEnv is v with each value of envs in it written as the variable's
// Caddy reference ({$NAME}, which Caddy's adapter expands as HAProxy did
// when it read the file), so that no value of the environment is in the
// Caddyfile; the pieces between them are escaped by esc.
func withEnv(v string, envs []envUse, esc func(string) (string, error)) (string, error) {
	if len(envs) == 0 {
		return esc(v)
	}
	var b strings.Builder
	for {
		at, use := -1, envUse{}
		for _, u := range envs {
			if u.value == "" {
				continue
			}
			if i := strings.Index(v, u.value); i >= 0 && (at < 0 || i < at || i == at && len(u.value) > len(use.value)) {
				at, use = i, u
			}
		}
		if at < 0 {
			s, err := esc(v)
			b.WriteString(s)
			return b.String(), err
		}
		if !safeEnvValue(use.value) {
			return "", errEnvValue
		}
		s, err := esc(v[:at])
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		b.WriteString(use.caddy)
		v = v[at+len(use.value):]
	}
}

// safeEnvValue reports whether a value of the environment can stand in a
// Caddyfile's text as it is, in any token: printable, and nothing in it
// syntax to the lexer, the replacer or CEL.
func safeEnvValue(v string) bool {
	for _, r := range v {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune("\"`'\\{}#$", r) {
			return false
		}
	}
	return utf8.ValidString(v)
}

// envRef matches Caddy's references to the environment that withEnv
// writes.
var envRef = regexp.MustCompile(`\{\$[A-Za-z_][A-Za-z0-9_]*(:[^{}]*)?\}`)

// quoteToken writes s as one Caddyfile token that its lexer reads back as
// s (s is already what the replacer is to read): bare where nothing in it
// is syntax, else in double quotes (where only \" is an escape, so no
// backslash may stand before a quote or at the end), else in backticks
// (nothing escaped inside), else as a heredoc. s must hold no
// {$ (checkCarried).
func quoteToken(s string) (string, error) {
	if bare(s) || strings.Contains(s, "{$") && bare(envRef.ReplaceAllString(s, "x")) {
		return s, nil
	}
	if !strings.Contains(s, `\"`) && !strings.HasSuffix(s, `\`) {
		return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`, nil
	}
	if !strings.Contains(s, "`") {
		return "`" + s + "`", nil
	}
	if !strings.Contains(s, "\r") {
		marker := "HAPROXY"
		for strings.Contains(s, marker) {
			marker += "_"
		}
		// At column 0, so that the lexer strips no indentation.
		return "<<" + marker + "\n" + s + "\n" + marker, nil
	}
	return "", errUnquoted
}

// bare reports whether s can be written as it is: not empty, and nothing
// in it a quote, an escape, a brace, white space, a comment or a heredoc.
func bare(s string) bool {
	if s == "" || strings.HasPrefix(s, "<<") {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || strings.ContainsRune("\"`'\\{}#", r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// celString is v as a CEL string literal in an expression matcher, written
// in backticks: every byte that CEL, the backtick token or Caddy's
// expansion of {placeholders} in the expression could read as syntax is
// an escape (\", \\, \x60 for a backtick, \x7b and \x7d for braces, \xNN
// for control bytes), so that the string is v whatever it holds.
func celString(v string, envs []envUse) (string, error) {
	if !utf8.ValidString(v) {
		return "", errNotUTF8
	}
	s, err := withEnv(v, envs, celEscape)
	return `"` + s + `"`, err
}

// celEscape is v escaped for a CEL string literal (see celString).
func celEscape(v string) (string, error) {
	if !strings.ContainsFunc(v, celSpecial) {
		return v, nil // most values, addresses among them: nothing to escape
	}
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '`' || r == '{' || r == '}' || r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// celSpecial reports whether celEscape escapes r.
func celSpecial(r rune) bool {
	return r == '"' || r == '\\' || r == '`' || r == '{' || r == '}' || r < 0x20 || r == 0x7f || !unicode.IsPrint(r)
}

// commentText is s as the text of a Caddyfile comment: a line of its own,
// with no {$, which Caddy's adapter would expand (and, with a } further
// on, swallow the Caddyfile up to it), even in a comment.
func commentText(s string) string {
	s = strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
	return strings.ReplaceAll(s, "{$", `{\$`)
}
