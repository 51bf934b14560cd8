package caddymodule

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/haproxy"
	"github.com/caddy-ha/caddy-ha/internal/hadiff"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// The seed's HAProxy configuration, its addresses and files replaced by
// the test's, run by --adapter haproxy: HTTPS with the crt file (certificate
// and key in one PEM), writes to the leader over TLS verified against the
// ca-file, HTTP/1.1 to the nodes, transport pinned for http-reuse never,
// forwarded for the del-header and forwardfor lines. caddy ha migrate's
// Caddyfile adapts to the same JSON.
func TestHAProxyAdapterRunsTheSeed(t *testing.T) {
	caFile, serverTLS := testPKI(t)
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: time.Second, TLS: serverTLS}, 2)
	addr := loopback.FreeAddr()
	cfgText := seedConfig(t, c, caFile, serverTLS, addr)
	adapted, text := runHAProxyConfig(t, cfgText)
	for _, want := range []string{`"policy":"leader"`, `"host":"nodepilot.internal.example"`, `"protocol":"pinned"`,
		`"handler":"forwarded"`, `"proto":"https"`, `"protocols":["h1"]`, `"idle_timeout":60000000000`, `"disable_redirects":true`} {
		if !strings.Contains(string(adapted), want) {
			t.Errorf("the adapted config lacks %s:\n%s", want, text)
		}
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "nodepilot.internal.example"}}}
	resp, err := client.Post("https://"+addr+"/api/orders", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Node-Id") != "node-a" || resp.Proto != "HTTP/1.1" {
		t.Fatalf("status %d from %q over %s, want 200 from the leader node-a over HTTP/1.1", resp.StatusCode, resp.Header.Get("X-Node-Id"), resp.Proto)
	}
	if got := c.Node("node-a").Executed(); len(got) != 1 || got[0].Proto != "HTTP/1.1" {
		t.Fatalf("node-a executed %+v, want one write over HTTP/1.1", got)
	}
}

// seedConfig is the seed's HAProxy configuration with the test's
// addresses and files: the frontend on addr with serverTLS's certificate
// and key in one PEM file (as HAProxy's crt wants them), the cluster's
// nodes checked every 100ms and verified against caFile.
func seedConfig(t *testing.T, c *fakecluster.Cluster, caFile string, serverTLS *tls.Config, addr string) string {
	t.Helper()
	crt := filepath.Join(t.TempDir(), "nodepilot.pem")
	if err := os.WriteFile(crt, crtPEM(t, serverTLS.Certificates[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile("../haproxy/testdata/seed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("*:443", addr, "/etc/ssl/nodepilot.pem", crt, "/etc/haproxy/nodepilot-backend-ca.pem", caFile,
		"10.0.1.10:443", c.Node("node-a").Addr(), "10.0.1.11:443", c.Node("node-b").Addr(),
		"inter 5s", "inter 100ms").Replace(string(seed))
}

// runHAProxyConfig adapts an HAProxy configuration with --adapter haproxy,
// checks that caddy ha migrate's Caddyfile adapts to the same JSON, and
// runs it in this process (with an admin endpoint of the test's own) until
// the test ends. It returns the JSON and the Caddyfile.
func runHAProxyConfig(t *testing.T, cfgText string) (adapted []byte, caddyfileText string) {
	t.Helper()
	adapted, caddyfileText, warnings := runHAProxyConfigWarned(t, cfgText)
	for _, w := range warnings {
		checkKnownWarning(t, w.Message)
	}
	return adapted, caddyfileText
}

// checkKnownWarning fails the test on a warning of no known difference
// (docs/haproxy.md's table).
func checkKnownWarning(t *testing.T, msg string) {
	t.Helper()
	if !slices.ContainsFunc(knownDifferences(t), func(k hadiff.Known) bool { return strings.Contains(msg, k.Warning) }) {
		t.Fatalf("adapting: a warning of no known difference (docs/haproxy.md): %s", msg)
	}
}

// runHAProxyConfigWarned is runHAProxyConfig for a configuration the
// adapter approximates: it returns the adapter's warnings too.
func runHAProxyConfigWarned(t *testing.T, cfgText string) (adapted []byte, caddyfileText string, warnings []caddyconfig.Warning) {
	t.Helper()
	adapted, warnings, err := HAProxyAdapter{}.Adapt([]byte(cfgText), map[string]any{"filename": "haproxy.cfg"})
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	tr, err := migrate([]byte(cfgText), "haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	text := tr.Caddyfile
	viaCaddyfile := caddyfileJSON(t, tr)
	if string(adapted) != string(viaCaddyfile) {
		t.Fatalf("--adapter haproxy and caddy ha migrate's Caddyfile (with what it cannot say) differ:\n%s\n%s", adapted, viaCaddyfile)
	}
	loadAdapted(t, adapted, text)
	return adapted, text, warnings
}

// caddyfileJSON is the JSON of the translation's Caddyfile, as caddy
// adapt makes it, with what the Caddyfile cannot say (its first lines say
// so), which the adapter's JSON carries: the same as the adapter's.
func caddyfileJSON(t *testing.T, tr haproxy.Translation) []byte {
	t.Helper()
	viaCaddyfile, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(tr.Caddyfile), nil)
	if err != nil {
		t.Fatalf("caddy ha migrate's Caddyfile does not adapt: %v\n%s", err, tr.Caddyfile)
	}
	var cfg *caddy.Config
	if err := json.Unmarshal(viaCaddyfile, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := setBeyond(cfg, tr.Beyond); err != nil {
		t.Fatal(err)
	}
	if viaCaddyfile, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	return viaCaddyfile
}

// loadAdapted runs Caddy on adapted (the JSON of the Caddyfile text),
// its admin API on a free loopback port, until the test ends.
func loadAdapted(t *testing.T, adapted []byte, text string) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["admin"] = map[string]any{"listen": loopback.FreeAddr(), "config": map[string]any{"persist": false}}
	run, _ := json.Marshal(cfg)
	if err := caddy.Load(run, true); err != nil {
		t.Fatalf("loading: %v\n%s", err, text)
	}
	t.Cleanup(func() { caddy.Stop() })
}

// What is not translated is refused with the file, the line and the
// keyword, by the adapter and by caddy ha migrate alike: Caddy never starts
// without something the configuration asked for.
func TestHAProxyAdapterRefusesWithTheLine(t *testing.T) {
	seed, err := os.ReadFile("../haproxy/testdata/seed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfgText := strings.Replace(string(seed), "    default_backend nodepilot_active", "    default_backend nodepilot_active\n    backlog 100", 1)
	_, _, err = HAProxyAdapter{}.Adapt([]byte(cfgText), map[string]any{"filename": "haproxy.cfg"})
	if err == nil || !strings.Contains(err.Error(), "haproxy.cfg:15: backlog") {
		t.Fatalf("error %v, want haproxy.cfg:15: backlog …", err)
	}
	if _, err := migrate([]byte(cfgText), "haproxy.cfg"); err == nil || !strings.Contains(err.Error(), "haproxy.cfg:15: backlog") {
		t.Fatalf("migrate: error %v", err)
	}
	if _, _, err := caddyconfig.GetAdapter("haproxy").Adapt([]byte("frontend\n"), map[string]any{"filename": "x.cfg"}); err == nil ||
		!strings.HasPrefix(err.Error(), "x.cfg:1: ") {
		t.Fatalf("registered adapter: %v", err)
	}
}
