package haproxy

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// corpusOutcomes is what becomes of each configuration of testdata/corpus
// (configurations written for this test in the shapes public projects
// use): translated (line 0), or refused at that line with that text. A
// change of outcome, a keyword newly translated included, fails here
// until the table (and docs/haproxy.md's Corpus section) says so.
var corpusOutcomes = map[string]struct {
	line int
	want string
}{
	"balance-source.cfg":       {},
	"cookie-serverid.cfg":      {},
	"debian-site.cfg":          {},
	"grafana-prometheus.cfg":   {},
	"letsencrypt-redirect.cfg": {},
	"microservices.cfg":        {},
	"mozilla-modern.cfg":       {},
	"ratelimit-api.cfg":        {},
	"wordpress-farm.cfg":       {},
	"docker-compose.cfg":       {6, "resolvers sections are not translated yet"},
	"k8s-apiserver.cfg":        {9, "mode tcp: only mode http is translated"},
	"legacy-1.x.cfg":           {},
	"lua-auth.cfg":             {5, "lua-load /usr/share/haproxy/auth-request.lua: Lua has no counterpart in Caddy"},
	"postgres-no-mode.cfg":     {13, "frontend postgres: no mode line: HAProxy's default is mode tcp, which is not translated"},
	"mozilla-intermediate.cfg": {6, "ssl-default-bind-ciphers: DHE-RSA-AES128-GCM-SHA256: Go's TLS has no finite-field Diffie-Hellman"},
	"redis-sentinel.cfg":       {13, "mode tcp: only mode http is translated"},
	"stats-listen.cfg":         {15, "stats admin: ha_status has no admin level"},
}

// systemConfigs are the configurations Debian's haproxy package installs:
// HAProxy's own examples and the default haproxy.cfg. Their content is
// Debian's, so only the shape of the outcome is asserted, except that
// the default haproxy.cfg translates (systemTranslated). Absent, they
// are skipped, unless CADDY_HA_REQUIRE_TOOLS=1 (make test), which
// installs the package.
func systemConfigs(t *testing.T) []string {
	examples, _ := filepath.Glob("/usr/share/doc/haproxy/examples/*.cfg")
	files := examples
	if _, err := os.Stat("/etc/haproxy/haproxy.cfg"); err == nil {
		files = append(files, "/etc/haproxy/haproxy.cfg")
	}
	if len(examples) == 0 || len(files) == len(examples) {
		if os.Getenv("CADDY_HA_REQUIRE_TOOLS") == "1" {
			t.Fatalf("Debian's haproxy package's configurations are missing (examples %q, /etc/haproxy/haproxy.cfg); apt-get install haproxy", examples)
		}
		t.Logf("some of Debian's haproxy configurations are absent (found %q): apt-get install haproxy to check them", files)
	}
	return files
}

// systemTranslated are the system configurations that translate: Debian's
// default haproxy.cfg (syslog targets, a chroot, the admin socket, SSL
// bases and TLS defaults with no bind to apply to, log global, option
// httplog and dontlognull, timeouts in bare milliseconds, the errorfile
// lines of /etc/haproxy/errors, in a defaults section no proxy takes).
var systemTranslated = map[string]bool{"/etc/haproxy/haproxy.cfg": true}

// Every configuration of the corpus has the outcome the table says, and
// HAProxy's own examples and Debian's haproxy.cfg are translated or
// refused with the file, a line of it and that line's keyword; none panics.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.cfg")
	if err != nil || len(files) < 12 {
		t.Fatalf("corpus %q %v: want a dozen configurations", files, err)
	}
	for name := range corpusOutcomes {
		if !slices.Contains(files, filepath.Join("testdata/corpus", name)) {
			t.Errorf("%s is in the table but not in testdata/corpus", name)
		}
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, ok := corpusOutcomes[filepath.Base(file)]
			if !ok {
				t.Fatalf("%s has no outcome in corpusOutcomes", file)
			}
			_, err := translateFile(t, file)
			checkOutcomeShape(t, file, err)
			switch {
			case want.line == 0 && err != nil:
				t.Fatalf("refused, want it translated: %v", err)
			case want.line == 0:
			case err == nil:
				t.Fatalf("translated, want refused at line %d: %s", want.line, want.want)
			case !strings.HasPrefix(err.Error(), file+":"+strconv.Itoa(want.line)+": ") || !strings.Contains(err.Error(), want.want):
				t.Fatalf("refused with %v, want %s:%d: …%s", err, file, want.line, want.want)
			}
		})
	}
	for _, file := range systemConfigs(t) {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(file, "/"), "/", "_"), func(t *testing.T) {
			_, err := translateFile(t, file)
			checkOutcomeShape(t, file, err)
			if err != nil && systemTranslated[file] {
				t.Fatalf("refused, want it translated: %v", err)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			} else {
				t.Logf("translated")
			}
		})
	}
}

// translateFile parses and translates file; a panic fails the test with
// its stack.
func translateFile(t *testing.T, file string) (text string, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: panic: %v\n%s", file, r, debug.Stack())
		}
	}()
	cfg, err := ParseFile(file)
	if err != nil {
		return "", err
	}
	return caddyfileOf(cfg)
}

// checkOutcomeShape checks that a refusal (err not nil) begins with
// "<file>:<line>: ", that the line is a line of the file with a keyword,
// that the text names that keyword (its first word, or "global
// <keyword>"), and that it says why after it.
func checkOutcomeShape(t *testing.T, file string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, file+":")
	if !ok {
		t.Fatalf("refusal without its file: %v", err)
	}
	num, why, ok := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		t.Fatalf("refusal without its line: %v", err)
	}
	b, readErr := os.ReadFile(file)
	if readErr != nil {
		t.Fatal(readErr)
	}
	lines := strings.Split(string(b), "\n")
	if n < 1 || n > len(lines) {
		t.Fatalf("refusal at line %d of a file of %d lines: %v", n, len(lines), err)
	}
	fields := strings.Fields(lines[n-1])
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		t.Fatalf("refusal at line %d, which has no keyword (%q): %v", n, lines[n-1], err)
	}
	keyword := fields[0]
	words := strings.Fields(why)
	if len(words) == 0 {
		t.Fatalf("refusal without a text: %v", err)
	}
	named := 0
	switch first := strings.Trim(words[0], `":`); {
	case first == keyword:
		named = 1
	case first == "global" && len(words) > 1 && strings.TrimSuffix(words[1], ":") == keyword:
		named = 2
	default:
		t.Fatalf("refusal that does not name line %d's keyword %s: %v", n, keyword, err)
	}
	if len(words) <= named+1 {
		t.Fatalf("refusal that does not say why: %v", err)
	}
}

// A refusal's text names its line's keyword even when the mistake is in
// a value (a time, an address, a condition): Translate puts the line's
// first words before it.
func TestRefusalsNameTheKeyword(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\ttimeout client 5x\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:5: timeout client: "5x": unit "x"`},
		{"defaults\n\tmode http\nfrontend f\n\tbind nohost\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:4: bind nohost: "nohost": want host:port`},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\thttp-request deny if\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:5: http-request deny: a condition without a term`},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4\n",
			`k.cfg:7: server s: "1.2.3.4": want host:port`},
		{"frontend f\n\tbind \"*:80\n", `k.cfg:2: bind: a double quote is not closed`},
	} {
		cfg, err := Parse(strings.NewReader(tt.text), "k.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s…", tt.text, err, tt.want)
		}
	}
	// A line longer than Parse reads is refused at its own line.
	long := "global\n\tdaemon\n\tdescription " + strings.Repeat("x", maxLineBytes) + "\n"
	if _, err := Parse(strings.NewReader(long), "k.cfg", lookup); err == nil || !strings.HasPrefix(err.Error(), "k.cfg:3: ") {
		t.Errorf("a too long line: %v", err)
	}
}

// A checked backend's status: HAProxy passes any 2xx or 3xx without
// http-check expect, Caddy's active health check one status; a check
// without it, or expecting a range, is refused rather than written as a
// health_status Caddy cannot read (found by the corpus: the classic
// cookie SERVERID backend with option httpchk alone did not adapt).
func TestActiveCheckWantsOneStatus(t *testing.T) {
	base := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\toption httpchk GET /health\n%s\tserver s1 10.0.0.1:80 check\n"
	for _, tt := range []struct{ expect, want string }{
		{"", "k.cfg:7: option httpchk: without http-check expect HAProxy passes any 2xx or 3xx"},
		{"\thttp-check expect status 200-399\n", "k.cfg:8: http-check expect: status 200-399: only one status code"},
		{"\thttp-check expect status 99\n", "k.cfg:8: http-check expect: status 99: only one status code"},
		{"\thttp-check expect status 204\n", ""},
	} {
		cfg, err := Parse(strings.NewReader(strings.Replace(base, "%s", tt.expect, 1)), "k.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		out, err := caddyfileOf(cfg)
		switch {
		case tt.want == "" && (err != nil || !strings.Contains(out, "health_status 204\n")):
			t.Errorf("%q: %v\n%s", tt.expect, err, out)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want %s…", tt.expect, err, tt.want)
		}
	}
}

// Values the translation wrote as they were, and Caddy then refused with
// a line of the generated Caddyfile ("does not adapt"), or took with
// another meaning, are refused at their HAProxy line.
func TestRefusesValuesCaddyCannotTake(t *testing.T) {
	fe, be := "defaults\n\tmode http\nfrontend f\n\tbind :80\n", "\tdefault_backend b\nbackend b\n\tserver s1 10.0.0.1:80\n"
	limit := "\thttp-request track-sc0 src\n\thttp-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }\n"
	check := "\tdefault_backend b\nbackend b\n\toption httpchk GET /\n\thttp-check expect status 200\n"
	for _, tt := range []struct{ text, want string }{
		{fe + "\tacl a src nonsense\n\thttp-request deny if a\n" + be, "k.cfg:5: acl a: src nonsense: want an address or a CIDR range"},
		{fe + "\tacl a path_reg (\n\thttp-request deny if a\n" + be, "k.cfg:5: acl a: path_reg (: not a regular expression RE2 reads"},
		{"defaults\n\tmode http\nfrontend f\n\tbind :http\n" + be, `k.cfg:4: bind :http: ":http": want a port from 1 to 65535`},
		{fe + "\tdefault_backend b\nbackend b\n\tserver s1 app:8000-8001\n", `k.cfg:7: server s1: "app:8000-8001": want a port from 1 to 65535`},
		{fe + "\tdefault_backend b\nbackend b\n\tserver s1 10.0.0.1:0\n", `k.cfg:7: server s1: "10.0.0.1:0": want a port from 1 to 65535`},
		{fe + be + "frontend g\n\tbind :80\n\tdefault_backend b\n", "k.cfg:9: bind :80: :80 is bound at k.cfg:4 too"},
		{fe + "\tstick-table type ip store http_req_rate(15ms)\n" + limit + be, "k.cfg:5: stick-table type: store http_req_rate(15ms): a sliding window of whole tens of milliseconds"},
		{"defaults\n\tmode http\nfrontend api.v1\n\tbind :80\n\tstick-table type ip store http_req_rate(10s)\n" + limit + be, `k.cfg:7: http-request deny: the edge_rate_limit zone is named after the frontend, "api.v1"`},
		{fe + check + "\tserver s1 10.0.0.1:80 check fall x\n", "k.cfg:9: server s1: fall x: HAProxy wants a whole number from 1"},
		{fe + check + "\tserver s1 10.0.0.1:80 check rise 0\n", "k.cfg:9: server s1: rise 0: HAProxy wants a whole number from 1"},
		{fe + check + "\tdefault-server inter 0s\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:9: default-server inter: inter 0s: HAProxy wants a check interval above 0"},
	} {
		cfg, err := Parse(strings.NewReader(tt.text), "k.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s…", tt.text, err, tt.want)
		}
	}
}
