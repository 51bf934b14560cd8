package haproxy

import (
	"strings"
	"testing"
)

// A server's TLS: HAProxy verifies the certificate by default, and needs
// a ca-file for it; with verifyhost or sni it checks that name, without
// one the chain alone, which Caddy's transport cannot (it checks a name,
// the server's address without tls_server_name): refused at the line.
func TestServerTLSVerification(t *testing.T) {
	base := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:443 "
	for _, tt := range []struct {
		opts, want string
		has        []string
	}{
		{"ssl verify required ca-file /ca.pem", "k.cfg:7: server s: verify required without verifyhost or sni: HAProxy checks the certificate's chain alone", nil},
		{"ssl ca-file /ca.pem", "k.cfg:7: server s: verify required without verifyhost or sni", nil},
		{"ssl", "k.cfg:7: server s: ssl with verify required (HAProxy's default) and no ca-file: HAProxy refuses it too", nil},
		{"ssl verify required", "k.cfg:7: server s: ssl with verify required (HAProxy's default) and no ca-file", nil},
		{"ssl verify none", "", []string{"tls_insecure_skip_verify\n"}},
		{"ssl ca-file /ca.pem verifyhost app.internal", "", []string{"tls_server_name app.internal\n", "tls_trust_pool file /ca.pem\n"}},
		{"ssl ca-file /ca.pem sni str(app.internal)", "", []string{"tls_server_name app.internal\n"}},
	} {
		text := base + tt.opts + "\n"
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
	// On a default-server line, refused there.
	text := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tdefault-server ssl ca-file /ca.pem\n\tserver s 10.0.0.1:443\n"
	_, err := translateK(t, text)
	checkOutcome(t, text, "", err, "k.cfg:7: default-server ssl: verify required without verifyhost or sni")
}

// timeout tunnel is stream_timeout, with what differs said where it is
// written; a cookie line in the leader's pool is noted, not dropped.
func TestTunnelTimeoutAndLeaderCookie(t *testing.T) {
	text := "defaults\n\tmode http\n\ttimeout tunnel 1h\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "# timeout tunnel: HAProxy closes a tunnel (a WebSocket) idle both ways that long; stream_timeout closes it that long after it began", "stream_timeout 1h\n")
	text = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tdescription caddy-ha:leader\n\tcookie SRV insert\n\tserver s 10.0.0.1:80\n"
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "", "# k.cfg:8: cookie SRV insert  (ignored: no server of the leader's pool has a cookie value", "lb_policy leader")
}

// Each crt of a bind is loaded: a tls directive per file (Caddy picks by
// SNI among them), the directories in one load; a bind with a directory
// and a file is refused (the files' certificate_selection would leave the
// directory's certificates out).
func TestBindCrts(t *testing.T) {
	dir := t.TempDir()
	site := "defaults\n\tmode http\nfrontend f\n\tbind :443 ssl %s\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		crts, want string
		has        []string
	}{
		{"crt /a.pem crt /b.pem", "", []string{"\ttls /a.pem /a.pem\n\ttls /b.pem /b.pem\n"}},
		{"crt " + dir + " crt " + dir, "", []string{"\ttls {\n\t\tload " + dir + " " + dir + "\n\t}\n"}},
		{"crt /a.pem crt " + dir, "k.cfg:4: bind :443: crt " + dir + " is a directory and /a.pem a file", nil},
		{"crt", "k.cfg:4: bind :443: crt needs a value", nil},
	} {
		text := strings.Replace(site, "%s", tt.crts, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// ssl_fc, true on a TLS connection, is a CEL term of its own, without a
// value, named or anonymous; a value or flag after it is refused.
func TestSSLFC(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tbind :443 ssl crt /a.pem\n%s\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		rules, want string
		has         []string
	}{
		{"\thttp-request redirect scheme https unless { ssl_fc }\n", "", []string{"@answer_6 expression `!({http.request.scheme} == \"https\")`",
			"(haproxy_frontend_f) {", "http://:80 {\n\timport haproxy_frontend_f\n}", "https://:443 {\n\t# k.cfg:5: bind :443 ssl crt /a.pem\n\ttls /a.pem /a.pem\n\timport haproxy_frontend_f\n}"}},
		{"\tacl tls ssl_fc\n\thttp-request deny if !tls\n", "", []string{"@answer_7 expression `!({http.request.scheme} == \"https\")`"}},
		// Issue 28: "!{" without a space, the most common line of HAProxy
		// configurations, was a parse error.
		{"\tredirect scheme https code 301 if !{ ssl_fc }\n", "", []string{"@answer_6 expression `!({http.request.scheme} == \"https\")`"}},
		{"\thttp-request deny if { ssl_fc 1 }\n", "k.cfg:6: http-request deny: ssl_fc takes no flag or value", nil},
		{"\tacl tls ssl_fc -m bool\n\thttp-request deny if tls\n", "k.cfg:6: acl tls: ssl_fc takes no flag or value", nil},
		{"\tacl other path\n\thttp-request deny if other\n", "k.cfg:6: acl other: takes a name, a fetch and at least one value", nil},
	} {
		text := strings.Replace(site, "%s", tt.rules, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// Issue 28: a port-80 frontend that only redirects to HTTPS needs no
// backend: what no rule takes is answered 503, as HAProxy answers it.
func TestRedirectOnlyFrontend(t *testing.T) {
	text := "defaults\n\tmode http\nfrontend http-in\n\tbind :80\n\tredirect scheme https code 301 if !{ ssl_fc }\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "http://:80 {", "redir @answer_5 \"https://{hostport}{uri}\" 301",
		"# no default_backend: HAProxy answers 503 to what no rule or page took\n\t\terror 503")
}

// option forwardfor header <name>: the client's address appended in that
// header (header_up +<name>), no X-Forwarded-*; a header reverse_proxy
// writes or removes itself is refused.
func TestForwardForHeader(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\t%s\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		line, want string
		has        []string
	}{
		{"option forwardfor header X-Client-IP", "", []string{"# k.cfg:5: option forwardfor header X-Client-IP  (approximated: the client's address in X-Client-IP, after any the client sent",
			"\theader_up -X-Forwarded-For\n\t\theader_up -X-Forwarded-Proto\n\t\theader_up -X-Forwarded-Host\n\t\theader_up +X-Client-IP {remote_host}\n"}},
		{"option forwardfor header x-forwarded-for", "", []string{"X-Forwarded-For as HAProxy sends it: what the client sent", "\t\ttrusted_proxies 0.0.0.0/0 ::/0\n\t\theader_up -X-Forwarded-Proto\n\t\theader_up -X-Forwarded-Host\n"}},
		{"option forwardfor header X-Forwarded-Proto", "k.cfg:5: option forwardfor: header X-Forwarded-Proto: not translated", nil},
		{"option forwardfor header Via", "k.cfg:5: option forwardfor: header Via: not translated", nil},
		{"option forwardfor except 127.0.0.0/8 if-none", "", []string{"@forwardfor_except remote_ip 127.0.0.0/8\n", "vars @forwardfor_present haproxy_forwardfor_kept $1\n",
			"\t\theader_up -{vars.haproxy_forwardfor_dropped}\n\t\t\theader_up X-Forwarded-For \"^(.*), [^,]*$\" {vars.haproxy_forwardfor_kept}\n"}},
		{"option forwardfor except 127.0.0.0/88", "k.cfg:5: option forwardfor: except 127.0.0.0/88: want an address or a CIDR range", nil},
		{"option forwardfor header X-Client-IP except 127.0.0.1", "k.cfg:5: option forwardfor: except and if-none are translated for X-Forwarded-For without http-request del-header X-Forwarded-For only", nil},
		{"option forwardfor if-none\n\thttp-request del-header X-Forwarded-For", "k.cfg:5: option forwardfor: except and if-none are translated", nil},
		{"option forwardfor except", "k.cfg:5: option forwardfor: takes [except <network>] [header <name>] [if-none]", nil},
	} {
		text := strings.Replace(site, "%s", tt.line, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// Issue 28: plain HTTP on port 443, which HAProxy serves and a Caddyfile
// site cannot, is refused at its bind line (it failed in Caddy's adapter,
// naming no line).
func TestPlainHTTPOn443IsRefusedWithItsLine(t *testing.T) {
	text := "defaults\n\tmode http\nfrontend f\n\tbind :443\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:4: bind :443: plain HTTP on port 443", nil...)
}

// Issue 28: a server without check beside checked ones is translated,
// approximated (Caddy checks every upstream of a reverse_proxy), where it
// was refused.
func TestUncheckedServerBesideCheckedOnes(t *testing.T) {
	text := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\toption httpchk GET /health\n\thttp-check expect status 200\n" +
		"\tserver a 10.0.0.1:80 check\n\tserver b 10.0.0.2:80\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "# k.cfg:10: server b 10.0.0.2:80  (approximated: HAProxy does not check this server")
}
