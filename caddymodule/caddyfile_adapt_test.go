package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestCaddyfileAdapt and TestDefaults from what the code produces")

// Each testdata/caddyfile_adapt/*.caddytest is a Caddyfile, a line of
// dashes, and the JSON it adapts to, as in caddy-l4's integration tests:
// one per module with every option, and one with every module at its
// defaults. go test -run TestCaddyfileAdapt -update rewrites the JSON.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddytest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, expected, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatalf("%s has no line of dashes", file)
			}
			caddyfile = strings.TrimSpace(caddyfile) + "\n"
			if *updateGolden {
				out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
				if err != nil {
					t.Fatal(err)
				}
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, out, "", "\t"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(caddyfile+"----------\n"+pretty.String()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !caddytest.CompareAdapt(t, file, caddyfile, "caddyfile", strings.TrimSpace(expected)) {
				t.Errorf("%s adapts to other JSON (the diff is above; -update rewrites it)", file)
			}
		})
	}
}

// testdata/defaults.json holds every module's settings after its defaults
// are set, so that a default that changes shows in a diff (the adapted
// JSON holds only what a Caddyfile writes).
func TestDefaults(t *testing.T) {
	leader, affinity, rateLimit, pinned, ha, memory, redis, postgres, cloudflare, cloudflareFile, statusPage, checked, checkedHTTP :=
		new(LeaderSelection), new(UploadAffinity), new(EdgeRateLimit), new(PinnedTransport), new(HAApp), new(MemoryStore), new(RedisStore),
		new(PostgresStore), new(CloudflareRanges), &CloudflareRanges{DisableDownloads: true}, new(HAStatus), new(CheckedUpstreams), &CheckedUpstreams{Check: "http"}
	for _, m := range []interface{ setDefaults() }{leader, affinity, rateLimit, pinned, ha, memory, redis, postgres, cloudflare, cloudflareFile, statusPage, checked, checkedHTTP} {
		m.setDefaults()
	}
	cloudflare.File = strings.Replace(cloudflare.File, caddy.AppDataDir(), "<caddy data dir>", 1)
	got, err := json.MarshalIndent(map[string]any{
		"http.reverse_proxy.selection_policies.leader":          leader,
		"http.reverse_proxy.selection_policies.upload_affinity": affinity,
		"http.handlers.edge_rate_limit":                         rateLimit,
		"http.reverse_proxy.transport.pinned":                   pinned,
		"ha":                                                    ha,
		"ha.stores.memory":                                      memory,
		"ha.stores.redis":                                       redis,
		"ha.stores.postgres":                                    postgres,
		"http.ip_sources.cloudflare_ranges":                     cloudflare,
		"http.ip_sources.cloudflare_ranges (downloads off)":     cloudflareFile,
		"http.handlers.ha_status":                               statusPage,
		"http.reverse_proxy.upstreams.checked":                  checked,
		"http.reverse_proxy.upstreams.checked (check http)":     checkedHTTP,
	}, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	const file = "testdata/defaults.json"
	if *updateGolden {
		if err := os.WriteFile(file, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got)+"\n" != string(want) {
		t.Errorf("the defaults changed (-update rewrites %s):\n%s", file, got)
	}
}
