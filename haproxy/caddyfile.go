package haproxy

import (
	"fmt"
	"strconv"
	"strings"
)

// caddyfile writes a Caddyfile: blocks with tab indentation, and each
// HAProxy line as a comment above what it became.
type caddyfile struct {
	b     strings.Builder
	depth int
}

func (c *caddyfile) line(format string, args ...any) {
	c.b.WriteString(strings.Repeat("\t", c.depth))
	fmt.Fprintf(&c.b, format, args...)
	c.b.WriteByte('\n')
}

// comment keeps an HAProxy line, and a note on what became of it; a
// stats auth password is redacted.
func (c *caddyfile) comment(l Line, note string) {
	text := "# " + l.Pos.String() + ": " + joinWords(redacted(l.Words))
	if note != "" {
		text += "  (" + note + ")"
	}
	c.line("%s", text)
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

// joinWords writes words back as one line, quoting those that need it,
// so that a comment shows what HAProxy read.
func joinWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\"'#\\\n\r") {
			w = strconv.Quote(w)
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// caddyToken is w as one Caddyfile token: as it is where it can be, else
// in double quotes (in which the Caddyfile reads only \" as an escape).
func caddyToken(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\"'{}#\\\n\r`") {
		return w
	}
	return `"` + strings.ReplaceAll(w, `"`, `\"`) + `"`
}
