package haproxy

import (
	"fmt"
	"testing"
)

// The forms of nbsrv and monitor fail that are translated, and those
// refused at their line.
func TestNbsrvFormsAndRefusals(t *testing.T) {
	const site = "defaults\n\tmode http\nfrontend f\n\tbind :80\n%s\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80%s\n%s"
	const other = "backend o\n\tserver o 10.0.0.2:80\n"
	for _, tt := range []struct {
		fe, srv, extra, want string
		has                  []string
	}{
		{"\tacl down nbsrv(b) eq 0\n\tuse_backend o if down\n", " check", other, "", []string{"@use_backend_6 expression `usable_servers(\"b\") == 0`", "\t\t\t\tcheck tcp\n", "\t\t\t\tname b\n"}},
		{"\tuse_backend o if { nbsrv(b) lt 1 }\n", "", other, "", []string{"@use_backend_5 expression `1 <= 0`"}},
		{"\tuse_backend o if { nbsrv(b) 0:1 }\n", " disabled", other, "", []string{"@use_backend_5 expression `(0 >= 0 && 0 <= 1)`"}},
		{"\tacl down nbsrv(nope) eq 0\n", "", "", "k.cfg:5: acl down: nbsrv(nope): no backend or listen section of that name (HAProxy refuses it too)", nil},
		{"\tuse_backend o if { nbsrv(nope) eq 0 }\n", "", other, "k.cfg:5: use_backend o: nbsrv(nope): no backend or listen section of that name", nil},
		{"\tuse_backend b if { nbsrv(o) eq 0 }\n", "", other, "k.cfg:5: use_backend b: nbsrv(o) of a backend this frontend does not send to is not translated yet", nil},
		{"\tuse_backend o if { nbsrv(b) eq 0 }\n", " check\n\tserver spare 10.0.0.3:80 check backup", other, "k.cfg:5: use_backend o: nbsrv(b) of a backend with backup servers is not translated yet", nil},
		{"\tuse_backend o if { nbsrv(b) eq 0 }\n", " check port 9000\n\toption httpchk\n\thttp-check expect status 200", other,
			"k.cfg:8: server s: port: a check on another port is translated for Caddy's active health checks only (option httpchk with http-check expect status <code>), not yet for dynamic checked's or the leader's (an nbsrv names this backend: dynamic checked checks it, to count its servers up)", nil},
		{"\tuse_backend o if { nbsrv eq 0 }\n", "", other, "k.cfg:5: use_backend o: ACL fetch nbsrv is not translated yet", nil},
		{"\tuse_backend o if { nbsrv(b) eq zero }\n", "", other, "k.cfg:5: use_backend o: nbsrv(b) eq zero: want a whole number", nil},
		{"\tuse_backend o if { nbsrv(b) -i 0 }\n", "", other, "k.cfg:5: use_backend o: nbsrv(b) takes no -i and no -m other than int", nil},
		{"\tuse_backend o if { nbsrv(b) }\n", "", other, "k.cfg:5: use_backend o: an ACL without a value", nil},
		{"", "\n\thttp-request deny if { nbsrv(b) eq 0 }", "", "k.cfg:8: http-request deny: nbsrv(b) in a backend's rules is not translated yet", nil},
		{"\thttp-response set-header X-Servers none if { nbsrv(b) eq 0 }\n", " check", "", "", []string{"@response_5 expression `usable_servers(\"b\") == 0`"}},
		{"\tmonitor-uri /up\n\tmonitor fail\n", "", "", "k.cfg:6: monitor fail: takes if or unless and a condition", nil},
		{"\tmonitor fail if { nbsrv(b) eq 0 }\n", "", "", "", []string{"(ignored: no monitor-uri, whose answer it fails (HAProxy never tests it))"}},
		{"\tmonitor-uri /up\n\tmonitor fail unless { hdr(x-ok) yes }\n\tmonitor fail if { nbsrv(b) eq 0 }\n", "", "",
			"", []string{"@monitor_fail expression `{http.request.uri} == \"/up\" && (!({http.request.header.x-ok}.split(\",\").exists(v, v.trim() == \"yes\")) || 1 == 0)`\n\t\terror @monitor_fail 503\n", "handle_errors 503 {"}},
	} {
		text := fmt.Sprintf(site, tt.fe, tt.srv, tt.extra)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}
