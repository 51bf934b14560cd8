package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: a server's check port (check port 9000: Keycloak's management
// port) is health_port of Caddy's active health checks; with dynamic
// checked's checks (no http-check expect, or a TCP check) it is refused,
// as is a port out of range or two servers checked on different ports.
func TestServerCheckPort(t *testing.T) {
	const checked = "\toption httpchk GET /health/ready\n\thttp-check expect status 200\n"
	tr, err := stickBackend(t, checked+"\tdefault-server check port 9000\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "health_uri /health/ready; health_port 9000; health_method GET"; !strings.Contains(oneLine(tr.Caddyfile), want) {
		t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
	}
	for _, tt := range []struct{ lines, want string }{
		{"\toption httpchk GET /health/ready\n\tdefault-server check port 9000\n", "s.cfg:9: server s1: port: a check on another port is translated for Caddy's active health checks only"},
		{"\tdefault-server check port 9000\n", "s.cfg:8: server s1: port: a check on another port"},
		{checked + "\tdefault-server check port 0\n", "port 0: want a port from 1 to 65535"},
	} {
		if _, err := stickBackend(t, tt.lines); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.lines, err, tt.want)
		}
	}
	cfg, err := Parse(strings.NewReader("defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n"+checked+
		"\tserver s1 10.0.0.1:80 check port 9000\n\tserver s2 10.0.0.2:80 check port 9001\n"), "s.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Translate(cfg); err == nil || !strings.Contains(err.Error(), "s.cfg:10: server s2: its TLS or check options differ from s1's") {
		t.Errorf("two check ports: %v", err)
	}
}
