package main

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-ha/caddy-ha"
)

// The seed contenders' Caddyfiles adapt, without warnings, to the seed's
// deployment: seed leases (the default), seed-counted does not.
func TestSeedConfigsAdapt(t *testing.T) {
	redisAddr := "127.0.0.1:6379"
	for _, c := range []struct {
		name     string
		leasesOn bool
		config   func(listen, admin, backend string) string
	}{
		{"seed", true, seedConfig(&redisAddr, "")},
		{"seed-counted", false, seedConfig(&redisAddr, "\t\tleases off\n")},
	} {
		text := c.config("127.0.0.1:8080", "off", "127.0.0.1:9001")
		out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
		if err != nil || len(warnings) > 0 {
			t.Fatalf("%s: %v, warnings %v:\n%s", c.name, err, warnings, text)
		}
		js := string(out)
		for _, want := range []string{`"handler":"forwarded"`, `"handler":"edge_rate_limit"`, `"policy":"leader"`,
			`"protocol":"pinned"`, `"wrapper":"reload_handoff"`, `"protocols":["h1"]`, `"backend":"redis"`} {
			if !strings.Contains(js, want) {
				t.Errorf("%s: no %s in\n%s", c.name, want, js)
			}
		}
		if got := !strings.Contains(js, `"no_leases":true`); got != c.leasesOn {
			t.Errorf("%s: leases on = %v, want %v", c.name, got, c.leasesOn)
		}
	}
}
