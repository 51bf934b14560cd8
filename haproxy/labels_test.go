package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: a proxy's and a server's id (the numbers of HAProxy's stats
// and runtime API, as pfSense writes them) are ignored with the reason:
// they change no request.
func TestNumericIDsAreIgnored(t *testing.T) {
	const text = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tid 10\n\tdefault_backend b\nbackend b\n\tid 100\n\tserver s 10.0.0.1:80 id 101\n"
	cfg, err := Parse(strings.NewReader(text), "k.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range tr.Lines {
		if strings.HasPrefix(strings.TrimSpace(l.Source), "id ") && (l.Status != "ignored" || !strings.Contains(l.Why, "stats and runtime API")) {
			t.Errorf("%s: %s (%s), want ignored with the reason", l.Source, l.Status, l.Why)
		}
	}
	if !strings.Contains(tr.Caddyfile, "reverse_proxy 10.0.0.1:80") {
		t.Errorf("the server is not proxied to:\n%s", tr.Caddyfile)
	}
}

// Issue 28: the server options real configurations use that change no
// request are ignored (tfo, the connection pool's settings, agent-check's
// settings without it), or approximated with a Warning at the line
// (slowstart, observe and its error handling, on-marked-down); check-ssl
// is what ssl implies; those without a counterpart are refused with why
// and what to do instead.
func TestServerOptionsOfTheLongTail(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n"
	out, err := translateText(t, head+"\tdefault-server inter 3s slowstart 60s tfo pool-max-conn 10 pool-purge-delay 5s agent-inter 5s\n"+
		"\tserver s 10.0.0.1:80 check observe layer7 error-limit 10 on-error mark-down on-marked-down shutdown-sessions\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"approximated: " + slowstartDoc, "approximated: " + observeDoc, "approximated: " + markedDoc, "dynamic checked"} {
		if !strings.Contains(out, want) {
			t.Errorf("the translation lacks %q:\n%s", want, out)
		}
	}
	out, err = translateText(t, head+"\tserver s 10.0.0.1:443 ssl verify none check check-ssl\n")
	if err != nil || !strings.Contains(out, "tls_insecure_skip_verify") {
		t.Errorf("check-ssl with ssl: %v\n%s", err, out)
	}
	for opts, want := range map[string]string{
		"check check-ssl":                    "b.cfg:7: server s: check-ssl without ssl",
		"ssl verify none check no-check-ssl": "b.cfg:7: server s: no-check-ssl with ssl",
		"check agent-check agent-port 9999":  "b.cfg:7: server s: agent-check: an agent on the server",
		"track other/s1":                     "b.cfg:7: server s: track: a server's state taken from another server's checks",
		"redir http://www.example.test":      "b.cfg:7: server s: redir: HAProxy answers the server's GET and HEAD requests with a 302",
		"source 10.0.0.9":                    "b.cfg:7: server s: source: the address HAProxy connects to the server from is not translated",
	} {
		if _, err := translateText(t, head+"\tserver s 10.0.0.1:443 "+opts+"\n"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", opts, err, want)
		}
	}
}
