package caddymodule

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// A zone with ipv6_prefix 64 counts every address of a /64 as one client,
// through {client_ip} resolved by Caddy's trusted_proxies; IPv4 addresses,
// IPv4-mapped ones included, and keys that are no address count whole.
func TestRateLimitIPv6Prefix(t *testing.T) {
	frozen := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	wallClock = func() time.Time { return frozen }
	t.Cleanup(func() { wallClock = time.Now })
	tc := startCaddy(t, nil, "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t\tclient_ip_headers X-Forwarded-For\n\t}", `edge_rate_limit {
		zone per-network {
			key {client_ip}
			ipv6_prefix 64
			events 2
			window 1h
		}
	}
	respond "ok"`)
	statuses := func(clients ...string) string {
		t.Helper()
		var got []string
		for _, c := range clients {
			got = append(got, fmt.Sprint(send(t, "GET", tc.url("/"), "X-Forwarded-For", c).status))
		}
		return strings.Join(got, " ")
	}
	for _, tt := range []struct{ what, got, want string }{
		{"three addresses of one /64", statuses("2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:1:2:ffff:ffff:ffff:ffff"), "200 200 429"},
		{"the next /64", statuses("2001:db8:1:3::1"), "200"},
		{"IPv4 addresses", statuses("203.0.113.7", "203.0.113.8", "203.0.113.7", "203.0.113.7"), "200 200 200 429"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %s, want %s", tt.what, tt.got, tt.want)
		}
	}
	ans := send(t, "GET", tc.url("/"), "X-Forwarded-For", "2001:db8:1:2::c")
	if ans.status != 429 || !strings.Contains(ans.header.Get("RateLimit"), `"per-network";r=0`) {
		t.Errorf("the /64 once more: %d %q, want 429 with its RateLimit field", ans.status, ans.header.Get("RateLimit"))
	}
}

func TestIPv6Network(t *testing.T) {
	for _, tt := range []struct {
		key  string
		bits int
		want string
	}{
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8::1", 128, "2001:db8::1/128"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"::ffff:203.0.113.7", 64, "::ffff:203.0.113.7"},
		{"203.0.113.7", 64, "203.0.113.7"},
		{"api:key", 64, "api:key"},
	} {
		if got := ipv6Network(tt.key, tt.bits); got != tt.want {
			t.Errorf("ipv6Network(%q, %d) = %q, want %q", tt.key, tt.bits, got, tt.want)
		}
	}
}

func TestRateLimitIPv6PrefixConfigErrors(t *testing.T) {
	zone := "edge_rate_limit {\n\tzone a {\n\t\tkey {client_ip}\n\t\tevents 1\n\t\twindow 1m\n%s\t}\n}"
	for _, tt := range []struct{ opts, want string }{
		{"\t\tipv6_prefix 129\n", "ipv6_prefix must be 1 to 128 bits"},
		{"\t\tipv6_prefix 0\n", "ipv6_prefix must be a whole number of at least 1"},
		{"\t\tipv6_prefix 64\n\t\tipv6_prefix 56\n", "duplicate ipv6_prefix option"},
	} {
		caddyfile := "http://127.0.0.1:1 {\n" + fmt.Sprintf(zone, tt.opts) + "\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: error %v, want %q with its line", caddyfile, err, tt.want)
		}
	}
}
