package haproxy

import (
	"fmt"
	"testing"
)

// Settings of HAProxy's own workings (issue 28): tune.bufsize sizes
// request_buffers and is approximated for the header limit Caddy does
// not share; the server state file and the half-closed and tarpit
// timeouts are noted with why; each is read, and a wrong value refused.
func TestGlobalTuning(t *testing.T) {
	fe := "defaults\n\tmode http\n\toption http-buffer-request\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		text, want string
		has        []string
	}{
		{"global\n\ttune.bufsize 32768\n" + fe, "", []string{"\t\trequest_buffers 32768\n",
			"(approximated: the body option http-buffer-request reads before a request goes to a server (request_buffers 32768); HAProxy answers 400 to a request whose line and headers take more than about 31744 bytes (this less tune.maxrewrite), where Caddy takes them up to its max_header_size, 1 MiB by default"}},
		{fe, "", []string{"\t\trequest_buffers 16KiB\n"}},
		{"global\n\ttune.bufsize 100\n" + fe, "k.cfg:2: tune.bufsize 100: takes a size in bytes from 2048", nil},
		{"global\n\tserver-state-file /var/lib/haproxy/state\n" + fe + "\tload-server-state-from-file global\n\tserver-state-file-name x\n", "",
			[]string{"(ignored: the file load-server-state-from-file reads (see it))", "(approximated: Caddy keeps no server state across a reload or restart", "(ignored: the file of load-server-state-from-file local (see it))"}},
		{fe + "\tload-server-state-from-file none\n", "", []string{"(ignored: HAProxy loads no server state)"}},
		{fe + "\tload-server-state-from-file all\n", "k.cfg:9: load-server-state-from-file all: takes global, local or none", nil},
		{"defaults\n\tmode http\n\ttimeout client-fin 1s\n\ttimeout server-fin 1s\n\ttimeout tarpit 2s\n" + fe[len("defaults\n\tmode http\n"):], "",
			[]string{"(ignored: how long HAProxy waits on a client that shut its side of the connection: Go's server ends the request of such a client at once",
				"(ignored: how long HAProxy waits on a server that shut its side", "(ignored: how long http-request tarpit holds a request"}},
		{"defaults\n\tmode http\n\ttimeout client-fin 1x\n" + fe[len("defaults\n\tmode http\n"):], "k.cfg:3: timeout client-fin: \"1x\"", nil},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
	}
}

// dst_port, the port the connection came in on, is Caddy's
// {http.request.local.port} compared as a number: a port, a range, an
// operator and a number, each number as CEL reads it.
func TestDstPort(t *testing.T) {
	fe := "defaults\n\tmode http\nfrontend f\n\tbind :9000\n\tbind :9001\n\tacl console %s\n\tuse_backend c if console\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\nbackend c\n\tserver s 10.0.0.2:80\n"
	for _, tt := range []struct{ acl, want, has string }{
		{"dst_port 9001", "", "{http.request.local.port} == 9001"},
		{"dst_port 9001 8000:8080 :80 443:", "", "({http.request.local.port} == 9001 || ({http.request.local.port} >= 8000 && {http.request.local.port} <= 8080) || {http.request.local.port} <= 80 || {http.request.local.port} >= 443)"},
		{"dst_port gt 9000", "", "{http.request.local.port} >= 9001"},
		{"dst_port -m int le 9000", "", "{http.request.local.port} <= 9000"},
		{"dst_port -i 9001", "k.cfg:6: acl console: dst_port takes no -i", ""},
		{"dst_port http", "k.cfg:6: acl console: dst_port http: want a whole number", ""},
		{"dst_port :", "k.cfg:6: acl console: dst_port :: want a whole number", ""},
		// Written as CEL reads them: no '+' (a syntax error when Caddy
		// compiles the expression), no overflow past CEL's int range.
		{"dst_port +9001 0443:", "", "({http.request.local.port} == 9001 || {http.request.local.port} >= 443)"},
		{"dst_port gt 9223372036854775807", "k.cfg:6: acl console: dst_port gt 9223372036854775807: want a whole number", ""},
		{"dst_port lt -9223372036854775808", "k.cfg:6: acl console: dst_port lt -9223372036854775808: want a whole number", ""},
	} {
		text := fmt.Sprintf(fe, tt.acl)
		out, err := translateK(t, text)
		var has []string
		if tt.has != "" {
			has = []string{tt.has}
		}
		checkOutcome(t, text, out, err, tt.want, has...)
	}
}

// An ACL's values compare as HAProxy's do: -i folds ASCII letters alone,
// as strncasecmp (and CEL's lowerAscii() of the subject) do, so a value
// with Ä keeps it, and the Kelvin sign is no k; a regular expression that
// PCRE reads otherwise than RE2 (\v: any vertical space, a vertical tab
// in RE2) is refused, as in every other place an expression is read.
func TestACLValuesAsHAProxyCompares(t *testing.T) {
	fe := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tacl a %s\n\thttp-request deny if a\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct{ acl, want, has string }{
		{"hdr_beg(host) -i WWW.Ä.EXAMPLE \u212a", "", `({http.request.hostport}.lowerAscii().startsWith("www.Ä.example") || {http.request.hostport}.lowerAscii().startsWith("` + "\u212a" + `"))`},
		{`path_reg ^/a\v`, `k.cfg:5: acl a: ^/a\v: \v reads otherwise in PCRE (HAProxy's) than in Go's RE2`, ""},
	} {
		text := fmt.Sprintf(fe, tt.acl)
		out, err := translateK(t, text)
		var has []string
		if tt.has != "" {
			has = []string{tt.has}
		}
		checkOutcome(t, text, out, err, tt.want, has...)
	}
}
