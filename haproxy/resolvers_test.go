package haproxy

import (
	"fmt"
	"strings"
	"testing"
)

// resolvedBackend is a configuration with a resolvers section (its
// lines) and one backend (its lines).
func resolvedBackend(resolvers, backend string) string {
	return "resolvers dns\n" + resolvers + "\ndefaults\n    mode http\n\nfrontend web\n    bind 127.0.0.1:8080\n    default_backend app\n\nbackend app\n" + backend
}

// Servers named by DNS through a resolvers section become dynamic
// checked's resolve, with the section's nameservers and timings and the
// servers' checks: a server line one server, a server-template up to its
// count, an SRV name without port; the check as HAProxy's, expect status
// included (Caddy's active health checks never run on dynamic
// upstreams); without check, check none.
func TestTranslateResolvers(t *testing.T) {
	ns := "    nameserver a 127.0.0.11:53\n    nameserver b udp@10.0.0.2\n    hold valid 5s\n    timeout resolve 2s\n"
	for _, tt := range []struct {
		name, text, want string
	}{
		{"a server line", resolvedBackend(ns, "    server web app:8000 resolvers dns check init-addr none\n"),
			"dynamic checked {; resolve app:8000 1; resolvers 127.0.0.11:53 10.0.0.2:53; refresh 5s; resolve_timeout 2s; check tcp; }"},
		{"a template's range", resolvedBackend(ns, "    option httpchk GET /ping\n    server-template task- 1-8 tasks.whoami:8000 check resolvers dns resolve-prefer ipv4\n"),
			"resolve tasks.whoami:8000 8; resolvers 127.0.0.11:53 10.0.0.2:53; refresh 5s; resolve_timeout 2s; prefer_ipv4; check http; method GET; uri /ping; }"},
		{"an SRV name", resolvedBackend(ns, "    default-server resolvers dns check\n    server-template api 10 _api._tcp.service.consul resolve-opts allow-dup-ip,ignore-weight\n"),
			"resolve _api._tcp.service.consul 10; resolvers 127.0.0.11:53 10.0.0.2:53; refresh 5s; resolve_timeout 2s; allow_dup_ip; check tcp; }"},
		{"expect status", resolvedBackend(ns, "    option httpchk\n    http-check expect status 204\n    server-template app 3 app:80 check resolvers dns\n"),
			"check http; expect_status 204; }"},
		{"no check", resolvedBackend(ns, "    server-template app 4 app:80 resolvers dns inter 5s\n"),
			"dynamic checked {; resolve app:80 4; resolvers 127.0.0.11:53 10.0.0.2:53; refresh 5s; resolve_timeout 2s; check none; }"},
		{"the system's resolver", resolvedBackend("    parse-resolv-conf\n", "    server-template app 2 app:80 check resolvers dns\n"),
			"dynamic checked {; resolve app:80 2; check tcp; }"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := translateText(t, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(oneLine(out), tt.want) {
				t.Errorf("translation lacks %q:\n%s", tt.want, out)
			}
		})
	}
}

// What a resolvers section's lines become is said at each line: hold
// nx and obsolete, and an SRV name's weights, are warned about.
func TestTranslateResolversWarnings(t *testing.T) {
	text := resolvedBackend("    nameserver a 127.0.0.11:53\n    hold nx 30s\n    hold obsolete 5s\n    hold other 30s\n    resolve_retries 3\n    accepted_payload_size 8192\n",
		"    server-template api 10 _api._tcp.service.consul check resolvers dns\n")
	cfg, err := Parse(strings.NewReader(text), "r.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range tr.Warnings {
		got = append(got, fmt.Sprintf("%s:%d: %s", w.Pos.File, w.Pos.Line, w.Msg))
	}
	for _, want := range []string{
		"r.cfg:3: hold nx: a name that no longer exists",
		"r.cfg:4: hold obsolete: a server whose record is gone",
		"r.cfg:17: server-template api: HAProxy gives each server the weight of its SRV record, dynamic checked balances them alike (resolve-opts ignore-weight says so); with more records than servers",
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
	for _, want := range []string{"hold other 30s  (ignored: a lookup that fails", "resolve_retries 3  (ignored:", "accepted_payload_size 8192  (ignored:"} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the Caddyfile lacks %q", want)
		}
	}
}

// What dynamic checked cannot resolve as HAProxy does is refused at its
// line.
func TestTranslateRefusesResolvers(t *testing.T) {
	ns := "    nameserver a 127.0.0.11:53\n"
	for _, tt := range []struct{ name, text, want string }{
		{"a template without resolvers", resolvedBackend(ns, "    server-template app 3 app:80 check\n"),
			"b.cfg:12: server-template app: server-template without resolvers: HAProxy resolves the name once"},
		{"no such section", resolvedBackend(ns, "    server app app:80 check resolvers other\n"), "resolvers other: no resolvers section of that name"},
		{"an address in init-addr", resolvedBackend(ns, "    server app app:80 check resolvers dns init-addr 10.0.0.1\n"),
			"init-addr 10.0.0.1: an address used until the name resolves is not translated"},
		{"resolve-opts", resolvedBackend(ns, "    server app app:80 check resolvers dns resolve-opts ignore-weight,foo\n"), "resolve-opts foo is not translated"},
		{"resolve-prefer", resolvedBackend(ns, "    server app app:80 check resolvers dns resolve-prefer ipv5\n"), "resolve-prefer takes ipv4 or ipv6"},
		{"a resolved and a fixed server", resolvedBackend(ns, "    server a app:80 check resolvers dns\n    server b 10.0.0.1:80 check\n"),
			"its resolvers or resolve options differ from a's"},
		{"a backup", resolvedBackend(ns, "    server a app:80 check resolvers dns\n    server b app2:80 check resolvers dns backup\n"), "backup with resolvers is not translated"},
		{"a nameserver by name", resolvedBackend("    nameserver a dns.local:53\n", "    server a app:80 check resolvers dns\n"), "dns.local:53: only an IP address"},
		{"a TCP nameserver", resolvedBackend("    nameserver a tcp@10.0.0.1:53\n", "    server a app:80 check resolvers dns\n"), "tcp@10.0.0.1:53: only an IP address"},
		{"parse-resolv-conf and a nameserver", resolvedBackend("    parse-resolv-conf\n"+ns, "    server a app:80 check resolvers dns\n"),
			"parse-resolv-conf with nameserver lines is not translated"},
		{"an SRV name with a port", resolvedBackend(ns, "    server-template api 3 _api._tcp.consul:80 check resolvers dns\n"), "an SRV name's records give the port"},
		{"a bad count", resolvedBackend(ns, "    server-template api 5-2 app:80 check resolvers dns\n"), "5-2: want a count or a range"},
		{"hold valid 0", resolvedBackend("    nameserver a 10.0.0.1:53\n    hold valid 0s\n", "    server a app:80 check resolvers dns\n"), "hold valid 0s: a refresh above 0"},
		{"timeout resolve 0", resolvedBackend("    nameserver a 10.0.0.1:53\n    timeout resolve 0\n", "    server a app:80 check resolvers dns\n"), "timeout resolve 0: a bound above 0"},
		{"another keyword", resolvedBackend("    nameserver a 10.0.0.1:53\n    timeout connect 1s\n", "    server a app:80 check resolvers dns\n"),
			"timeout connect: not translated yet in a resolvers section"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := translateText(t, tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
