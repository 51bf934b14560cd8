// Package haproxy reads an HAProxy configuration as HAProxy does: its
// sections, its lines split into words with HAProxy's quoting, escaping
// and environment variables, and the conditions (if/unless) of its rules.
// It knows nothing of Caddy: the translation to a Caddy config builds on
// what it returns, so that every keyword can be translated, ignored with a
// reason, or refused with its file and line.
package haproxy

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is where a line of a configuration begins.
type Position struct {
	File string `json:"file"`
	Line int    `json:"line"`
}

func (p Position) String() string { return p.File + ":" + strconv.Itoa(p.Line) }

// Error is a mistake in a configuration, at its line.
type Error struct {
	Pos Position
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errAt(pos Position, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// splitWords splits one logical line into words as HAProxy does (its
// configuration manual, 2.2 and 2.3):
//   - words are separated by spaces and tabs; '#' outside quotes starts a
//     comment;
//   - a backslash escapes the next character ("\ ", "\#", "\\", "\'",
//     "\"", and inside double quotes "\$"); "\r", "\n", "\t" and "\xNN"
//     stand for those bytes;
//   - double quotes quote weakly: environment variables ("$VAR",
//     "${VAR}", "${VAR-default}") are replaced, escapes are read;
//   - single quotes quote strongly: nothing inside is interpreted;
//   - quoted and unquoted parts next to each other make one word.
//
// getenv looks up a variable; one that is unset and has no default is an
// error, since HAProxy would run with an empty value where a setting was
// meant. An empty quoted word ("") is a word.
func splitWords(line string, pos Position, getenv func(string) (string, bool)) ([]string, error) {
	w, err := lexWords(line, pos, getenv)
	return w.text, err
}

// words are a line's words as HAProxy reads them (text), as the line wrote
// them (source: quotes, escapes and ${NAME} references as they are), and
// whether each took a value from the environment.
type words struct {
	text, source []string
	env          []bool
	uses         []envUse
}

// envUse is a variable of the environment a line read: its reference as
// HAProxy wrote it, as Caddy's Caddyfile writes it, and its value.
type envUse struct {
	haproxy, caddy, value string
}

// lexWords is splitWords, keeping each word's source.
func lexWords(line string, pos Position, getenv func(string) (string, bool)) (words, error) {
	lx := lexer{line: line, pos: pos, getenv: getenv}
	for i := 0; i < len(line); i++ {
		n, comment, err := lx.step(i)
		if err != nil || comment {
			return lx.out, err
		}
		i += n
	}
	switch lx.quote {
	case doubleQuoted:
		return lx.out, errAt(pos, "a double quote is not closed")
	case singleQuoted:
		return lx.out, errAt(pos, "a single quote is not closed")
	}
	lx.end(len(line))
	return lx.out, nil
}

// quoting is the kind of quotes the lexer is inside.
type quoting int

const (
	unquoted     quoting = iota
	doubleQuoted         // "…"
	singleQuoted         // '…'
)

// lexer is lexWords' state: the words so far, and the one being read.
type lexer struct {
	line   string
	pos    Position
	getenv func(string) (string, bool)
	out    words

	word    strings.Builder
	inWord  bool
	fromEnv bool // the word took a value from the environment
	start   int  // where the word begins in line
	quote   quoting
}

// end ends the word being read, if any, before line[at].
func (lx *lexer) end(at int) {
	if lx.inWord {
		lx.out.text = append(lx.out.text, lx.word.String())
		lx.out.source = append(lx.out.source, lx.line[lx.start:at])
		lx.out.env = append(lx.out.env, lx.fromEnv)
		lx.word.Reset()
		lx.inWord, lx.fromEnv = false, false
	}
}

// begin begins a word at line[at], unless one is being read.
func (lx *lexer) begin(at int) {
	if !lx.inWord {
		lx.start, lx.inWord = at, true
	}
}

// step reads line[i]: how many bytes after it it took too, and whether it
// begins a comment, which ends the line.
func (lx *lexer) step(i int) (int, bool, error) {
	c := lx.line[i]
	switch {
	case lx.quote == singleQuoted:
		if c == '\'' {
			lx.quote = unquoted
		} else {
			lx.word.WriteByte(c)
		}
		return 0, false, nil
	case c == '\\':
		n, err := lx.escape(i)
		return n, false, err
	case lx.quote == doubleQuoted:
		n, err := lx.doubleQuotedByte(i)
		return n, false, err
	}
	return 0, lx.unquotedByte(i), nil
}

// escape reads the escape sequence whose backslash is line[i].
func (lx *lexer) escape(i int) (int, error) {
	if i+1 >= len(lx.line) {
		return 0, errAt(lx.pos, "a backslash ends the line with nothing to escape")
	}
	n, s, err := escape(lx.line[i+1:], lx.quote == doubleQuoted)
	if err != nil {
		return 0, errAt(lx.pos, "%v", err)
	}
	lx.begin(i)
	lx.word.WriteString(s)
	return n, nil
}

// doubleQuotedByte reads line[i] inside double quotes, where a '$' begins an
// environment variable.
func (lx *lexer) doubleQuotedByte(i int) (int, error) {
	switch c := lx.line[i]; c {
	case '"':
		lx.quote = unquoted
	case '$':
		n, s, use, err := expand(lx.line[i+1:], lx.getenv)
		if err != nil {
			return 0, errAt(lx.pos, "%v", err)
		}
		lx.word.WriteString(s)
		if n > 0 {
			lx.fromEnv = true
			lx.out.uses = append(lx.out.uses, use)
		}
		return n, nil
	default:
		lx.word.WriteByte(c)
	}
	return 0, nil
}

// unquotedByte reads line[i] outside quotes, and tells whether it begins
// a comment.
func (lx *lexer) unquotedByte(i int) bool {
	switch c := lx.line[i]; c {
	case '"':
		lx.begin(i)
		lx.quote = doubleQuoted
	case '\'':
		lx.begin(i)
		lx.quote = singleQuoted
	case '#':
		lx.end(i)
		return true
	case ' ', '\t':
		lx.end(i)
	default:
		lx.begin(i)
		lx.word.WriteByte(c)
	}
	return false
}

// escape reads the escape sequence at the start of s (after its
// backslash): how many bytes it took and what they stand for.
func escape(s string, weak bool) (int, string, error) {
	switch c := s[0]; c {
	case ' ', '#', '\\', '\'', '"':
		return 1, string(c), nil
	case '$':
		if weak {
			return 1, "$", nil
		}
		return 1, `\$`, nil // outside double quotes "\$" is not an escape
	case 'r':
		return 1, "\r", nil
	case 'n':
		return 1, "\n", nil
	case 't':
		return 1, "\t", nil
	case 'x':
		if len(s) < 3 {
			return 0, "", fmt.Errorf(`"\x" wants two hex digits`)
		}
		b, err := strconv.ParseUint(s[1:3], 16, 8)
		if err != nil {
			return 0, "", fmt.Errorf(`"\x%s" is not a hex byte`, s[1:3])
		}
		return 3, string([]byte{byte(b)}), nil
	default:
		// HAProxy keeps an unknown escape as written (regular expressions
		// such as "\." rely on it).
		return 1, `\` + string(c), nil
	}
}

// expand reads the variable reference at the start of s (after its '$')
// and returns how many bytes it took, its value and the use.
func expand(s string, getenv func(string) (string, bool)) (int, string, envUse, error) {
	if s == "" || s[0] != '{' && !isNameByte(s[0], true) {
		// HAProxy 2.6 refuses it too ("forbidden first char in
		// environment variable name").
		return 0, "", envUse{}, fmt.Errorf(`a "$" in double quotes begins an environment variable's name: write "\$" for a dollar (HAProxy refuses it too)`)
	}
	if s[0] != '{' {
		n := 0
		for n < len(s) && isNameByte(s[n], n == 0) {
			n++
		}
		v, ok := getenv(s[:n])
		if !ok {
			return 0, "", envUse{}, fmt.Errorf("environment variable %s is not set", s[:n])
		}
		return n, v, envUse{haproxy: "$" + s[:n], caddy: "{$" + s[:n] + "}", value: v}, nil
	}
	closeAt := strings.IndexByte(s, '}')
	if closeAt < 0 {
		return 0, "", envUse{}, fmt.Errorf(`"${" is not closed`)
	}
	ref := s[1:closeAt]
	name, def, hasDefault := strings.Cut(ref, "-")
	if name == "" || !validName(name) {
		return 0, "", envUse{}, fmt.Errorf("%q is not an environment variable name", ref)
	}
	v, ok := getenv(name)
	switch {
	case ok:
	case hasDefault:
		v = def
	default:
		return 0, "", envUse{}, fmt.Errorf("environment variable %s is not set", name)
	}
	use := envUse{haproxy: "${" + ref + "}", caddy: "{$" + name + "}", value: v}
	if hasDefault {
		use.caddy = "{$" + name + ":" + def + "}"
	}
	return closeAt + 1, v, use, nil
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return true
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}
