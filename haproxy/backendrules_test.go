package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: a backend's own rules apply to the requests it gets, in a
// route before its reverse_proxy; what does not translate exactly is
// refused at its line: a regular expression RE2 cannot compile or reads
// otherwise than PCRE, a log-format format, an ACL of another section, an
// action translated in a frontend only (and the reverse).
func TestBackendRules(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tacl fe_acl path /x\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n\t%s\n"
	for _, tt := range []struct {
		line, want string
		has        []string
	}{
		{`http-request replace-path ^/api/(\d+)/(.*) /v2/\2/id=\1`, "", []string{"route {\n", `uri path_regexp "^(?s:.*?)(^/api/(\d+)/(.*))(?s:.*)$" "/v2/$\{3\}/id=$\{2\}"`}},
		{`http-request replace-path ^/a(.*) /b?\1`, "k.cfg:9: http-request replace-path: /b?\\1: '?' in a path: Go would send it escaped, HAProxy as it is", nil},
		{`http-request set-path /a$b`, "", []string{`uri path_regexp ^(.*)$ /a$$b`}},
		{`http-request replace-path ^/(?=api) /`, "k.cfg:9: http-request replace-path: ^/(?=api): not a regular expression Go's RE2 reads", nil},
		{`http-request replace-path ^/api\Z /`, `k.cfg:9: http-request replace-path: ^/api\Z: not a regular expression Go's RE2 reads`, nil},
		{`http-request replace-path ^/a\v /`, `k.cfg:9: http-request replace-path: ^/a\v: \v reads otherwise in PCRE (HAProxy's) than in Go's RE2`, nil},
		// Go sends a brace, a quote or a backslash of a path escaped
		// (HAProxy as it is); a group the expression lacks is empty.
		{`http-request replace-path ^/a(.*) /b{1}\1\0`, "k.cfg:9: http-request replace-path: /b{1}\\1\\0: '{' in a path: Go would send it escaped, HAProxy as it is", nil},
		{`http-request replace-path ^/a(.*) /b\1\0\5`, "", []string{`"/b$\{2\}$\{1\}"`}},
		{`http-request set-path "%[path,regsub('^/','/x\1')]"`, "", []string{`"$\{1\}/x$\{3\}"`}},
		{`http-request set-path /x\0`, "k.cfg:9: http-request set-path: /x\\0: '\\\\' in a path: Go would send it escaped, HAProxy as it is", nil},
		{`http-request set-path '/a"b'`, "k.cfg:9: http-request set-path: /a\"b: '\"' in a path: Go would send it escaped, HAProxy as it is", nil},
		{`http-request replace-path ^/a(.*) %[path]`, "k.cfg:9: http-request replace-path: %[path]: log-format expressions are not translated yet", nil},
		{`http-request replace-path ^/a(.*) /\y`, `k.cfg:9: http-request replace-path: /\y: only \0 to \9 are translated after a backslash`, nil},
		{`http-request set-path`, "k.cfg:9: http-request set-path: set-path, set-uri and set-query take a format", nil},
		{`http-request deny if fe_acl`, "k.cfg:9: http-request deny: ACL fe_acl is not defined before this line", nil},
		{`http-request track-sc0 src`, "k.cfg:9: http-request track-sc0: http-request track-sc0 in a backend is not translated yet", nil},
		{`http-request set-header X-A 1 if { path /a }`, "", []string{"@header_9 expression", "request_header @header_9 X-A 1"}},
		{`redirect scheme https if !{ ssl_fc }`, "", []string{"redir @answer_9 \"https://{hostport}{uri}\" 302"}},
	} {
		text := strings.Replace(site, "%s", tt.line, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
	// With a condition, a backend's http-response rules are deferred
	// header handlers, which run after the frontend's: refused where the
	// frontend's change the same header.
	text := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\thttp-response set-header X-A 1\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n\thttp-response set-header x-a 2 if { src 10.0.0.0/8 }\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:9: http-response set-header: with a condition, the backend's http-response rules run after frontend f's (line 5), which changes X-A too")
	text = strings.Replace(text, "X-A 1", "X-B 1", 1)
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "", "\theader @response_9 {\n\t\tx-a 2\n\t\tdefer\n\t}\n", "header_down X-B 1")
	// HAProxy never matches a request's fetch in an http-response rule.
	text = strings.Replace(text, "{ src 10.0.0.0/8 }", "{ path /a }", 1)
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "", "(HAProxy never matches path (line 9) in an http-response rule (haproxy -c warns): false here too)", "@response_9 expression `false`")
	// Behind the frontend's forwarded handler, which writes every
	// forwarding header, a backend's rule on one is refused.
	text = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\toption forwardfor\n\thttp-request del-header X-Forwarded-For\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n\thttp-request set-header X-Forwarded-Proto https\n"
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:10: http-request set-header: frontend f writes the forwarding headers with the forwarded handler")
}

// A backend's http-request auth asks the requests that backend gets for
// an account of the userlist, in the order of its rules, with the
// backend's name as the realm by default.
func TestBackendAuth(t *testing.T) {
	site := "userlist u\n\tuser alice insecure-password pw\ndefaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n\tacl ok http_auth(u)\n\t%s\n"
	for _, tt := range []struct {
		line, want string
		has        []string
	}{
		{"http-request auth unless ok", "", []string{"route {\n", "\t\tbasic_auth bcrypt b {\n", "\t\t\talice $2a$10$"}},
		{"http-request auth realm Staff if !{ http_auth(u) }", "", []string{"basic_auth bcrypt Staff {\n"}},
		{"http-request auth if ok", "k.cfg:11: http-request auth: only http-request auth unless <ACL of http_auth(<userlist>)>", nil},
		{"http-request auth unless { http_auth(v) }", "k.cfg:11: http-request auth: no userlist v", nil},
		{"http-request deny unless ok", "k.cfg:11: http-request deny: http_auth is translated only as the condition of http-request auth", nil},
	} {
		text := strings.Replace(site, "%s", tt.line, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// A backend's own stats page is in its route, after its http-request
// rules, named after its section's line; a backend with a page and no
// server answers 503 to the rest, as HAProxy does; stats admin is the
// page without its admin form, with a warning.
func TestBackendStatsPage(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\thttp-request deny if { path /x }\n%s\n"
	for _, tt := range []struct {
		lines, want string
		has         []string
	}{
		{"\tstats enable\n\tstats uri /s\n\tserver s 10.0.0.1:80", "", []string{"\t\terror @answer_7 403\n", "\t\t@haproxy_stats_6 expression `{http.request.uri}.startsWith(\"/s\")", "\t\treverse_proxy 10.0.0.1:80 {\n"}},
		{"\tstats enable", "", []string{"startsWith(\"/haproxy?stats\")", "\t\t# no server: HAProxy answers 503 to what the rules above did not answer\n\t\terror 503\n\t}\n", "handle_errors 503 {"}},
		{"\tstats enable\n\tstats admin if TRUE", "", []string{"stats admin if TRUE  (approximated: the page without admin actions: ha_status has no admin level"}},
		{"\tstats admin", "k.cfg:8: stats admin: takes if or unless and a condition", nil},
		{"", "", []string{"\t\t# no server: HAProxy answers 503 to what the rules above did not answer\n\t\terror 503\n"}}, // no page, no server: its rules, then 503
	} {
		text := strings.Replace(site, "%s", tt.lines, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}
