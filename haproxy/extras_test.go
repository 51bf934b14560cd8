package haproxy

import (
	"fmt"
	"testing"
)

// The forms of compression, userlist and http-request auth, the PROXY
// protocol, monitor-uri, http-after-response and http-buffer-request
// that are translated, and those refused at their line.
func TestExtrasFormsAndRefusals(t *testing.T) {
	const site = "defaults\n\tmode http\nfrontend f\n\tbind :80\n%s\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80%s\n%s"
	const users = "userlist u\n\tuser alice insecure-password pw\n"
	for _, tt := range []struct {
		fe, srv, extra, want string
		has                  []string
	}{
		{"\tcompression algo deflate\n", "", "", "k.cfg:5: compression algo: Caddy's encode has no deflate", nil},
		{"\tcompression algo br\n", "", "", `k.cfg:5: compression algo: algorithm "br"`, nil},
		{"\tcompression type text/*\n", "", "", `k.cfg:5: compression type: type "text/*"`, nil},
		{"\tcompression algo identity\n", "", "", "", []string{"# no gzip among the algorithms: nothing is compressed\n"}},
		{"\tcompression algo gzip deflate\n", "", "", "", []string{"encode gzip {\n", "status 200 201 202 203\n"}},
		{"\tacl ok http_auth(u)\n\thttp-request auth if ok\n", "", users, "k.cfg:6: http-request auth: only http-request auth unless <ACL of http_auth(<userlist>)>", nil},
		{"\thttp-request auth\n", "", users, "k.cfg:5: http-request auth: only http-request auth unless", nil},
		{"\tacl ok http_auth(v)\n\thttp-request auth unless ok\n", "", users, "k.cfg:6: http-request auth: no userlist v", nil},
		{"\tacl ok http_auth(u)\n\tuse_backend b if ok\n", "", users, "k.cfg:6: use_backend b: http_auth is translated only as the condition of http-request auth", nil},
		{"\thttp-request auth if !{ http_auth(u) }\n", "", users, "", []string{"basic_auth bcrypt f {\n", "\talice $2a$10$"}},
		{"\thttp-request auth unless { http_auth(u) }\n", "", "userlist u\n\tuser alice password $1$abc$def\n", "k.cfg:10: user alice: a crypt(3) hash other than bcrypt", nil},
		{"\thttp-request auth unless { http_auth(u) }\n", "", "userlist u\n\tuser alice\n", "k.cfg:10: user alice: takes a name", nil},
		{"\thttp-request auth unless { http_auth(u) }\n", "", "userlist u\n\tuser alice password $6$rounds=many$salt$bad\n", "k.cfg:10: user alice: not a SHA-crypt hash", nil},
		{"", " send-proxy", "", "", []string{"proxy_protocol v1\n"}},
		{"", " send-proxy send-proxy-v2", "", "k.cfg:7: server s: send-proxy and send-proxy-v2 on one line", nil},
		{"\thttp-after-response set-header X-A 1 if { path /a }\n", "", "", "k.cfg:5: http-after-response set-header: conditions are not translated yet", nil},
		{"\tmonitor-uri\n", "", "", "k.cfg:5: monitor-uri: takes one URI", nil},
		{"\toption http-buffer-request x\n", "", "", "k.cfg:5: option http-buffer-request: takes no value", nil},
	} {
		text := fmt.Sprintf(site, tt.fe, tt.srv, tt.extra)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
	// A backend's http-after-response, and send-proxy with http-reuse
	// never, are refused.
	for _, tt := range []struct{ text, want string }{
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\thttp-after-response del-header X-A\n\tserver s 10.0.0.1:80\n", "k.cfg:7: http-after-response del-header: a backend's http-after-response (its own or its defaults') is not translated yet"},
		{"defaults be_rules\n\tmode http\n\thttp-after-response set-header X-A 1\ndefaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b from be_rules\n\tserver s 10.0.0.1:80\n", "k.cfg:3: http-after-response set-header: a backend's http-after-response (its own or its defaults') is not translated yet"},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\thttp-reuse never\n\tserver s 10.0.0.1:80 send-proxy-v2\n", "k.cfg:8: server s: send-proxy with http-reuse never"},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want)
	}
}
