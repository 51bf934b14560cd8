package haproxy

import (
	"strings"
	"testing"
)

// A defaults line applies to each proxy that can take it, as in HAProxy:
// a frontend skips the backend keywords of its defaults (balance, checks,
// default-server, retries, the server timeouts), a backend the frontend
// keywords (timeout client, maxconn, option httplog, default_backend); a
// proxy's own line of the other side, which HAProxy ignores with a
// warning, is refused, as is what HAProxy refuses in a defaults section.
func TestDefaultsApplyToTheirSide(t *testing.T) {
	fe := "frontend f\n\tbind :80\n"
	be := "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		text, want string
		has        []string
	}{
		{"defaults\n\tmode http\n\tbalance leastconn\n\tdefault-server inter 3s\n\tretries 1\n\ttimeout server 5s\n\tdefault_backend b\n\tmaxconn 10\n" + fe + be, "",
			[]string{"# k.cfg:3: balance leastconn  (a backend's: see its reverse_proxy)", "lb_policy least_conn", "lb_retries 1", "read_timeout 5s",
				"# k.cfg:7: default_backend b  (a frontend's: see the site)", "max_connections 10"}},
		{"defaults\n\tmode http\n\toption httpchk GET /up\n\thttp-check expect status 204\n\tdefault-server check\n" + fe + be, "",
			[]string{"health_uri /up", "health_status 204", "# k.cfg:3: option httpchk GET /up  (a backend's: see its reverse_proxy)"}},
		{"defaults\n\tmode http\n\tcookie S insert\n\thttp-reuse never\n\ttimeout tunnel 1h\n" + fe + be + "\tserver t 10.0.0.2:80 cookie t\n", "",
			[]string{"lb_policy cookie S {", "transport pinned {"}},
		{"defaults\n\tmode http\n\tbalance random\n" + fe + be, "", []string{"lb_policy random_choose 2"}},
		{"defaults\n\tmode http\n\tbalance random(1)\n" + fe + be, "", []string{"lb_policy random\n"}},
		{"defaults\n\tmode http\n" + fe + "\toption socket-stats\n" + be, "", []string{"option socket-stats  (ignored: counters per bind line"}},
		// A keyword neither side takes is refused where a proxy reads it.
		{"defaults\n\tmode http\n\toption abortonclose\n" + fe + be, "", []string{"# k.cfg:3: option abortonclose  (a backend's: see its reverse_proxy)",
			"# k.cfg:3: option abortonclose  (approximated: Caddy cancels a request whose client went away"}},
		// Issue 28: the connection-mode options, each Caddy's keep-alive
		// with what differs; a use_backend without a condition holds for
		// every request.
		{"defaults\n\tmode http\n\toption http-server-close\n\toption httpclose\n" + fe + be, "", []string{
			"(approximated: Caddy keeps its connections to the servers alive and reuses them, where HAProxy closes each after its answer",
			"(approximated: Caddy keeps client and server connections alive, where HAProxy closes both after each answer"}},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tuse_backend b\n\tdefault_backend b\n" + be, "", []string{
			"# k.cfg:5: use_backend b  (without a condition: every request that reaches it, so what follows is never used, as in HAProxy)",
			"@use_backend_5 expression `true`"}},
		{"defaults\n\tmode http\n\tbalance random(0)\n" + fe + be, "k.cfg:3: balance random(0): random(<draws>) takes a whole number from 1 to 1000", nil},
		// A proxy's own line of the other side.
		{"defaults\n\tmode http\n" + fe + "\tbalance roundrobin\n" + be, "k.cfg:5: balance roundrobin: a backend's keyword, which HAProxy ignores in a frontend", nil},
		{"defaults\n\tmode http\n" + fe + "\ttimeout server 5s\n" + be, "k.cfg:5: timeout server: a backend's keyword, which HAProxy ignores in a frontend", nil},
		{"defaults\n\tmode http\n" + fe + be + "\ttimeout client 5s\n", "k.cfg:8: timeout client: a frontend's keyword, which HAProxy ignores in a backend", nil},
		{"defaults\n\tmode http\n" + fe + be + "\toption httplog\n", "k.cfg:8: option httplog: a frontend's keyword, which HAProxy ignores in a backend", nil},
		// What HAProxy refuses in a defaults section.
		{"defaults\n\tmode http\n\tredirect scheme https\n" + fe + be, "k.cfg:3: redirect scheme: HAProxy does not take redirect in a defaults section", nil},
		{"defaults\n\tmode http\n\thttp-request deny\n" + fe + be, "k.cfg:3: http-request deny: HAProxy takes http-request only in a named defaults section", nil},
		{"defaults\n\tmode http\n\tacl api path_beg /api\n" + fe + be, "k.cfg:3: acl api: HAProxy takes acl only in a named defaults section", nil},
		// A named defaults section's ACLs are its own rules', as in HAProxy.
		{"defaults d\n\tmode http\n\tacl api path_beg /api\nfrontend f from d\n\tbind :80\n\thttp-request deny if api\n\tdefault_backend b\ndefaults\n\tmode http\nbackend b\n\tserver s 10.0.0.1:80\n",
			"k.cfg:6: http-request deny: ACL api is defined in defaults d, whose ACLs only its own rules see", nil},
		{"defaults d\n\tmode http\n\tacl api path_beg /api\n\thttp-request deny if api\nfrontend f from d\n\tbind :80\n\tdefault_backend b\ndefaults\n\tmode http\nbackend b\n\tserver s 10.0.0.1:80\n", "",
			[]string{"# k.cfg:3: acl api path_beg /api", "@answer_4 expression `{http.request.uri}.split(\"?\")[0].startsWith(\"/api\")`"}},
		{"defaults d\n\tmode http\n\thttp-response set-header X-A 1\nfrontend f from d\n\tbind :80\n\tdefault_backend b\nbackend b from d\n\tserver s 10.0.0.1:80\n",
			"k.cfg:7: backend b: frontends and backends cannot take one defaults section with rules", nil},
		// option forwardfor, for both sides: HAProxy adds the header if
		// the frontend or the backend asks for it (issue 28).
		{"defaults\n\tmode http\n\toption forwardfor\n" + fe + be, "", []string{"# k.cfg:3: option forwardfor  (HAProxy adds the header if the frontend or the backend asks for it"}},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\ndefaults\n\tmode http\n\toption forwardfor\nbackend b\n\tserver s 10.0.0.1:80\n",
			"", []string{"\ttrusted_proxies 0.0.0.0/0 ::/0\n\t\theader_up -X-Forwarded-Proto\n"}},
		{"defaults\n\tmode http\n" + fe + be + "\toption forwardfor\n", "", []string{"\ttrusted_proxies 0.0.0.0/0 ::/0\n\t\theader_up -X-Forwarded-Proto\n"}},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\toption forwardfor header X-Client\n" + be + "\toption forwardfor\n",
			"k.cfg:9: option forwardfor: backend b adds X-Forwarded-For, where frontend f adds X-Client: HAProxy adds the backend's only, which is not translated", nil},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
	}
}

// The keyword of a line, as HAProxy's matrix names it, and its side.
func TestKeywordSide(t *testing.T) {
	for words, want := range map[string]side{
		"balance roundrobin": backendSide, "no option redispatch": backendSide, "http-check send meth GET": backendSide,
		"timeout connect 5s": backendSide, "timeout client 5s": frontendSide, "option httplog": frontendSide,
		"default_backend b": frontendSide, "timeout http-keep-alive 1s": bothSides, "option forwardfor": bothSides,
		"mode http": bothSides, "log global": bothSides, "http-request deny": bothSides, "stats enable": bothSides,
	} {
		if got := keywordSide(Line{Words: strings.Fields(words)}); got != want {
			t.Errorf("%s: side %d, want %d", words, got, want)
		}
	}
}

// HAProxy's default mode is tcp: a frontend, listen or backend without a
// mode line (its own or its defaults') is refused at its section's line,
// as mode tcp is; the last mode line holds, an earlier one is noted.
func TestDefaultModeIsTCP(t *testing.T) {
	be := "backend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		text, want string
		has        []string
	}{
		{"frontend f\n\tbind :80\n\tdefault_backend b\n" + be, "k.cfg:1: frontend f: no mode line: HAProxy's default is mode tcp, which is not translated", nil},
		{"frontend f\n\tmode http\n\tbind :80\n\tdefault_backend b\n" + be, "k.cfg:5: backend b: no mode line: HAProxy's default is mode tcp", nil},
		{"defaults d\n\ttimeout client 5s\nlisten stats\n\tbind :8404\n\tstats enable\n", "k.cfg:3: listen stats: no mode line", nil},
		{"defaults\n\tmode http\nfrontend f\n\tmode tcp\n\tbind :80\n\tdefault_backend b\n" + be, "k.cfg:4: mode tcp: only mode http is translated", nil},
		{"defaults\n\tmode tcp\nfrontend f\n\tmode http\n\tbind :80\n\tdefault_backend b\n" + be + "\tmode http\n", "",
			[]string{"# k.cfg:2: mode tcp  (replaced by the mode at line 4)", "# k.cfg:2: mode tcp  (replaced by the mode at line 9)", "# k.cfg:4: mode http  (Caddy's HTTP server)"}},
		{"defaults\n\tmode http\nfrontend f\n\tmode htttp\n\tbind :80\n\tdefault_backend b\n" + be, "k.cfg:4: mode htttp: only mode http is translated", nil},
		{"defaults\n\tmode tcp\n", "", []string{"# k.cfg:2: mode tcp  (ignored: read, and applied to no proxy)"}},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
	}
}

// A listen section without servers (a stats page) applies its backend
// keywords to no server, as HAProxy takes them (haproxy -c accepts a
// stats listen with timeout connect): each is noted, none refused.
func TestListenWithoutServersNotesBackendLines(t *testing.T) {
	text := "defaults\n\tmode http\nlisten stats\n\tbind :8404\n\tstats enable\n\tstats uri /stats\n\ttimeout client 5s\n\ttimeout connect 5s\n\ttimeout server 5s\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "# k.cfg:8: timeout connect 5s  (a backend's: this listen section has no server)", "# k.cfg:9: timeout server 5s  (a backend's: this listen section has no server)")
}
