package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// An option written twice is refused at its second line, rather than the
// last one silently winning; the options meant to repeat add up.
func TestDuplicateOptions(t *testing.T) {
	adapt := func(site string) error {
		cf := "{\n\tha {\n\t\tstore memory\n\t}\n}\nhttp://127.0.0.1:1 {\n" + site + "\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		return err
	}
	for _, tt := range []struct{ name, site, want string }{
		{"leader uri", "reverse_proxy 127.0.0.1:2 {\n\tlb_policy leader {\n\t\turi /a\n\t\turi /b\n\t}\n}", "duplicate uri option, at Caddyfile:10"},
		{"zone key", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tkey j\n\t\tevents 1\n\t\twindow 1m\n\t}\n}", "duplicate key option, at Caddyfile:10"},
		{"upload ttl", "reverse_proxy 127.0.0.1:2 {\n\tlb_policy upload_affinity {\n\t\tttl 1h\n\t\tttl 2h\n\t}\n}", "duplicate ttl option, at Caddyfile:10"},
		{"forwarded proto", "forwarded {\n\tproto https\n\tproto http\n}", "duplicate proto option, at Caddyfile:9"},
		{"redis db", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tstore redis {\n\t\taddress 127.0.0.1:6379\n\t\tdb 1\n\t\tdb 2\n\t}\n}", "duplicate db option, at Caddyfile:16"},
		{"cloudflare refresh", "forwarded {\n\tcloudflare cloudflare_ranges {\n\t\trefresh 1h\n\t\trefresh 2h\n\t}\n}", "duplicate refresh option, at Caddyfile:10"},
		{"ha_status refresh", "ha_status {\n\trefresh 2s\n\trefresh 3s\n}", "duplicate refresh option, at Caddyfile:9"},
		{"pinned max_pinned", "reverse_proxy 127.0.0.1:2 {\n\ttransport pinned {\n\t\tmax_pinned 1\n\t\tmax_pinned 2\n\t}\n}", "duplicate max_pinned option, at Caddyfile:10"},
	} {
		if err := adapt(tt.site); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	for _, repeated := range []string{
		"edge_rate_limit {\n\tzone a {\n\t\tmatch {\n\t\t\tmethod POST\n\t\t}\n\t\tmatch {\n\t\t\tpath /x\n\t\t}\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tzone b {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n}",
		"reverse_proxy 127.0.0.1:2 {\n\tlb_policy leader {\n\t\tleader_paths /a/*\n\t\tleader_paths /b/*\n\t}\n}",
		"edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tstore redis {\n\t\taddress 127.0.0.1:6379\n\t\taddress 127.0.0.1:6380\n\t}\n}",
	} {
		if err := adapt(repeated); err != nil {
			t.Errorf("a repeatable option refused: %v\n%s", err, repeated)
		}
	}
}
