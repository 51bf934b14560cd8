package haproxy

import (
	"strings"
	"testing"
)

// translateK parses and translates a configuration named k.cfg.
func translateK(t *testing.T, text string) (string, error) {
	t.Helper()
	cfg, err := Parse(strings.NewReader(text), "k.cfg", lookup)
	if err != nil {
		return "", err
	}
	return caddyfileOf(cfg)
}

// checkOutcome wants err to begin with want, or, for want "", the
// translation to hold each of has.
func checkOutcome(t *testing.T, text, out string, err error, want string, has ...string) {
	t.Helper()
	switch {
	case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
		t.Errorf("%q: error %v, want %s…", text, err, want)
	case want == "" && err != nil:
		t.Errorf("%q: %v", text, err)
	case want == "":
		for _, h := range has {
			if !strings.Contains(out, h) {
				t.Errorf("%q: the translation lacks %q:\n%s", text, h, out)
			}
		}
	}
}

// The binds' TLS defaults of the global section become each TLS site's
// tls block where Go honours them. Cipher lists become Go's nearest secure
// set, with a warning naming each suite left out (a DHE suite, a suite Go
// has only among its insecure ones, an OpenSSL keyword) or TLS 1.3 suite
// Go offers anyway; TLS below 1.2 is refused at its line; session tickets
// off with TLS 1.2 on are in the adapter's JSON. Without a bind with ssl they are ignored,
// whatever they say.
func TestTLSDefaults(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :443 ssl crt /etc/site.pem\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	plain := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	const suites13 = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
	for _, tt := range []struct {
		global, rest, want string
		has                []string
	}{
		{"ssl-default-bind-options ssl-min-ver TLSv1.2\n", site, "", []string{"\ttls /etc/site.pem /etc/site.pem {\n\t\tprotocols tls1.2\n\t}\n"}},
		{"ssl-default-bind-options ssl-min-ver TLSv1.3\n", site, "", []string{"\t\tprotocols tls1.3\n"}},
		{"ssl-default-bind-options ssl-max-ver TLSv1.2\n", site, "", []string{"\t\tprotocols tls1.2 tls1.2\n"}},
		{"ssl-default-bind-options no-tlsv13\n", site, "", []string{"\t\tprotocols tls1.2 tls1.2\n"}},
		{"ssl-default-bind-options force-tlsv13 no-tls-tickets\n", site, "", []string{"\t\tprotocols tls1.3\n", "no-tls-tickets ignored: HAProxy's applies up to TLS 1.2"}},
		{"ssl-default-bind-options no-sslv3 no-tlsv10 no-tlsv11\n", site, "", []string{"\t\tprotocols tls1.2\n"}},
		{"ssl-default-bind-ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-SHA\n", site, "",
			[]string{"\ttls /etc/site.pem /etc/site.pem {\n\t\tciphers TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA\n\t}\n"}},
		{"ssl-default-bind-ciphersuites TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384\n", site, "",
			[]string{"\ttls /etc/site.pem /etc/site.pem\n", "ignored: Go's TLS 1.3 suites are these three"}},
		{"ssl-default-bind-options no-tlsv13\n\tssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256\n", site, "", []string{"ignored: TLS 1.3 is off"}},
		{"ssl-default-bind-options ssl-min-ver TLSv1.3\n\tssl-default-bind-ciphers DHE-RSA-AES128-GCM-SHA256\n", site, "", []string{"ignored: TLS 1.2 is off"}},
		{"tune.ssl.default-dh-param 2048\n", site, "", []string{"ignored: Go's TLS has no finite-field Diffie-Hellman"}},
		{"ssl-default-bind-ciphers DHE-RSA-AES128-GCM-SHA256\n\tssl-default-bind-options ssl-min-ver TLSv1.0 no-tls-tickets\n", plain, "",
			[]string{"ignored: no bind has ssl, so no site takes it"}},
		// Go's nearest secure set, each left out suite named in a warning
		// (issue 28).
		{"ssl-default-bind-ciphers ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256\n", site, "",
			[]string{"\t\tciphers TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n", "approximated: ciphers, by Go's names; Go orders them itself, AES-GCM first where both ends have AES hardware; Go's nearest secure set, without DHE-RSA-AES128-GCM-SHA256 (Go's TLS has no finite-field Diffie-Hellman"}},
		{"ssl-default-bind-ciphers AES128-GCM-SHA256\n", site, "", []string{"\ttls /etc/site.pem /etc/site.pem\n", "without AES128-GCM-SHA256 (Go has it only among its insecure suites)"}},
		{"ssl-default-bind-ciphers HIGH:!aNULL:!MD5\n", site, "", []string{"approximated: Go's own secure TLS 1.2 suites (no ciphers line)", "without HIGH (an OpenSSL keyword or operator); !aNULL (an OpenSSL keyword or operator)"}},
		{"ssl-default-bind-ciphers ECDHE-ECDSA-AES256-SHA384\n", site, "", []string{"without ECDHE-ECDSA-AES256-SHA384 (no suite of Go's TLS 1.2 has that OpenSSL name)"}},
		{"ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384\n", site, "",
			[]string{"approximated: Go's TLS 1.3 suites, always all three in Go's order: TLS_CHACHA20_POLY1305_SHA256, left out, is offered"}},
		{"ssl-default-bind-ciphersuites " + suites13 + ":TLS_AES_128_CCM_SHA256\n", site, "", []string{"TLS_AES_128_CCM_SHA256 is not one of Go's"}},
		{"ssl-default-bind-options ssl-min-ver TLSv1.1\n", site, "k.cfg:2: ssl-default-bind-options: TLSv1.1 is on: Caddy speaks TLS 1.2 and 1.3 only", nil},
		{"ssl-default-bind-options ssl-min-ver TLSv1.4\n", site, "k.cfg:2: ssl-default-bind-options: ssl-min-ver takes one of", nil},
		{"ssl-default-bind-options no-tlsv12 no-tlsv13\n", site, "k.cfg:2: ssl-default-bind-options: no TLS version is left on", nil},
		// Session tickets off in the adapter's JSON, which the Caddyfile
		// says at its top (issue 28).
		{"ssl-default-bind-options no-tls-tickets\n", site, "", []string{"\ttls /etc/site.pem /etc/site.pem\n", "# tickets off in its JSON (apps.tls.session_tickets.disabled), as line 2's no-tls-tickets asks",
			"approximated: no-tls-tickets: session tickets off in the JSON caddy adapt --adapter haproxy makes"}},
		{"ssl-default-bind-options strict-sni\n", site, "k.cfg:2: ssl-default-bind-options: strict-sni is not translated yet", nil},
	} {
		text := "global\n\t" + tt.global + tt.rest
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// ca-base and crt-base: a relative ca-file or crt resolves against them,
// an absolute one is as written, as in HAProxy.
func TestTLSBases(t *testing.T) {
	text := "global\n\tcrt-base /etc/haproxy/certs\n\tca-base /etc/ssl/certs\n" +
		"defaults\n\tmode http\nfrontend f\n\tbind :443 ssl crt site.pem\n\tbind :8443 ssl crt site.pem\n\tdefault_backend b\n" +
		"backend b\n\tserver s 10.0.0.1:443 ssl ca-file ca.pem verifyhost s.internal\n" +
		"frontend g\n\tbind :4443 ssl crt /abs/other.pem\n\tdefault_backend c\n" +
		"backend c\n\tserver s 10.0.0.2:443 ssl ca-file /abs/ca.pem verifyhost s.internal\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "\ttls /etc/haproxy/certs/site.pem /etc/haproxy/certs/site.pem\n", "tls_trust_pool file /etc/ssl/certs/ca.pem\n",
		"\ttls /abs/other.pem /abs/other.pem\n", "tls_trust_pool file /abs/ca.pem\n", "(crt site.pem is /etc/haproxy/certs/site.pem)")
}

// The global section's log lines become Caddy's loggers, where Caddy can
// write what HAProxy did; the others are refused at their line.
func TestLogTargets(t *testing.T) {
	rest := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tlog global\n\toption httplog\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		log, want string
		has       []string
	}{
		{"log /dev/log local0", "", []string{"\tlog {\n\t\toutput net unixgram//dev/log {\n\t\t\tsoft_start\n\t\t}\n\t\tformat syslog {\n\t\t\tfacility local0\n\t\t\ttag haproxy\n\t\t}\n\t}\n", "\tlog\n"}},
		{"log unix@/run/syslog local7 info", "", []string{"output net unixgram//run/syslog {", "facility local7", "level INFO\n"}},
		{"log 10.0.0.5 local2 err", "", []string{"output net udp/10.0.0.5:514 {", "level ERROR\n"}},
		{"log udp@logs.example:1514 local2 debug", "", []string{"output net udp/logs.example:1514 {", "level DEBUG\n"}},
		{"log stdout format raw local0", "", []string{"\tlog {\n\t\toutput stdout\n\t}\n"}},
		{"log fd@2 format short daemon alert", "", []string{"\tlog {\n\t\toutput stderr\n\t\tformat journald\n\t\tlevel PANIC\n\t}\n"}},
		{"log stderr format local user emerg", "", []string{"output stderr\n\t\tformat syslog {\n\t\t\tfacility user\n", "level FATAL\n"}},
		{"log ring@buf local0", "k.cfg:2: log ring@buf: ring@buf: only a Unix datagram socket, UDP syslog, stdout and stderr", nil},
		{"log fd@3 local0", "k.cfg:2: log fd@3: fd@3: only a Unix datagram socket", nil},
		{"log tcp@10.0.0.5:514 local0", "k.cfg:2: log tcp@10.0.0.5:514: tcp@10.0.0.5:514: only a Unix datagram socket", nil},
		{"log ::1:514 local0", "k.cfg:2: log ::1:514: ::1:514: an IPv6 syslog address is not translated yet", nil},
		{"log dev/log local0", "k.cfg:2: log dev/log: dev/log: want host[:port]", nil},
		{"log /dev/log", "k.cfg:2: log /dev/log: takes an address and a facility", nil},
		{"log /dev/log local9", "k.cfg:2: log /dev/log: \"local9\" is not a facility", nil},
		{"log /dev/log local0 crit", "k.cfg:2: log /dev/log: level crit: Caddy has no level between error and panic", nil},
		{"log /dev/log local0 info notice", "k.cfg:2: log /dev/log: a minimum level (notice) is not translated yet", nil},
		{"log /dev/log format rfc5424 local0", "k.cfg:2: log /dev/log: format rfc5424 is not translated yet", nil},
		{"log /dev/log sample 1:2 local0", "k.cfg:2: log /dev/log: sample is not translated", nil},
		{"log /dev/log len 10 local0", "k.cfg:2: log /dev/log: len 10: HAProxy takes 80 to 65535", nil},
	} {
		text := "global\n\t" + tt.log + "\n" + rest
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// A proxy's logging lines: log global (with a global log line) is the
// site's log directive; without one, or after no log, nothing logs, in
// HAProxy as in Caddy; a frontend's own log address is a logger of its
// site's access log alone (with log global, the first global line's
// copy too, which Caddy's default logger would not get); option httplog
// clf is refused; in a backend they are notes.
func TestProxyLogLines(t *testing.T) {
	be := "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		text, want string
		has        []string
	}{
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tlog global\n" + be, "", []string{"the global section has no log line: HAProxy logs this frontend's traffic nowhere"}},
		{"global\n\tlog /dev/log local0\ndefaults\n\tmode http\nfrontend f\n\tbind :80\n\toption httplog\n" + be, "", []string{"no log global here: HAProxy logs no traffic of this frontend"}},
		{"global\n\tlog /dev/log local0\ndefaults\n\tmode http\n\tlog global\n\tno option dontlognull\nfrontend f\n\tbind :80\n" + be, "",
			[]string{"\tlog\n", "a connection that sends none is never logged", "Caddy's health checks log to Caddy's own log"}},
		{"global\n\tlog /dev/log local0\ndefaults\n\tmode http\nfrontend f\n\tbind :80\n\tlog 10.0.0.9 local0 notice\n" + be, "",
			[]string{"\tlog haproxy_frontend_f_7 {\n\t\tinclude http.log.access.haproxy_frontend_f\n\t\toutput net udp/10.0.0.9:514 {\n\t\t\tsoft_start\n\t\t}\n\t\tformat syslog {\n\t\t\tfacility local0\n\t\t\ttag haproxy\n\t\t}\n\t\tlevel WARN\n\t}\n",
				"\tlog haproxy_frontend_f\n"}},
		{"global\n\tlog stdout local0\n\tlog /dev/log local1\ndefaults\n\tmode http\n\tlog global\nfrontend f\n\tbind :80\n\tlog 10.0.0.9:5140 local2\n" + be, "",
			[]string{"\tlog haproxy_frontend_f_9 {\n\t\tinclude http.log.access.haproxy_frontend_f\n\t\toutput net udp/10.0.0.9:5140",
				"the global section's first log line (line 2) too, which as Caddy's default logger gets none of a site's own logger's entries\n\tlog haproxy_frontend_f_global {\n\t\tinclude http.log.access.haproxy_frontend_f\n\t\toutput stdout\n"}},
		{"global\n\tlog stdout local0\ndefaults\n\tmode http\n\tlog global\nfrontend f\n\tbind :80\n\tlog 10.0.0.9 local0\n\tno log\n" + be, "",
			[]string{"no log clears it: HAProxy logs no traffic of this frontend there, nor does Caddy"}},
		{"global\n\tlog /dev/log local0\ndefaults\n\tmode http\nfrontend f\n\tbind :80\n\tlog global\n\toption httplog clf\n" + be, "k.cfg:8: option httplog: clf", nil},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\toption dontlognull now\n" + be, "k.cfg:5: option dontlognull: takes no argument", nil},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n" + be + "\tlog 10.0.0.9 local0\n", "", []string{"ignored: a backend's own log address gets what HAProxy logs of its servers"}},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tlog 10.0.0.9 local9\n" + be, "k.cfg:5: log 10.0.0.9: \"local9\" is not a facility", nil},
		{"defaults\n\tmode http\nlisten l\n\tbind :80\n\tlog 10.0.0.9 local0\n\tserver s 10.0.0.1:80\n", "",
			[]string{"\tlog haproxy_listen_l_5 {\n", "\tlog haproxy_listen_l\n", "(the access log of listen l, to syslog over UDP at 10.0.0.9:514"}},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
		if tt.want == "" && strings.Contains(tt.has[0], "nowhere") && strings.Contains(out, "\tlog\n") {
			t.Errorf("%q: a log directive where HAProxy logs nothing:\n%s", tt.text, out)
		}
	}
}

// A defaults section no proxy takes is read (a frontend's or a backend's
// keyword with a value HAProxy takes) and kept as comments; what neither
// reads is refused at its line.
func TestUnusedDefaults(t *testing.T) {
	out, err := translateK(t, "global\n\tdaemon\ndefaults\n\tmode http\n\tbalance roundrobin\n\ttimeout connect 5000\n")
	checkOutcome(t, "", out, err, "", "# k.cfg:3: defaults  (no frontend or backend takes these defaults", "# k.cfg:5: balance roundrobin  (ignored: read, and applied to no proxy)")
	_, err = translateK(t, "defaults\n\tmode http\n\ttimeout connect 5x\n")
	checkOutcome(t, "", "", err, `k.cfg:3: timeout connect: "5x": unit "x"`)
	_, err = translateK(t, "defaults\n\tmode http\n\tfrobnicate 1\n")
	checkOutcome(t, "", "", err, "k.cfg:3: frobnicate 1: not translated yet")
	// Its rules see its own ACLs, and an undefined one is refused (it
	// panicked: the section's ACLs were looked up in no configuration).
	out, err = translateK(t, "defaults d\n\tmode http\n\tacl api path_beg /api\n\thttp-request deny if api\n")
	checkOutcome(t, "", out, err, "", "# k.cfg:4: http-request deny if api")
	_, err = translateK(t, "userlist u\n\tuser a insecure-password b\ndefaults d\n\tmode http\n\thttp-request auth unless nope\n")
	checkOutcome(t, "", "", err, "k.cfg:5: http-request auth: ACL nope is not defined before this line")
}

// Lines that change HAProxy's logs and no request (issue 28): translated
// as notes, approximated where Caddy's log differs; unique-id-header with
// unique-id-format sends Caddy's request UUID under that name, after
// every rule, as HAProxy adds its ID.
func TestLoggingOnlyLines(t *testing.T) {
	be := "\tdefault_backend b\nbackend b\n\toption log-health-checks\n\tserver s 10.0.0.1:80 check\n"
	fe := "defaults\n\tmode http\n\toption log-separate-errors\n\tlog-format \"%ci %ST\"\nfrontend f\n\tbind :80\n"
	for _, tt := range []struct {
		text, want string
		has        []string
	}{
		{fe + "\tunique-id-format %{+X}o\\ %ci:%cp\n\tunique-id-header X-Request-ID\n\thttp-request capture req.hdr(User-Agent) len 128\n\thttp-request set-log-level silent if { path /healthz }\n" + be, "",
			[]string{"\t\theader_up -Via\n", "\t\theader_up +X-Request-ID {http.request.uuid}\n",
				"(approximated: Caddy's access log writes the line of a 5xx answer at level error",
				"(approximated: Caddy's access log is its JSON entry",
				"(ignored: a sample kept for the request's log line",
				"(log_skip: Caddy writes no access line of these requests, as HAProxy logs none)\n\t@log_skip_10 expression `" + rawPath + ` == "/healthz"` + "`\n\tlog_skip @log_skip_10\n",
				"(approximated: Caddy logs each change of a server's health"}},
		{fe + "\tunique-id-header X-Request-ID\n" + be, "", []string{"(ignored: without unique-id-format HAProxy sends no ID)"}},
		{fe + "\thttp-request capture req.hdr(User-Agent)\n" + be, "k.cfg:7: http-request capture: takes <sample> len <length> or <sample> id <slot>", nil},
		{fe + "\thttp-request set-log-level loud\n" + be, "k.cfg:7: http-request set-log-level: takes a syslog level or silent", nil},
		{fe + "\thttp-request deny if { path /x }\n\thttp-request set-log-level silent\n\thttp-request set-log-level err\n" + be, "",
			[]string{"(approximated: log_skip: Caddy writes no access line of these requests, as HAProxy logs none; but a request a rule above answers", "\tlog_skip\n",
				"(approximated: Caddy logs these requests' access lines as any other's (at error for a 5xx answer, else at info), where HAProxy logs them at err)"}},
		{fe + "\tunique-id-header X Y\n" + be, "k.cfg:7: unique-id-header X: takes one argument", nil},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
		if tt.want == "" && strings.Count(out, "{http.request.uuid}") > 0 != strings.Contains(tt.text, "unique-id-format") {
			t.Errorf("%q: the request UUID sent without unique-id-format, or not with it:\n%s", tt.text, out)
		}
	}
}

// A bind's own TLS options apply over the global section's, as in
// HAProxy: its no- options add to theirs, its bounds replace theirs; the
// binds of one frontend (one site, one tls block) must agree; its
// no-tls-tickets turns Caddy's session tickets off for every site, which
// each other TLS site's bind is warned of.
func TestBindTLSOptions(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :443 ssl crt /etc/site.pem %s\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		global, bind, want string
		has                []string
	}{
		{"daemon", "no-sslv3 no-tlsv10 no-tlsv11", "", []string{"\ttls /etc/site.pem /etc/site.pem {\n\t\tprotocols tls1.2\n\t}\n"}},
		{"ssl-default-bind-options no-tlsv13", "ssl-min-ver TLSv1.2", "", []string{"\t\tprotocols tls1.2 tls1.2\n"}},
		{"ssl-default-bind-options ssl-min-ver TLSv1.2", "ssl-min-ver TLSv1.3", "", []string{"\t\tprotocols tls1.3\n"}},
		{"daemon", "ssl-min-ver TLSv1.0", "k.cfg:6: bind: TLSv1.0 is on: Caddy speaks TLS 1.2 and 1.3 only", nil},
		{"daemon", "ssl-min-ver", "k.cfg:6: bind :443: ssl-min-ver needs a value", nil},
		{"daemon", "no-tls-tickets", "", []string{"# tickets off in its JSON (apps.tls.session_tickets.disabled), as line 6's no-tls-tickets asks",
			"bind :443 ssl crt /etc/site.pem no-tls-tickets  (approximated: no-tls-tickets: session tickets off in the JSON"}},
		{"daemon", "no-tls-tickets\n\tbind :8443 ssl crt /etc/site.pem", "k.cfg:7: bind :8443: TLS options other than line 6's: one frontend is one TLS site in Caddy", nil},
	} {
		text := "global\n\t" + tt.global + "\n" + strings.Replace(site, "%s", tt.bind, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
	text := "global\n\tdaemon\n" + strings.Replace(site, "%s", "no-tls-tickets", 1) + "frontend g\n\tbind :4443 ssl crt /etc/g.pem\n\tdefault_backend b\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "bind :4443 ssl crt /etc/g.pem  (approximated: session tickets off here too: line 6's no-tls-tickets turns Caddy's off for every site")
}

// The global ssl-default-server- lines apply to the servers with ssl:
// without one they are ignored; with one, reverse_proxy's transport is Go's
// client, which takes no versions nor suites: versions other than TLS 1.2
// and 1.3 are refused, a cipher list is approximated with a warning naming
// what Go adds or lacks, tickets off is what the transport does.
func TestServerTLSDefaults(t *testing.T) {
	rest := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:443 %s\n"
	const all = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA"
	for _, tt := range []struct {
		global, server, want string
		has                  []string
	}{
		{"ssl-default-server-options ssl-min-ver TLSv1.0\n\tssl-default-server-ciphers DHE-RSA-AES128-SHA", "", "", []string{"ssl-min-ver TLSv1.0  (ignored: no server has ssl, so nothing takes it)", "DHE-RSA-AES128-SHA  (ignored: no server has ssl"}},
		{"ssl-default-server-options no-sslv3 no-tlsv10 no-tlsv11 no-tls-tickets", "ssl verify none", "",
			[]string{"no-tls-tickets  (Go's client, the transport's TLS, offers TLS 1.2 and 1.3, as these leave on; no-tls-tickets: the transport keeps no TLS session"}},
		{"ssl-default-server-options ssl-min-ver TLSv1.3", "ssl verify none", "k.cfg:2: ssl-default-server-options: the versions on for servers are TLSv1.3, where Go's client, reverse_proxy's transport (for server s, line 9), offers TLS 1.2 and 1.3", nil},
		{"ssl-default-server-options ssl-min-ver TLSv1.0", "ssl verify none", "k.cfg:2: ssl-default-server-options: the versions on for servers are TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3", nil},
		{"ssl-default-server-ciphers ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256", "ssl verify none", "",
			[]string{"(approximated: reverse_proxy's transport takes no suites: Go's client offers its own TLS 1.2 suites, also TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,", "; not DHE-RSA-AES128-GCM-SHA256 (Go's TLS has no finite-field Diffie-Hellman"}},
		{"ssl-default-server-ciphers " + all, "ssl verify none", "", []string{"(ignored: Go's client offers these suites, and no other)"}},
		{"ssl-default-server-ciphersuites TLS_AES_256_GCM_SHA384", "ssl verify none", "", []string{"(approximated: Go's TLS 1.3 suites, always all three: TLS_AES_128_GCM_SHA256, left out, is offered"}},
	} {
		text := "global\n\t" + tt.global + "\n" + strings.Replace(rest, "%s", tt.server, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}
