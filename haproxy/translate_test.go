package haproxy

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden Caddyfiles and docs/haproxy.md's keyword tables")

// caddyfileOf is the Caddyfile Translate makes of cfg.
func caddyfileOf(cfg *Config) (string, error) {
	tr, err := Translate(cfg)
	return tr.Caddyfile, err
}

// Each configuration in testdata (the seed's, and one per feature)
// becomes the Caddyfile beside it, every line of it kept as a comment (go
// test -update rewrites the golden files).
func TestTranslateGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.cfg")
	if err != nil || len(files) < 2 {
		t.Fatalf("%v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkGolden(t, f) })
	}
}

func checkGolden(t *testing.T, file string) {
	cfg, err := ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := caddyfileOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	golden := strings.TrimSuffix(file, ".cfg") + ".Caddyfile"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the translation differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	for _, s := range cfg.Sections {
		if !strings.Contains(got, "# "+s.Pos.String()+": "+commentText(s.line().source())) {
			t.Errorf("section %s %s at %s is not kept as a comment", s.Kind, s.Name, s.Pos)
		}
		for _, l := range s.Lines {
			if !strings.Contains(got, "# "+l.Pos.String()+": "+commentText(l.source())) {
				t.Errorf("line %s is not kept as a comment", l.Pos)
			}
		}
	}
}

// Every keyword is translated, ignored for a reason, or refused with the
// file, the line and the keyword.
func TestTranslateRefuses(t *testing.T) {
	seed, err := os.ReadFile("testdata/seed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"    mode http", "    mode tcp", "h.cfg:3: mode tcp: only mode http"},
		{"    default_backend nodepilot_active", "    default_backend nodepilot_active\n    backlog 100", "h.cfg:15: backlog 100: not translated yet"},
		{"alpn http/1.1\n    http-request del-header Forwarded", "alpn http/1.1 npn x\n    http-request del-header Forwarded", `h.cfg:8: bind *:443: bind option "npn"`},
		{"alpn http/1.1\n    http-request del-header Forwarded", "alpn http/1.1 transparent\n    http-request del-header Forwarded", `h.cfg:8: bind *:443: transparent: Caddy's listeners bind only an address the host has; for a virtual address that keepalived moves, set the sysctl net.ipv4.ip_nonlocal_bind=1`},
		{"check-sni nodepilot.internal.example verifyhost nodepilot.internal.example\n    server node-b", "check-sni other.example verifyhost nodepilot.internal.example\n    server node-b",
			"h.cfg:24: server node-a: sni, check-sni and verifyhost name nodepilot.internal.example and other.example"},
		{"http-check expect status 200", "http-check expect status 204", "h.cfg:19: http-check expect: the leader answers 200"},
		{"inter 5s", "inter 5x", `h.cfg:20: default-server inter: "5x": unit "x"`},
		{"http-request set-header X-Forwarded-Proto https", "http-request set-header X-Client %[src,lower]", "h.cfg:13: http-request set-header: converter lower in %[src,lower]: Caddy's placeholders have no case conversion"},
		{"http-request set-header X-Forwarded-Proto https", "http-request set-header X-Key %[ssl_fc_session_key]", "h.cfg:13: http-request set-header: log-format sample ssl_fc_session_key is not translated"},
		{"http-request set-header X-Forwarded-Proto https", "http-request set-header X-Id %ID", "h.cfg:13: http-request set-header: log-format sample %ID: the unique ID"},
		{"http-request set-header X-Forwarded-Proto https", "http-request set-header X-Backend %b", "h.cfg:13: http-request set-header: log-format sample %b is not translated"},
		{"http-request set-header X-Forwarded-Proto https", "http-request set-header X-Pct 50%", "h.cfg:13: http-request set-header: a % that begins no log-format variable or sample: write %% for a %"},
	} {
		text := strings.Replace(string(seed), tt.from, tt.to, 1)
		if text == string(seed) {
			t.Fatalf("%q is not in the seed", tt.from)
		}
		cfg, err := Parse(strings.NewReader(text), "h.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %s", tt.to, err, tt.want)
		}
	}
	cfg, _ := Parse(strings.NewReader("global\n\tdaemon\n\ttune.maxrewrite 1024\n"), "g.cfg", lookup)
	if _, err := caddyfileOf(cfg); err == nil || !strings.Contains(err.Error(), "g.cfg:3: tune.maxrewrite 1024: not translated yet in the global section") {
		t.Errorf("global: %v", err)
	}
}

// HAProxy's times: milliseconds without a unit, days as hours.
func TestDuration(t *testing.T) {
	for in, want := range map[string]string{"60s": "60s", "500": "500ms", "2m": "2m", "1d": "24h", "100us": "100us"} {
		if got, err := duration(in, Position{}); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "s", "1.5s", "-1s"} {
		if _, err := duration(bad, Position{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// What acl, use_backend, the answering rules and backends without checks
// do not translate is refused with its line.
func TestTranslateRefusesRules(t *testing.T) {
	base, err := os.ReadFile("testdata/answer.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"acl health path /health", "acl health base /health", "a.cfg:13: acl health: ACL fetch base is not translated yet"},
		{"acl health path /health", "acl health path -m len 5", "a.cfg:13: acl health: ACL match method len is not translated"},
		{"acl health path /health", "acl health path -f /etc/haproxy/paths.lst", "a.cfg:13: acl health: -f /etc/haproxy/paths.lst: stat /etc/haproxy/paths.lst: no such file or directory (HAProxy refuses a pattern file it cannot read too)"},
		{"acl health path /health", "acl health req.hdr(X-Key) -m found yes", "a.cfg:13: acl health: -m found takes no value"},
		{"acl health path /health", "acl health hdr(X-Key,2) x", "a.cfg:13: acl health: ACL fetch hdr(X-Key,2) is not translated yet"},
		{"acl health path /health", "acl health hdr_reg(host) (a", "a.cfg:13: acl health: (a: not a regular expression Go's RE2 reads"},
		{"if health", "if healthy", "a.cfg:16: http-request return: ACL healthy is not defined before this line"},
		{"deny_status 429", "deny_status 99", "a.cfg:15: http-request deny: status 99"},
		{"code 301", "code 305", "a.cfg:18: http-request redirect: code 305"},
		{"redirect scheme https code 308", "redirect scheme https keep-query", "a.cfg:21: redirect scheme: redirect option keep-query: HAProxy takes code"},
		{"redirect scheme https code 308", "http-request redirect location %[hdr(x-to)] ignore-empty", "a.cfg:21: http-request redirect: ignore-empty with a sample in the location"},
		{"status 204 if", "status 204 lf-file /x if", "a.cfg:17: http-request return: http-request return lf-file is not translated yet"},
		{"server app1 127.0.0.1:9001", "server app1 127.0.0.1:9001 weight 300", "a.cfg:29: server app1: weight takes a whole number from 0 to 256"},
		{"server app1 127.0.0.1:9001", "server app1 127.0.0.1:9001\n    balance hdr(X-A) if", "a.cfg:30: balance hdr(X-A): takes roundrobin"},
		{"server app1 127.0.0.1:9001", "server app1 127.0.0.1:9001\n    balance random(x)", "a.cfg:30: balance random(x): random(<draws>) takes a whole number"},
		{"default_backend app", "use_backend app extra\n    default_backend app", "a.cfg:24: use_backend app: takes a backend's name and, maybe, an if or unless condition"},
		{"http-request deny if blocked", "http-request track-sc0 src", "a.cfg:14: http-request track-sc0: no stick-table in this frontend"},
		{"http-request deny if blocked", "stick-table type integer store http_req_rate(10s)", "a.cfg:14: stick-table type: type integer: only ip and ipv6 tables (of client addresses) and string tables"},
		{"http-request deny if blocked", "stick-table type ip store gpc0", "a.cfg:14: stick-table type: store gpc0: only http_req_rate"},
		{"http-request deny if blocked", "stick-table type ip store http_req_rate(10s)\n    http-request track-sc0 src\n    http-request deny if { sc_http_req_rate(0) gt 5 }",
			"a.cfg:16: http-request deny: a rate limit's deny must be deny_status 429"},
		{"http-request deny if blocked", "http-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }", "a.cfg:14: http-request deny: sc_http_req_rate(0) without http-request track-sc0 before it"},
		{"http-request deny if blocked", "stick-table type ip store http_req_rate(10s)\n    http-request track-sc0 src\n    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }",
			"a.cfg:16: http-request deny: edge_rate_limit answers 429 itself"},
		{"errorfile 429 testdata/429.http", "errorfile 429 testdata/none.http", "a.cfg:8: errorfile 429: stat testdata/none.http"},
	} {
		text := strings.Replace(string(base), tt.from, tt.to, 1)
		if text == string(base) {
			t.Fatalf("%q is not in answer.cfg", tt.from)
		}
		cfg, err := Parse(strings.NewReader(text), "a.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %s", tt.to, err, tt.want)
		}
	}
}

// A stats auth password is in the Caddyfile only as its bcrypt hash: the
// comment that keeps its line redacts it.
func TestStatsPasswordsAreRedacted(t *testing.T) {
	cfg, err := ParseFile("testdata/stats.cfg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := caddyfileOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"AdMiN123", "s3cret", "an0ther"} {
		if strings.Contains(got, pw) {
			t.Errorf("password %s is in the Caddyfile", pw)
		}
	}
	for _, want := range []string{"stats auth admin:<redacted>", "stats auth ops:<redacted>"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in the Caddyfile", want)
		}
	}
}

// What stats and maxconn do not translate is refused with its line.
func TestTranslateRefusesStatsAndMaxconn(t *testing.T) {
	for _, tt := range []struct{ from, to, want string }{
		{"    stats hide-version", "    stats admin if TRUE", "s.cfg:15: stats admin: HAProxy does not take stats admin in a defaults section"},
		{"    stats hide-version", "    stats scope .", "s.cfg:15: stats scope: ha_status shows the whole process"},
		{"    stats hide-version", "    stats http-request deny", "s.cfg:15: stats http-request: HAProxy does not take stats http-request in a defaults section"},
		{"    stats hide-version", "    stats bind-process all", "s.cfg:15: stats bind-process: HAProxy does not take stats bind-process in a defaults section"},
		{"stats uri /admin?stats", "stats uri admin", "s.cfg:10: stats uri: a uri that does not begin with /"},
		{"stats uri /admin?stats", "stats uri /{x}", "s.cfg:10: stats uri: a uri with braces"},
		{"stats auth admin:AdMiN123", "stats auth admin", "s.cfg:12: stats auth: takes <user>:<password>"},
		{"stats auth admin:AdMiN123", "stats auth :x", "s.cfg:12: stats auth: an empty user or password"},
		{"stats auth admin:AdMiN123", "stats auth admin:" + strings.Repeat("x", 72), "s.cfg:12: stats auth: a password longer than 71 bytes"},
		{"stats realm HAProxy\\ Statistics", "stats realm a\\\"b", "s.cfg:11: stats realm: a realm that is empty or has a quote"},
		{"stats refresh 1500ms", "stats refresh 5x", `s.cfg:14: stats refresh: "5x": unit "x"`},
		{"    stats show-legends", "    stats admin", "s.cfg:30: stats admin: takes if or unless and a condition"},
		{"    bind 127.0.0.1:8404", "    bind 127.0.0.1:8404\n    server s 127.0.0.1:1\n    default_backend app", "s.cfg:26: listen stats has servers and a default_backend"},
		{"listen stats", "listen stats 127.0.0.1:8405", "s.cfg:26: listen stats: an address after the name"},
		{"    bind 127.0.0.1:8080", "    bind 127.0.0.1:8080\n    stats uri /web?stats", "s.cfg:9: stats enable: backend app takes this stats page from its defaults, which frontend web does not serve"},
		{"frontend web", "defaults more from base\n    stats enable\nfrontend web from more", `stats lines in defaults more and in the defaults it takes from`},
	} {
		text := strings.Replace(string(mustRead(t, "testdata/stats.cfg")), tt.from, tt.to, 1)
		cfg, err := Parse(strings.NewReader(text), "s.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %s", tt.to, err, tt.want)
		}
	}
	for _, tt := range []struct{ from, to, want string }{
		{"    maxconn 100", "    maxconn 0", "m.cfg:4: maxconn 0: takes a whole number of at least 1"},
		{"    maxconn 2", "    maxconn -2", "m.cfg:17: maxconn -2: takes a whole number"},
		{"server app2 127.0.0.1:9002 maxconn 3", "server app2 127.0.0.1:9002 maxconn 4", `m.cfg:30: server app2: maxconn "4", where app1 has "3"`},
		{"server app2 127.0.0.1:9002 maxconn 3", "server app2 127.0.0.1:9002 maxconn x", "m.cfg:30: server app2: maxconn takes a whole number"},
		{"    default-server maxconn 3", "    http-reuse never\n    default-server maxconn 3", "m.cfg:29: default-server maxconn: maxconn with http-reuse never is not translated"},
		{"    default_backend static", "    default_backend app", "m.cfg:22: default_backend app: backend app, whose servers have a maxconn, is sent to at line 18 too"},
		{"    default-server maxconn 3", "    default-server maxconn 3 alpn h2", "m.cfg:28: default-server maxconn: maxconn over HTTP/2 is not translated"},
	} {
		text := strings.Replace(string(mustRead(t, "testdata/maxconn.cfg")), tt.from, tt.to, 1)
		cfg, err := Parse(strings.NewReader(text), "m.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %s", tt.to, err, tt.want)
		}
	}
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// What of conn_cur is not translated is refused with its line and why.
func TestTranslateRefusesConnCur(t *testing.T) {
	base, err := os.ReadFile("testdata/inflight.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{"store http_req_rate(10s),conn_cur", "store http_req_rate(10s),conn_rate(15ms),conn_cur", "i.cfg:11: stick-table type: store conn_rate(15ms): a sliding window of whole tens of milliseconds"},
		{"store http_req_rate(10s),conn_cur", "store conn_rate,conn_cur", "i.cfg:11: stick-table type: store conn_rate: only http_req_rate(<period>), conn_rate(<period>) and conn_cur are translated"},
		{"store http_req_rate(10s),conn_cur", "store conn_cur,conn_rate(10s)", "i.cfg:13: http-request deny: the stick-table at line 11 does not store http_req_rate"},
		{"sc_conn_cur(0) gt 20", "sc_conn_rate(0) gt 20", "i.cfg:14: http-request deny: the stick-table at line 11 does not store conn_rate"},
		{"conn_cur\n    http-request track-sc0 src", "conn_rate(1m),conn_cur\n    http-request track-sc0 src\n    http-request deny deny_status 429 if { sc0_conn_rate gt 20 }", "i.cfg:14: http-request deny: a second deny over counter 0"},
		{"size 100k ", "", "i.cfg:11: stick-table type: no size: HAProxy refuses it too"},
		{"size 100k", "size 0", "i.cfg:11: stick-table type: size 0: a count of entries (with k, m or g) from 1 to 2^31-1"},
		{"size 100k", "size 3g", "i.cfg:11: stick-table type: size 3g: a count of entries"},
		{"store http_req_rate(10s),conn_cur", "store http_req_rate(10s)", "i.cfg:14: http-request deny: the stick-table at line 11 does not store conn_cur"},
		{"store http_req_rate(10s),conn_cur", "store conn_cur", "i.cfg:13: http-request deny: the stick-table at line 11 does not store http_req_rate"},
		{"track-sc0 src", "track-sc0 src if { path_beg /api }", "i.cfg:14: http-request deny: conn_cur of a track rule with a condition (line 12)"},
		{"sc_conn_cur(0) gt 20", "sc_conn_cur(1) gt 20", "i.cfg:14: http-request deny: sc_conn_cur(1) without http-request track-sc1 before it"},
		{"sc_conn_cur(0) gt 20", "sc0_conn_cur ge 1", "i.cfg:14: http-request deny: the count includes the request itself, so this denies every request"},
		{"    default_backend app", "    http-request deny if { sc0_conn_cur gt 5 }\n    default_backend app", "i.cfg:15: http-request deny: a second deny over counter 0's conn_cur (line 14)"},
		{"type ip size 100k expire 30s store http_req_rate(10s),conn_cur\n    http-request track-sc0 src", "type string size 100k expire 30s store http_req_rate(10s),conn_cur\n    http-request track-sc0 req.hdr(X-Key)",
			"i.cfg:14: http-request deny: conn_cur of a header's value: in_flight counts each client address"},
		{"http-request track-sc0 src", "tcp-request connection track-sc0 src", "i.cfg:12: tcp-request connection: tracked here, a table counts the client's open connections"},
		{"sc_conn_cur(0) gt 20", "src_conn_cur gt 20", "i.cfg:14: http-request deny: ACL fetch src_conn_cur is not translated"},
	} {
		text := strings.Replace(string(base), tt.from, tt.to, 1)
		if text == string(base) {
			t.Fatalf("%q is not in inflight.cfg", tt.from)
		}
		cfg, err := Parse(strings.NewReader(text), "i.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %s", tt.to, err, tt.want)
		}
	}
}

// track-sc<n> req.hdr(<name>,-1) tracks what req.hdr(<name>) does, the
// header's last value (HAProxy 2.6): the same edge_rate_limit.
func TestTranslateTrackLastOccurrence(t *testing.T) {
	base, err := os.ReadFile("testdata/ratelimit-key.cfg")
	if err != nil {
		t.Fatal(err)
	}
	translate := func(text string) (string, error) {
		cfg, err := Parse(strings.NewReader(text), "r.cfg", lookup)
		if err != nil {
			return "", err
		}
		return caddyfileOf(cfg)
	}
	want, err := translate(string(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, fetch := range []string{"req.hdr(X-API-Key,-1)", "hdr(X-API-Key,-1)"} {
		got, err := translate(strings.Replace(string(base), "req.hdr(X-API-Key)", fetch, 1))
		if err != nil {
			t.Fatal(err)
		}
		if got != strings.ReplaceAll(want, "req.hdr(X-API-Key)", fetch) {
			t.Errorf("track %s translates otherwise than req.hdr(X-API-Key):\n%s", fetch, got)
		}
	}
}
