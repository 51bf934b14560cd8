package haproxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// condEnv is the environment the conditions below are read with.
func condEnv(name string) (string, bool) {
	v, ok := map[string]string{"STAGING": "1", "REGION": "eu"}[name]
	return v, ok
}

// conditionCases are conditions HAProxy 2.6 answers (want), as
// TestConditionsAsHAProxyAnswers checks with the real haproxy.
var conditionCases = []struct {
	cond string
	want bool
}{
	{"defined(STAGING)", true},
	{"!defined(STAGING)", false},
	{"! defined(NOPE)", true},
	{"defined(STAGING) && streq(\"${REGION}\",eu)", true},
	{"defined(NOPE) || strneq(a,b)", true},
	{"1 || 0 && 0", true},
	{"(1 || 0) && 0", false},
	{"!(0 || 0)", true},
	{"0", false},
	{"007", true},
	{"-1", true},
	{"streq(a , a)", false},
	{"streq(,)", true},
	{"version_atleast(2.4)", true},
	{"version_atleast(2.6)", true},
	{"version_before(2.7)", true},
	{"version_atleast(2.7.0)", false},
	{"defined(STAGING)&&0", false},
	{"", false},
}

// Conditions are answered as HAProxy 2.6 answers them, and what the
// translation cannot answer exactly is refused with the line.
func TestConditions(t *testing.T) {
	for _, tt := range conditionCases {
		got, err := evalCondition(condLine(t, tt.cond), condEnv)
		if err != nil || got != tt.want {
			t.Errorf(".if %s: %v %v, want %v", tt.cond, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ cond, want string }{
		{"feature(OPENSSL)", "asks how the running HAProxy was built"},
		{"openssl_version_atleast(1.1.1)", "asks how the running HAProxy was built"},
		{"version_atleast(2.6.5)", "holds for some HAProxy 2.6 releases and not others"},
		{"version_before(2.6-dev1)", "only a version of numbers and dots"},
		{"defined(HAPROXY_LOCALPEER)", "HAProxy sets HAPROXY_LOCALPEER itself"},
		{"1 1", "it wants && or || between terms"},
		{"1 ||", "a term is missing"},
		{"08", "not read as HAProxy reads it"},
		{"0x1", "not read as HAProxy reads it"},
		{"true", "HAProxy cannot parse the condition at 1"},
		{"streq(a)", "takes 2 arguments"},
		{"(1", "a parenthesis is not closed"},
		{"enabled(X)", "not a predicate HAProxy 2.6 knows"},
	} {
		if _, err := evalCondition(condLine(t, tt.cond), condEnv); err == nil || !strings.HasPrefix(err.Error(), "k.cfg:1: .if") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf(".if %s: %v, want a refusal …%s", tt.cond, err, tt.want)
		}
	}
}

// condLine is the line ".if <cond>" at k.cfg:1, as Parse reads it.
func condLine(t *testing.T, cond string) Line {
	pos := Position{File: "k.cfg", Line: 1}
	w, err := lexWords(".if "+cond, pos, condEnv)
	if err != nil {
		t.Fatal(err)
	}
	return Line{Pos: pos, Words: w.text, Source: w.source}
}

// The answers of conditionCases are the real HAProxy's (haproxy -c prints
// a .notice of the branch it takes).
func TestConditionsAsHAProxyAnswers(t *testing.T) {
	bin, ok := tools.Find(t, "haproxy", "the conditions are not checked against haproxy -c")
	if !ok {
		return
	}
	var b strings.Builder
	b.WriteString("global\n")
	for i, tt := range conditionCases {
		b.WriteString(".if " + tt.cond + "\n.notice \"" + string(rune('A'+i)) + "=yes\"\n.else\n.notice \"" + string(rune('A'+i)) + "=no\"\n.endif\n")
	}
	file := filepath.Join(t.TempDir(), "cond.cfg")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", "-f", file)
	cmd.Env = []string{"STAGING=1", "REGION=eu"}
	out, _ := cmd.CombinedOutput()
	for i, tt := range conditionCases {
		want := string(rune('A'+i)) + "=" + map[bool]string{true: "yes", false: "no"}[tt.want]
		if !strings.Contains(string(out), "'"+want+"'") {
			t.Errorf(".if %s: haproxy -c does not say %s:\n%s", tt.cond, want, out)
		}
	}
}

// The lines of the branch taken are the configuration; the others are
// not read (an unset variable in them included), and the .if's Warning
// and comment say which branch the translation holds.
func TestConditionalBlocks(t *testing.T) {
	text := "global\n.if defined(STAGING)\n\t.notice \"staging\"\n.endif\n" +
		"defaults\n\tmode http\nfrontend f\n\tbind :80\n" +
		".if !defined(STAGING)\n\tbind :443 ssl crt \"${NOPE}\"\n.elif streq(\"${REGION}\",eu)\n\thttp-request set-header X-Env staging\n.else\n\tbogus line\n.endif\n" +
		"\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	cfg, err := Parse(strings.NewReader(text), "k.cfg", condEnv)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"request_header X-Env staging",
		"# k.cfg:9: .if !defined(STAGING)  (approximated: the translation holds one branch of this .if (to line 15), the one the environment it was adapted with takes: the .elif at line 11;",
		"# k.cfg:10: bind :443 ssl crt \"${NOPE}\"  (ignored: in a branch of the .if at line 9 not taken: not read)",
		"# k.cfg:14: bogus line  (ignored:",
		"# k.cfg:3: .notice \"staging\"  (ignored: a message HAProxy prints",
	} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("no %q in:\n%s", want, tr.Caddyfile)
		}
	}
	if strings.Contains(tr.Caddyfile, ":443") && !strings.Contains(tr.Caddyfile, "# k.cfg:10:") {
		t.Errorf("the branch not taken is translated:\n%s", tr.Caddyfile)
	}
	var ifWarnings int
	for _, w := range tr.Warnings {
		if strings.Contains(w.Msg, "the translation holds one branch") {
			ifWarnings++
		}
	}
	if ifWarnings != 2 {
		t.Errorf("warnings %v: want one for each .if", tr.Warnings)
	}
}

// A block HAProxy refuses, or an .alert in a branch taken, is refused at
// its line; nothing of a branch not taken is evaluated.
func TestConditionalBlocksRefused(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"global\n.if 1\n", "k.cfg:2: .if 1: no .endif closes it"},
		{"global\n.endif\n", "k.cfg:2: .endif: .endif without a .if"},
		{"global\n.if 1\n.else\n.elif 1\n.endif\n", "k.cfg:4: .elif 1: .elif after the .else of the .if at line 2"},
		{"global\n.if 1\n.alert \"no\"\n.endif\n", "k.cfg:3: .alert no: HAProxy stops reading the configuration here"},
		{"global\n.if feature(OPENSSL)\n.endif\n", "k.cfg:2: .if feature(OPENSSL): feature() asks how the running HAProxy was built"},
		{"global\n.if 0\n.alert \"no\"\n.if feature(OPENSSL)\n.endif\n.endif\n", ""},
		{"global\n.if 1\n.else x\n.endif\n", "k.cfg:3: .else x: .else takes no argument"},
		{"global\n.if 1\n.endif x\n", "k.cfg:3: .endif x: .endif takes no argument"},
		{"global\n.foo\n", "k.cfg:2: .foo: not a directive HAProxy 2.6 knows"},
	} {
		_, err := Parse(strings.NewReader(tt.text), "k.cfg", condEnv)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
			t.Errorf("%q: %v, want %s", tt.text, err, tt.want)
		}
	}
}

// A mixed file's split keeps its conditional blocks' outcome: the HTTP
// part's translation warns at each .if, and the residual HAProxy
// configuration says that it holds the branch taken.
func TestConditionalBlocksSplit(t *testing.T) {
	text := "defaults\n\tmode http\n\ttimeout client 5s\n\ttimeout server 5s\n\ttimeout connect 1s\n" +
		"frontend web\n\tbind :80\n\tdefault_backend app\nbackend app\n\tserver a 10.0.0.1:80\n" +
		"listen db\n\tmode tcp\n.if defined(STAGING)\n\tbind :5433\n.else\n\tbind :5432\n.endif\n\tserver pg 10.0.0.2:5432\n"
	cfg, err := Parse(strings.NewReader(text), "k.cfg", condEnv)
	if err != nil {
		t.Fatal(err)
	}
	sp := cfg.SplitTCP()
	tr, err := Translate(sp.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tr.Warnings, func(w Warning) bool {
		return w.Pos.Line == 13 && strings.Contains(w.Msg, "the translation holds one branch of this .if")
	}) {
		t.Errorf("warnings %v: want the .if's", tr.Warnings)
	}
	residual := sp.TCP.HAProxyText("")
	for _, want := range []string{"# k.cfg:13: .if defined(STAGING): read with the environment that split the file; only the branch it took is here\n", "bind :5433  # k.cfg:14"} {
		if !strings.Contains(residual, want) {
			t.Errorf("no %q in the residual:\n%s", want, residual)
		}
	}
	if strings.Contains(residual, "bind :5432") {
		t.Errorf("the branch not taken is in the residual:\n%s", residual)
	}
}
