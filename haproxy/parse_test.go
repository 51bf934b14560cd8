package haproxy

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

var testEnv = map[string]string{"CRT": "/etc/ssl/site.pem", "EMPTY": "", "PORT": "8443"}

func lookup(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// Words are split as HAProxy's manual (2.2, 2.3) says: escapes outside
// and inside double quotes, strong single quotes, variables only inside
// double quotes, adjacent parts joined, comments outside quotes.
func TestSplitWords(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string
	}{
		{`bind *:443 ssl crt /etc/ssl/x.pem alpn http/1.1`, []string{"bind", "*:443", "ssl", "crt", "/etc/ssl/x.pem", "alpn", "http/1.1"}},
		{"\ttimeout  client\t30s  # a comment", []string{"timeout", "client", "30s"}},
		{`log-format %{+Q}o\ %t\ %s`, []string{"log-format", "%{+Q}o %t %s"}},
		{`log-format "%{+Q}o %t"' %s'\ %{-Q}r`, []string{"log-format", "%{+Q}o %t %s %{-Q}r"}},
		{`reqrep "^([^\ :]*)\ /static/(.*)" '\1 /\2'`, []string{"reqrep", `^([^ :]*) /static/(.*)`, `\1 /\2`}},
		{`bind "fd@${PORT}" "$PORT" '${PORT}' ${PORT}`, []string{"bind", "fd@8443", "8443", "${PORT}", "${PORT}"}},
		{`crt "${CRT}" "${UNSET-/default.pem}" "x${EMPTY}y"`, []string{"crt", "/etc/ssl/site.pem", "/default.pem", "xy"}},
		{`acl a path_reg ^/api/v\d+\.json$`, []string{"acl", "a", "path_reg", `^/api/v\d+\.json$`}},
		{`errorfile 503 "a \"quoted\" \$ name" \# not a comment`, []string{"errorfile", "503", `a "quoted" $ name`, "#", "not", "a", "comment"}},
		{`http-request set-header X-Tab "a\tb\x41"`, []string{"http-request", "set-header", "X-Tab", "a\tbA"}},
		{`user "" x`, []string{"user", "", "x"}},
		{`"#" '#'` + "#c", []string{"#", "#"}},
		{`   # only a comment`, nil},
	} {
		got, err := splitWords(tt.line, Position{"t.cfg", 1}, lookup)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %q (%v), want %q", tt.line, got, err, tt.want)
		}
	}
}

// Mistakes are refused with the file and line, never read as something
// else.
func TestSplitWordsRefuses(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`crt "unclosed`, "double quote is not closed"},
		{`crt 'unclosed`, "single quote is not closed"},
		{`crt "${NOT_SET}"`, "NOT_SET is not set"},
		{`crt "$NOT_SET"`, "NOT_SET is not set"},
		{`crt "${1BAD}"`, "not an environment variable name"},
		{`crt "${OPEN"`, `"${" is not closed`},
		// HAProxy 2.6: "forbidden first char in environment variable name".
		{`log "$5x" local0`, `write "\$" for a dollar`},
		{`log "a$ b" local0`, `write "\$" for a dollar`},
		{`log "a$" local0`, `write "\$" for a dollar`},
		{`x \x4`, `two hex digits`},
		{`x "\xzz"`, `not a hex byte`},
	} {
		_, err := splitWords(tt.line, Position{"t.cfg", 7}, lookup)
		if err == nil || !strings.HasPrefix(err.Error(), "t.cfg:7: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want t.cfg:7: …%s", tt.line, err, tt.want)
		}
	}
}

// The seed's configuration parses into its sections and lines, each with
// its line number.
func TestParseSeed(t *testing.T) {
	cfg, err := ParseFile("testdata/seed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range cfg.Sections {
		kinds = append(kinds, s.Kind+" "+s.Name)
	}
	if want := []string{"defaults ", "frontend nodepilot_frontend", "backend nodepilot_active"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("sections %q, want %q", kinds, want)
	}
	be := cfg.Section("backend", "nodepilot_active")
	if cfg.DefaultsOf(be) != cfg.Sections[0] {
		t.Error("the backend does not take the defaults before it")
	}
	last := be.Lines[len(be.Lines)-1]
	if last.Words[0] != "server" || last.Words[1] != "node-b" || last.Pos.Line != 25 || last.Pos.File != "testdata/seed.cfg" {
		t.Errorf("last line %v at %v", last.Words, last.Pos)
	}
}

// Named defaults, "from", continuations and the sections HAProxy knows.
func TestParseSections(t *testing.T) {
	const text = `global
	daemon
defaults base
	timeout connect 5s
defaults
	mode http
frontend fe from base
	bind :80 \
	     name web
	default_backend be
backend be
	server a 127.0.0.1:8080
userlist admins
	user ops insecure-password 'x'
listen stats 127.0.0.1:9000
	stats enable
`
	cfg, err := Parse(strings.NewReader(text), "h.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	fe, be := cfg.Section("frontend", "fe"), cfg.Section("backend", "be")
	if cfg.DefaultsOf(fe) != cfg.Sections[1] || cfg.DefaultsOf(be) != cfg.Sections[2] {
		t.Error("defaults: from names one, else the last before")
	}
	if bind := fe.Lines[0]; !reflect.DeepEqual(bind.Words, []string{"bind", ":80", "name", "web"}) || bind.Pos.Line != 8 {
		t.Errorf("continued line %q at %v", bind.Words, bind.Pos)
	}
	if fe.Lines[1].Pos.Line != 10 {
		t.Errorf("the line after a continuation is at %v", fe.Lines[1].Pos)
	}
	if l := cfg.Section("listen", "stats"); l == nil || !reflect.DeepEqual(l.Args, []string{"127.0.0.1:9000"}) {
		t.Errorf("listen section %+v", l)
	}
	if u := cfg.Section("userlist", "admins"); u == nil || u.Lines[0].Words[3] != "x" {
		t.Errorf("userlist %+v", u)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"mode http\n", `h.cfg:1: "mode" is outside any section`},
		{"frontend\n", "h.cfg:1: frontend needs a name"},
		{"frontend a from nowhere\n", `h.cfg:1: frontend: no defaults section named "nowhere" before it`},
		{"backend a\nbackend a\n", `h.cfg:2: backend "a": a backend of that name is at h.cfg:1`},
		{"global\n\tdaemon \\", "h.cfg:2: the last line ends in a backslash"},
		{"global x\n", "h.cfg:1: global takes no name"},
	} {
		_, err := Parse(strings.NewReader(tt.text), "h.cfg", lookup)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s", tt.text, err, tt.want)
		}
	}
}

// Conditions as HAProxy reads them: AND by juxtaposition, OR by "||" or
// "or", "!" on a term, anonymous ACLs in braces.
func TestSplitCondition(t *testing.T) {
	pos := Position{"h.cfg", 3}
	words := strings.Fields("use_backend api if is_api !is_static || { path_beg /v2 } or ! { src 10.0.0.0/8 }")
	before, c, err := SplitCondition(words, pos)
	if err != nil {
		t.Fatal(err)
	}
	want := &Condition{Any: [][]Term{
		{{ACL: "is_api"}, {Not: true, ACL: "is_static"}},
		{{Anon: []string{"path_beg", "/v2"}}},
		{{Not: true, Anon: []string{"src", "10.0.0.0/8"}}},
	}}
	if !reflect.DeepEqual(before, []string{"use_backend", "api"}) || !reflect.DeepEqual(c, want) {
		t.Fatalf("got %q %+v", before, c)
	}
	if _, c, _ := SplitCondition(strings.Fields("http-request deny unless ok"), pos); c == nil || !c.Unless {
		t.Error("unless")
	}
	if _, c, _ := SplitCondition(strings.Fields("default_backend be"), pos); c != nil {
		t.Error("a condition where there is none")
	}
	for _, bad := range []string{"deny if", "deny if a ||", "deny if { path_beg /x", "deny if ! ! a", "deny if { }", "deny if || a", "deny if a }"} {
		if _, _, err := SplitCondition(strings.Fields(bad), pos); err == nil || !strings.HasPrefix(err.Error(), "h.cfg:3: ") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

// A configuration read from a file takes the process's environment.
func TestParseFileEnvironment(t *testing.T) {
	t.Setenv("CADDY_HA_TEST_CRT", "/tmp/x.pem")
	f := t.TempDir() + "/h.cfg"
	if err := os.WriteFile(f, []byte("frontend fe\n\tbind :443 ssl crt \"${CADDY_HA_TEST_CRT}\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseFile(f)
	if err != nil || cfg.Sections[0].Lines[0].Words[4] != "/tmp/x.pem" {
		t.Fatalf("%v %+v", err, cfg)
	}
}

// A section's name holds what HAProxy 2.6 lets it hold (letters, digits,
// '.', '_', ':' and '-'), else it is refused as HAProxy refuses it: the
// translation writes names into snippets', loggers' and comments' text,
// where a resolvers' or a userlist's name with a newline wrote the rest
// of it as a Caddyfile directive (respond, for every request). A
// defaults', a cache's and a program's name HAProxy takes as they are:
// they reach comments alone.
func TestSectionNamesAsHAProxyTakesThem(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"resolvers \"dns\\nrespond 299 #\"\n\tnameserver a 127.0.0.11:53\n", "n.cfg:1: resolvers \"dns\\nrespond 299 #\": character '\\n' is not permitted in a resolvers name (HAProxy refuses it too)"},
		{"userlist \"u\\nrespond 299 #\"\n\tuser a insecure-password x\n", "n.cfg:1: userlist \"u\\nrespond 299 #\": character '\\n' is not permitted"},
		{"frontend \"f x\"\n\tbind :80\n", "n.cfg:1: frontend \"f x\": character ' ' is not permitted"},
		{"backend b{x}\n", "n.cfg:1: backend \"b{x}\": character '{' is not permitted"},
		{"defaults 'd {$x}'\n\tmode http\ncache \"c x\"\n\ttotal-max-size 4\nfrontend f.1:a_b-c\n\tbind :80\n", ""},
	} {
		_, err := Parse(strings.NewReader(tt.text), "n.cfg", lookup)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%q: %v, want %q", tt.text, err, tt.want)
		}
	}
	// A defaults' name, written in a comment, stays in it.
	out, err := translateText(t, "defaults \"d\\n}\\nrespond 299\\n{\\$HOME}\"\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n")
	if err != nil || strings.Contains(out, "\nrespond") || strings.Contains(out, "{$HOME}") {
		t.Errorf("a defaults' name: %v\n%s", err, out)
	}
}
