package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: tcp-request connection reject is an abort first in the site,
// with the condition on src as remote_ip and none of the earlier accepts'
// (the first rule that holds decides); a warning at the line says Caddy
// reads a request first. An accept without a condition ends the rules. A
// condition on anything but src, a frontend with accept-proxy, and other
// actions are refused with the line.
func TestConnectionRules(t *testing.T) {
	translate := connectionRules(t)
	tr, err := translate("\ttcp-request connection accept if ok\n\ttcp-request connection reject if bad\n\ttcp-request connection reject unless { src 192.0.2.1 }\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"@connection_8 expression `(remote_ip(\"10.0.0.0/8\")) && !(remote_ip(\"10.1.0.0/16\"))`\n\t\tabort @connection_8",
		"@connection_9 expression `(!(remote_ip(\"192.0.2.1\"))) && !(remote_ip(\"10.1.0.0/16\"))`\n\t\tabort @connection_9",
	} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}
	if route, deny := strings.Index(tr.Caddyfile, "route {"), strings.Index(tr.Caddyfile, "@connection_8"); route < 0 || deny < route || strings.Index(tr.Caddyfile, "@answer_10") < deny {
		t.Errorf("the aborts are not first in the site's route:\n%s", tr.Caddyfile)
	}
	if warned := warnedLines(tr, "tcp-request connection: Caddy closes the connection once it has read a request"); len(warned) != 2 || warned[0] != 8 || warned[1] != 9 {
		t.Errorf("warnings at lines %v, want 8 and 9: %+v", warned, tr.Warnings)
	}
	tr, err = translate("\ttcp-request connection accept\n\ttcp-request connection reject\n")
	if err != nil || strings.Contains(tr.Caddyfile, "abort") {
		t.Errorf("a reject after an accept without a condition is written: %v\n%s", err, tr.Caddyfile)
	}
	tr, err = translate("\ttcp-request connection reject\n")
	if err != nil || !strings.Contains(tr.Caddyfile, "@connection_7 expression `(true)`\n\t\tabort @connection_7") {
		t.Errorf("a reject without a condition: %v\n%s", err, tr.Caddyfile)
	}
}

// Without an accept before it, a reject of src ACLs alone (a block
// list's) is remote_ip itself, which takes any number of ranges.
func TestConnectionRejectOfPeersIsRemoteIP(t *testing.T) {
	tr, err := connectionRules(t)("\ttcp-request connection reject if bad\n\ttcp-request connection reject unless ok\n")
	if err != nil || !strings.Contains(tr.Caddyfile, "@connection_7 remote_ip 10.0.0.0/8\n\t\tabort @connection_7") ||
		!strings.Contains(tr.Caddyfile, "@connection_8 not remote_ip 10.1.0.0/16\n\t\tabort @connection_8") {
		t.Errorf("rejects of src ACLs: %v\n%s", err, tr.Caddyfile)
	}
}

// warnedLines are the lines of tr's warnings that begin with prefix.
func warnedLines(tr Translation, prefix string) []int {
	var lines []int
	for _, w := range tr.Warnings {
		if strings.HasPrefix(w.Msg, prefix) {
			lines = append(lines, w.Pos.Line)
		}
	}
	return lines
}

// connectionRules translates a frontend with ACLs ok and bad (lines 5
// and 6) and rules from line 7, then a deny.
func connectionRules(t *testing.T) func(rules string) (Translation, error) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tacl ok src 10.1.0.0/16\n\tacl bad src 10.0.0.0/8\n"
	const tail = "\thttp-request deny if { path /x }\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	return func(rules string) (Translation, error) {
		cfg, err := Parse(strings.NewReader(head+rules+tail), "c.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		return Translate(cfg)
	}
}

// What a connection does not know when it is accepted, accept-proxy, and
// the other actions are refused with the line.
func TestConnectionRulesRefused(t *testing.T) {
	translate := connectionRules(t)
	for _, tt := range []struct{ rules, want string }{
		{"\ttcp-request connection reject if { path /admin }\n", "c.cfg:7: tcp-request connection: acl path at line 7 tests path, which a connection does not carry"},
		{"\ttcp-request connection reject if bad !{ ssl_fc }\n", "c.cfg:7: tcp-request connection: acl ssl_fc at line 7 tests ssl_fc"},
		{"\ttcp-request connection silent-drop if bad\n", "c.cfg:7: tcp-request connection: tcp-request connection silent-drop is not translated"},
		{"\ttcp-request connection reject extra\n", "c.cfg:7: tcp-request connection: takes an action"},
		{"\tbind :81 accept-proxy\n\ttcp-request connection reject if bad\n", "c.cfg:8: tcp-request connection: with accept-proxy (line 7)"},
	} {
		if _, err := translate(tt.rules); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %s", tt.rules, err, tt.want)
		}
	}
}
