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
