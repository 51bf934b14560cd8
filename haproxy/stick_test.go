package haproxy

import (
	"strings"
	"testing"
)

// stickBackend translates a frontend and a backend b whose lines from
// line 6 are lines, then two servers.
func stickBackend(t *testing.T, lines string) (Translation, error) {
	t.Helper()
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n"
	cfg, err := Parse(strings.NewReader(head+lines+"\tserver s1 10.0.0.1:80\n\tserver s2 10.0.0.2:80\n"), "s.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	return Translate(cfg)
}

// Issue 28: a string stick table learning the server's session cookie
// (1.x's appsession) is Caddy's cookie policy with a cookie of its own
// beside the server's, a warning at the store-response line; stick on
// src with an ip table is ip_hash in place of the balance, a warning at
// its line.
func TestStickTables(t *testing.T) {
	tr, err := stickBackend(t, "\tbalance leastconn\n\tstick-table type string len 52 size 1m expire 3h\n\tstick on req.cook(JSESSIONID)\n\tstick store-response res.cook(JSESSIONID)\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "lb_policy cookie JSESSIONID_SERVER {; fallback least_conn; }; lb_retries 3"; !strings.Contains(oneLine(tr.Caddyfile), want) {
		t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
	}
	if warned := warnedLines(tr, "stick store-response: Caddy keeps the client on its server with a cookie of its own, JSESSIONID_SERVER"); len(warned) != 1 || warned[0] != 10 {
		t.Errorf("warnings at lines %v, want 10: %+v", warned, tr.Warnings)
	}
	for _, want := range []string{"s.cfg:8: stick-table type string len 52 size 1m expire 3h  (see line 10: lb_policy cookie)", "s.cfg:9: stick on req.cook(JSESSIONID)  (see line 10: lb_policy cookie)"} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}

	tr, err = stickBackend(t, "\tstick-table type ip size 200k expire 30m\n\tstick on src\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "lb_policy ip_hash; lb_retries 3"; !strings.Contains(oneLine(tr.Caddyfile), want) {
		t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
	}
	if warned := warnedLines(tr, "stick on: ip_hash: Caddy picks a client's server by a hash of its address"); len(warned) != 1 || warned[0] != 8 {
		t.Errorf("warnings at lines %v, want 8: %+v", warned, tr.Warnings)
	}

}

// In a listen, a table of stick rules is its backend side's; a rate
// table stays its frontend side's.
func TestStickTablesInListen(t *testing.T) {
	for _, listen := range []string{"\tstick-table type ip size 1m\n\tstick on src\n", "\tstick-table type ip size 1m store http_req_rate(10s)\n\thttp-request track-sc0 src\n"} {
		cfg, err := Parse(strings.NewReader("defaults\n\tmode http\nlisten l\n\tbind :80\n"+listen+"\tserver s1 10.0.0.1:80\n"), "l.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		if tr, err := Translate(cfg); err != nil || strings.Contains(listen, "stick on src") != strings.Contains(tr.Caddyfile, "lb_policy ip_hash") {
			t.Errorf("a listen with %q: %v\n%s", listen, err, tr.Caddyfile)
		}
	}
}

// Other stick shapes are refused with the line and why.
func TestStickTablesRefused(t *testing.T) {
	for _, tt := range []struct{ lines, want string }{
		{"\tstick-table type string len 32 size 1m\n\tstick on req.cook(JSESSIONID)\n", "s.cfg:8: stick on: only stick on src with a table of type ip or ipv6, or a string table learning"},
		{"\tstick-table type string len 32 size 1m\n\tstick on req.cook(A)\n\tstick store-response res.cook(B)\n", "s.cfg:9: stick store-response: only stick on src"},
		{"\tstick-table type string len 32 size 1m\n\tstick on hdr(X-Session)\n\tstick store-response res.hdr(X-Session)\n", "s.cfg:8: stick on: only stick on src"},
		{"\tstick-table type ip size 1m\n\tstick on src if { path_beg /app }\n", "s.cfg:8: stick on: only stick on <sample>, without table or condition, is translated"},
		{"\tstick-table type ip size 1m peers lbpair\n\tstick on src\n", "s.cfg:7: stick-table type: peers: Caddy has no stick-table replication"},
		{"\tstick-table type integer size 1m\n\tstick on src\n", "s.cfg:7: stick-table type: type integer: only a table of client addresses"},
		{"\tstick on src\n", "s.cfg:7: stick on: no stick-table in this backend before it"},
		{"\tstick-table type ip size 1m\n", "s.cfg:7: stick-table type: a backend's stick-table without stick rules is not translated"},
		{"\tcookie SRV insert\n\tstick-table type string len 32 size 1m\n\tstick match cook(S)\n\tstick store-response res.cook(S)\n", "s.cfg:10: stick store-response: stickiness by both a cookie line and a stick table is not translated"},
	} {
		if _, err := stickBackend(t, tt.lines); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.lines, err, tt.want)
		}
	}
}

// Issue 28: cookie <name> prefix and rewrite are Caddy's cookie policy
// with a cookie of its own, <name>_SERVER, beside the server's (which
// passes unchanged, never stripped), a warning at the line; nocache as
// insert's; indirect is insert's only.
func TestCookiePrefix(t *testing.T) {
	tr, err := stickBackend(t, "\tcookie AUTH_SESSION_ID prefix nocache\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "lb_policy cookie AUTH_SESSION_ID_SERVER {; fallback round_robin; }; header_down Cache-Control private; lb_retries 3"; !strings.Contains(oneLine(tr.Caddyfile), want) {
		t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
	}
	if strings.Contains(tr.Caddyfile, "header_up Cookie") {
		t.Errorf("the server's cookie is changed:\n%s", tr.Caddyfile)
	}
	if warned := warnedLines(tr, "cookie AUTH_SESSION_ID: Caddy keeps the client on its server with a cookie of its own, AUTH_SESSION_ID_SERVER"); len(warned) != 1 || warned[0] != 7 {
		t.Errorf("warnings at lines %v, want 7: %+v", warned, tr.Warnings)
	}
	tr, err = stickBackend(t, "\tcookie JSESSIONID rewrite\n")
	if err != nil || !strings.Contains(oneLine(tr.Caddyfile), "lb_policy cookie JSESSIONID_SERVER {; fallback round_robin; }; lb_retries 3") {
		t.Errorf("cookie rewrite: %v\n%s", err, tr.Caddyfile)
	}
	if _, err := stickBackend(t, "\tcookie JSESSIONID prefix indirect\n"); err == nil || !strings.Contains(err.Error(), "s.cfg:7: cookie JSESSIONID: cookie option indirect is not translated yet") {
		t.Errorf("cookie prefix indirect: %v", err)
	}
}
