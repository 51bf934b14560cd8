package haproxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A configuration with refused lines in several sections is refused
// naming each of them, in the order written, each once (a defaults line
// that two proxies take, a backend two frontends send to), so that one
// run shows everything to change (issue 28.2).
func TestEveryRefusalAtOnce(t *testing.T) {
	text := `global
    lua-load /etc/haproxy/auth.lua
defaults
    mode http
    option tcplog
frontend a
    bind :80
    capture request header Host len 32
    default_backend app
frontend b
    bind :81
    default_backend app
backend app
    server s1 10.0.0.1:80 agent-check
`
	_, err := translateK(t, text)
	var r Refusals
	if !errors.As(err, &r) {
		t.Fatalf("error %v (%T), want Refusals", err, err)
	}
	want := []string{
		"k.cfg:2: lua-load /etc/haproxy/auth.lua: Lua has no counterpart in Caddy",
		"k.cfg:5: option tcplog: not translated yet",
		"k.cfg:8: capture request: not translated yet",
		"k.cfg:14: server s1: agent-check: an agent on the server that sets its weight and state",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) || len(r) != len(want) {
		t.Fatalf("%d refusals:\n%v\nwant %d", len(r), err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("refusal %d: %s, want %s…", i, lines[i], w)
		}
	}
	var first *Error
	if !errors.As(err, &first) || first.Pos.Line != 2 {
		t.Errorf("errors.As gives %v, want the first refusal", first)
	}
}

// Past maxRefusalsShown refusals, the text names how many more there are.
func TestRefusalsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("defaults\n    mode http\nfrontend a\n    bind :80\n")
	for i := 0; i < maxRefusalsShown+5; i++ {
		fmt.Fprintf(&b, "    capture request header X-%d len 8\n", i)
	}
	b.WriteString("    default_backend app\nbackend app\n    server s1 10.0.0.1:80\n")
	_, err := translateK(t, b.String())
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != maxRefusalsShown+1 || lines[maxRefusalsShown] != "… and 5 more refused lines" {
		t.Errorf("%d lines, the last %q; want %d and the count of the rest", len(lines), lines[len(lines)-1], maxRefusalsShown+1)
	}
}
