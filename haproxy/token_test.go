package haproxy

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	caddyparser "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The values of issue 27's review, and their kin: each token writer's
// output, read back by Caddy's own Caddyfile parser (environment
// expansion, then its lexer) and, for a literal, Caddy's replacer, is the
// value, byte for byte, or the writer refuses it.
var hostileValues = []string{
	`ends in a backslash\`, `holds \" an escaped quote`, `"quoted"`, "back`tick", "both ` and \\\"",
	"<<END", "<<END\nrespond x\nEND", "{env.HOME}", "{file./etc/passwd}", "{$HOME}", "{$HOME:x}", "a {http.request.uri} b",
	"\\{not a placeholder\\}", "}{", "{", "#not a comment", "line one\nfile_server browse\n}", "tab\there", "cr\r\nlf",
	`{"json": "with \"escapes\""}`, "", " ", "\x00nul", "caf\u00e9", "\xff\xfe", "plain",
}

func FuzzLiteralToken(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := literalToken(v, nil)
		if err != nil {
			checkRefusal(t, v, err)
			return
		}
		text := readBack(t, tok)
		if got := caddy.NewReplacer().ReplaceAll(text, ""); got != v {
			t.Fatalf("%q: written %q, lexed %q, replaced %q", v, tok, text, got)
		}
	})
}

func FuzzPlainToken(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := plainToken(v, nil)
		if err != nil {
			if !errors.Is(err, errBraces) {
				checkRefusal(t, v, err)
			} else if !strings.ContainsAny(v, "{}") {
				t.Fatalf("%q refused for braces it does not hold", v)
			}
			return
		}
		if text := readBack(t, tok); text != v || strings.ContainsAny(text, "{}") {
			t.Fatalf("%q: written %q, lexed %q", v, tok, text)
		}
	})
}

// A CEL string literal is one backtick token's part that holds no brace,
// no backtick and no quote unescaped, and whose escapes (CEL's, which are
// Go's) give the value back.
func FuzzCELString(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lit, err := celString(v, nil)
		if err != nil {
			if utf8.ValidString(v) {
				t.Fatalf("%q refused: %v", v, err)
			}
			return
		}
		if strings.ContainsAny(lit, "{}`") {
			t.Fatalf("%q: %s holds a brace or a backtick", v, lit)
		}
		text := readBack(t, "`{http.request.uri.path} == "+lit+"`")
		if got, err := strconv.Unquote(strings.TrimPrefix(text, "{http.request.uri.path} == ")); err != nil || got != v {
			t.Fatalf("%q: %s reads back as %q (%v)", v, lit, got, err)
		}
	})
}

// A value of the environment goes out as Caddy's reference to it, which
// Caddy's adapter expands to the same value; none that the Caddyfile's
// text could not carry goes out at all.
func TestEnvValuesGoOutAsCaddysReferences(t *testing.T) {
	t.Setenv("CADDY_HA_TOKEN", "s3cr3t-t0ken")
	uses := []envUse{{haproxy: "${CADDY_HA_TOKEN}", caddy: "{$CADDY_HA_TOKEN}", value: "s3cr3t-t0ken"}}
	tok, err := literalToken("Bearer s3cr3t-t0ken {x}", uses)
	if err != nil || tok != `"Bearer {$CADDY_HA_TOKEN} \{x\}"` {
		t.Fatalf("literalToken: %q, %v", tok, err)
	}
	if got := caddy.NewReplacer().ReplaceAll(readBack(t, tok), ""); got != "Bearer s3cr3t-t0ken {x}" {
		t.Fatalf("read back as %q", got)
	}
	bad := []envUse{{haproxy: "${P}", caddy: "{$P}", value: `a"b`}}
	if _, err := literalToken(`x a"b`, bad); !errors.Is(err, errEnvValue) {
		t.Fatalf("a value of the environment with a quote: %v, want errEnvValue", err)
	}
}

// checkRefusal fails t unless err is one of the reasons no token carries
// v, and that reason holds for v.
func checkRefusal(t *testing.T, v string, err error) {
	t.Helper()
	switch {
	case errors.Is(err, errNotUTF8) && !utf8.ValidString(v):
	case errors.Is(err, errEnvSpan) && strings.Contains(v, "{$"):
	case errors.Is(err, errUnquoted) && strings.Contains(v, "`") && strings.Contains(v, "\r"):
	default:
		t.Fatalf("%q refused: %v", v, err)
	}
}

// readBack is the one argument tok is to Caddy's Caddyfile parser, after
// a directive, in a site.
func readBack(t *testing.T, tok string) string {
	t.Helper()
	blocks, err := caddyparser.Parse("Caddyfile", []byte("site {\n\trespond "+tok+" 200\n}\n"))
	if err != nil {
		t.Fatalf("%q does not parse: %v", tok, err)
	}
	if len(blocks) != 1 || len(blocks[0].Segments) != 1 || len(blocks[0].Segments[0]) != 3 {
		t.Fatalf("%q: not one token: %+v", tok, blocks)
	}
	return blocks[0].Segments[0][1].Text
}
