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

// addHostile seeds f with hostileValues.
func addHostile(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
}

func FuzzLiteralToken(f *testing.F) {
	addHostile(f)
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
	addHostile(f)
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
	addHostile(f)
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

// Issue 27.3: what caddy ha migrate prints quotes the source as written and
// never holds a value of the environment: the comment keeps "${NAME}", the
// translation asks Caddy for {$NAME}, a password is redacted, and a
// refusal of a line that read the environment names ${NAME}, not its
// value. Issue 27.2: {$NAME} in single quotes, which HAProxy keeps as it
// is and Caddy would expand, is refused with its line.
func TestSecretsStayOutOfTheTranslation(t *testing.T) {
	testEnv["API_TOKEN"] = "t0ken-0f-the-api"
	testEnv["STATS_PASS"] = "st4ts-passw0rd"
	defer delete(testEnv, "API_TOKEN")
	defer delete(testEnv, "STATS_PASS")
	const head = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n" +
		"frontend web\n    bind 127.0.0.1:8080\n"
	out, err := translateText(t, head+
		"    http-request set-header Authorization \"Bearer ${API_TOKEN}\"\n"+
		"    stats enable\n    stats uri /stats\n    stats auth \"admin:${STATS_PASS}\"\n"+
		"    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"t0ken-0f-the-api", "st4ts-passw0rd"} {
		if strings.Contains(out, secret) {
			t.Errorf("the translation holds %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{`# b.cfg:8: http-request set-header Authorization "Bearer ${API_TOKEN}"`,
		`"Bearer {$API_TOKEN}"`, `# b.cfg:11: stats auth <redacted>`} {
		if !strings.Contains(out, want) {
			t.Errorf("the translation lacks %s:\n%s", want, out)
		}
	}
	_, err = translateText(t, head+"    http-request set-header X-Token \"${API_TOKEN}\" if { hdr(x-a) -m foo }\n    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n")
	if err == nil || strings.Contains(err.Error(), "t0ken-0f-the-api") || !strings.HasPrefix(err.Error(), "b.cfg:8:") {
		t.Errorf("a refused line that read the environment: %v", err)
	}
	_, err = translateText(t, head+"    http-request set-header X-Literal '{$API_TOKEN}'\n    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n")
	if err == nil || !strings.HasPrefix(err.Error(), "b.cfg:8: http-request set-header") || !strings.Contains(err.Error(), "{$") {
		t.Errorf("{$NAME} in single quotes: %v, want a refusal at b.cfg:8", err)
	}
}

// A log-format value's token reads back, through Caddy's parser and
// replacer, as its literal texts with each placeholder's value between
// them: a brace or a placeholder in a text is never evaluated, the
// table's placeholders are.
func FuzzFormatToken(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v, v)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		repl := caddy.NewReplacer()
		var want strings.Builder
		parts := []formatPart{{text: before}}
		want.WriteString(before)
		for i, e := range []formatEntry{formatFetches["src"], formatFetches["hdr"], formatVariables["fp"]} {
			name := e.placeholder("X-Test")
			value := "value" + strconv.Itoa(i) + "{}"
			repl.Set(name, value)
			parts = append(parts, formatPart{placeholder: name}, formatPart{text: after})
			want.WriteString(value + after)
		}
		tok, err := formatToken(logFormat{parts: parts}, nil)
		if errors.Is(err, errBackslashSample) && (strings.HasSuffix(before, `\`) || strings.HasSuffix(after, `\`)) {
			return
		}
		// Each text is checked on its own: two halves of a character
		// are no UTF-8 each, though they join into one.
		if errors.Is(err, errNotUTF8) && (!utf8.ValidString(before) || !utf8.ValidString(after)) {
			return
		}
		if err != nil {
			checkRefusal(t, before+after, err)
			return
		}
		text := readBack(t, tok)
		if got := repl.ReplaceAll(text, ""); got != want.String() {
			t.Fatalf("%q, %q: written %q, lexed %q, replaced %q, want %q", before, after, tok, text, got, want.String())
		}
	})
}

// A bind's address and port from the environment go out as Caddy's
// references in the site's address, its bind and its servers option, so
// that Caddy reads them when it reads the Caddyfile, as HAProxy did when
// it started (env-vars-container.cfg); a default that is used is the
// configuration's own text, not a value of the environment.
func TestBindFromTheEnvironment(t *testing.T) {
	testEnv["BIND_ADDR"] = "10.1.2.3"
	defer delete(testEnv, "BIND_ADDR")
	const rest = "\n    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n"
	head := "defaults\n    mode http\n    timeout client 5s\nfrontend web\n"
	out, err := translateText(t, head+"    bind \"${BIND_ADDR-0.0.0.0}:${PORT-8080}\""+rest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"servers {$BIND_ADDR:0.0.0.0}:{$PORT:8080} {", "http://:{$PORT:8080} {", "bind {$BIND_ADDR:0.0.0.0}\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "10.1.2.3") {
		t.Errorf("the translation holds the environment's value:\n%s", out)
	}
	out, err = translateText(t, head+"    bind \"${UNSET_ADDR-127.0.0.10}:8080\""+rest)
	if err != nil || !strings.Contains(out, "servers {$UNSET_ADDR:127.0.0.10}:8080 {") {
		t.Errorf("a default used: %v\n%s", err, out)
	}
	// A value the configuration also holds as written (a server's
	// address) is its own text, not a secret of the environment.
	testEnv["BIND_ADDR"] = "127.0.0.1"
	out, err = translateText(t, head+"    bind \"${BIND_ADDR}:8080\""+rest)
	if err != nil || !strings.Contains(out, "servers {$BIND_ADDR}:8080 {") {
		t.Errorf("a value also written in the configuration: %v\n%s", err, out)
	}
	testEnv["BIND_ADDR"] = "10.1.2.3 "
	if _, err := translateText(t, head+"    bind \"${BIND_ADDR}:80\""+rest); err == nil || !strings.Contains(err.Error(), "bind") {
		t.Errorf("an address with a space: %v", err)
	}
}

// A translation holding a value of the environment as it is is refused
// with the line that read it, unless the configuration holds that text
// as written too (its comments show it).
func TestNoEnvValueInTheTranslation(t *testing.T) {
	testEnv["API_TOKEN"] = "t0ken-0f-the-api"
	defer delete(testEnv, "API_TOKEN")
	cfg, err := Parse(strings.NewReader("global\n\tdescription \"${API_TOKEN}\"\n\tnode t0ken-0f\n"), "e.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.checkNoEnvValue("x t0ken-0f-the-api x"); err == nil || !strings.HasPrefix(err.Error(), "e.cfg:2: description \"${API_TOKEN}\": the value of ${API_TOKEN} would be in the translation as it is") {
		t.Errorf("the value in the translation: %v", err)
	}
	if err := cfg.checkNoEnvValue("x {$API_TOKEN} x t0ken-0f x"); err != nil {
		t.Errorf("no value in the translation: %v", err)
	}
	testEnv["API_TOKEN"] = "t0ken-0f"
	cfg, _ = Parse(strings.NewReader("global\n\tdescription \"${API_TOKEN}\"\n\tnode t0ken-0f\n"), "e.cfg", lookup)
	if err := cfg.checkNoEnvValue("x t0ken-0f x"); err != nil {
		t.Errorf("a value the configuration writes too: %v", err)
	}
}

// A header's or a cookie's name in a placeholder is read by Caddy's
// expression matcher only as letters, digits, '-', '_' and '.': a name of
// HTTP with another byte (a backtick, which ended the expression's
// token, a quote, '!') is refused at its line, in an ACL, a set-var's
// sample, a rate limit's key and a log-format sample alike.
func TestNamesInPlaceholders(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver a 127.0.0.1:9000\n"
	for _, tt := range []struct{ rules, want string }{
		{"\tacl a req.cook(a`) -m str x\n\thttp-request deny if a\n", "k.cfg:5: acl a:"},
		{"\thttp-request deny if { hdr(x!b) -m str y }\n", "k.cfg:5: http-request deny:"},
		{"\thttp-request set-var(txn.v) req.hdr(c`d),lower\n\thttp-request deny if { var(txn.v) -m str z }\n", "k.cfg:6: http-request deny:"},
		{"\tstick-table type string len 32 store http_req_rate(10s)\n\thttp-request track-sc0 req.hdr(k!`)\n" +
			"\thttp-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }\n", "k.cfg:6: http-request track-sc0:"},
		{"\thttp-request set-header X-A %[hdr(e`f)]\n", "k.cfg:5: http-request set-header:"},
	} {
		out, err := translateK(t, head+tt.rules+tail)
		checkOutcome(t, tt.rules, out, err, tt.want)
		if err != nil && !strings.Contains(err.Error(), errPlaceholderName.Error()) {
			t.Errorf("%q: %v, want %v", tt.rules, err, errPlaceholderName)
		}
	}
	out, err := translateK(t, head+"\thttp-request deny if { req.cook(sess_id.v2) -m str x }\n"+tail)
	checkOutcome(t, "sess_id.v2", out, err, "", "{http.request.cookie.sess_id.v2}")
}
