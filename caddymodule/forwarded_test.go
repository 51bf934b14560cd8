package caddymodule

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-ha/caddy-ha/forwarded"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
)

// echoBackend answers every request with the forwarded headers it got, as
// JSON, and /healthz/leader as the cluster's leader would.
func echoBackend(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz/leader" {
			fmt.Fprintf(w, `{"status":"leader","nodeId":"echo","leaseExpiresAt":%q,"leaseEpoch":1,"lastRenewAt":%q}`,
				time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
			return
		}
		got := map[string][]string{}
		for k, v := range r.Header {
			got[k] = v
		}
		got["Host"] = []string{r.Host}
		json.NewEncoder(w).Encode(got)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawRequest sends head (request line and headers, without the final empty
// line) as written, and returns what the backend echoed, or the status when
// Caddy refused the request.
func rawRequest(t testing.TB, addr, head string) (map[string][]string, int) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, head+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, resp.StatusCode
	}
	var got map[string][]string
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for k, v := range resp.Header { // what Caddy put in the response, for placeholders
		if strings.HasPrefix(k, "X-Seen-") {
			got[k] = v
		}
	}
	return got, 200
}

// spoofAttempt is what a client may send to pass for someone else, and
// what the same headers say when a trusted proxy sends them.
type spoofAttempt struct {
	headers string
	// The client they resolve to from a trusted peer, with inbound
	// x-forwarded and with inbound forwarded.
	xForwarded, forwarded resolved
	// What Caddy answers instead of passing the request on, whoever
	// sends it; 0 passes it on.
	status int
}

// resolved is a client and the scheme and host it used; an empty field is
// the peer's own: 127.0.0.1, http and the site's address.
type resolved struct{ client, proto, host string }

var spoofAttempts = map[string]spoofAttempt{
	"forwarded for internal": {headers: "Forwarded: for=10.0.0.1;proto=https;host=admin.internal",
		forwarded: resolved{"10.0.0.1", "https", "admin.internal"}},
	"forwarded v6 and by": {headers: "Forwarded: for=\"[2001:db8::1]:443\";by=10.0.0.2, for=192.168.1.1",
		forwarded: resolved{client: "192.168.1.1"}},
	"forwarded lowercase":  {headers: "forwarded: for=10.0.0.1", forwarded: resolved{client: "10.0.0.1"}},
	"forwarded obfuscated": {headers: "Forwarded: for=_hidden;proto=https", forwarded: resolved{proto: "https"}}, // reported by the peer
	"forwarded v6 zone":    {headers: "Forwarded: for=\"[fe80::1%eth0]\""},
	"xff one":              {headers: "X-Forwarded-For: 10.0.0.1", xForwarded: resolved{client: "10.0.0.1"}},
	"xff two lines":        {headers: "X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3", xForwarded: resolved{client: "10.0.0.3"}},
	"xff mixed case":       {headers: "x-FORWARDED-for: 10.0.0.1\r\nX-Forwarded-FOR: 10.0.0.2", xForwarded: resolved{client: "10.0.0.2"}},
	"xff v6 zone":          {headers: "X-Forwarded-For: fe80::1%eth0"},
	// Over the parser's limits, but under the server's (Caddy's
	// max_header_size, 16 KiB by default), so the handler reads them.
	"xff over the byte limit": {headers: "X-Forwarded-For: 203.0.113.9," + strings.Repeat(" ", forwarded.MaxHeaderBytes) + "198.51.100.7"},
	"xff over the hop limit":  {headers: "X-Forwarded-For: " + strings.Repeat("203.0.113.9, ", forwarded.MaxHops) + "198.51.100.7"},
	"xff over the server's limit": {headers: "X-Forwarded-For: 203.0.113.9," + strings.Repeat(" ", 64<<10) + "198.51.100.7",
		status: http.StatusRequestHeaderFieldsTooLarge},
	"xff garbage": {headers: "X-Forwarded-For: 10.0.0.1, <script>, 10.0.0.2"},
	"proto and host": {headers: "X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example",
		xForwarded: resolved{proto: "https", host: "evil.example"}},
	"proto two values": {headers: "X-Forwarded-Proto: http\r\nX-Forwarded-Proto: https"},
	"real ip":          {headers: "X-Real-IP: 10.0.0.1"},
	"cf connecting ip": {headers: "CF-Connecting-IP: 10.0.0.1"},
	"other client headers": {headers: "True-Client-IP: 10.0.0.1\r\nX-Client-IP: 10.0.0.1\r\nX-Forwarded-Port: 443\r\nClient-IP: 10.0.0.1\r\n" +
		"X-Cluster-Client-IP: 10.0.0.1\r\nX-Forwarded: for=10.0.0.1\r\nX-Forwarded-Server: admin.internal"},
	"everything": {headers: "Forwarded: for=10.0.0.1\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\nX-Real-IP: 10.0.0.1\r\nCF-Connecting-IP: 10.0.0.1",
		xForwarded: resolved{"10.0.0.1", "https", "evil.example"}, forwarded: resolved{client: "10.0.0.1"}},
	"injected line in value":   {headers: "X-Forwarded-For: 10.0.0.1\r\n X-Real-IP: 10.0.0.9"}, // obs-fold
	"injected nul":             {headers: "X-Forwarded-For: 10.0.0.1\x00, 10.0.0.2", status: http.StatusBadRequest},
	"percent encoded":          {headers: "X-Forwarded-For: 10%2e0.0.1"},
	"forwarded quoted escapes": {headers: "Forwarded: for=\"10.0.0.1\\\"\";host=\"a\\\\b\""},
}

// echoSite is the forwarded handler with options in front of the echo
// backend, with the placeholders it sets copied into the response.
func echoSite(backend, options string) string {
	return `forwarded {
		` + options + `
	}
	reverse_proxy ` + backend + ` {
		header_down X-Seen-Client {http.forwarded.client_ip}
		header_down X-Seen-Proto {http.forwarded.proto}
		header_down X-Seen-Host {http.forwarded.host}
		header_down X-Seen-Caddy-Client {client_ip}
	}`
}

// sendSpoofAttempts sends each attempt to tc and checks that the backend and
// the placeholders got the client wantFor says, and nothing else.
func sendSpoofAttempts(t *testing.T, tc *testCaddy, wantFor func(spoofAttempt) resolved) {
	t.Helper()
	for name, attempt := range spoofAttempts {
		got, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\n"+attempt.headers)
		switch want := cmp.Or(attempt.status, http.StatusOK); {
		case status != want:
			t.Errorf("%s: status %d, want %d", name, status, want)
		case status == http.StatusOK:
			checkResolved(t, name, tc.addr, got, wantFor(attempt))
		}
	}
}

// checkResolved fails t unless the backend got one consistent set naming
// want, the placeholders say the same, and no other header names a client.
func checkResolved(t *testing.T, name, site string, got map[string][]string, want resolved) {
	t.Helper()
	client, proto, host := cmp.Or(want.client, "127.0.0.1"), cmp.Or(want.proto, "http"), cmp.Or(want.host, site)
	for k, v := range map[string]string{
		"X-Forwarded-For": client, "X-Forwarded-Proto": proto, "X-Forwarded-Host": host,
		"X-Seen-Client": client, "X-Seen-Caddy-Client": client, "X-Seen-Proto": proto, "X-Seen-Host": host,
	} {
		if g := got[k]; len(g) != 1 || g[0] != v {
			t.Errorf("%s: %s %q, want %q", name, k, g, v)
		}
	}
	for _, k := range []string{"Forwarded", "X-Real-Ip", "Cf-Connecting-Ip", "True-Client-Ip", "X-Client-Ip", "X-Forwarded-Port",
		"Client-Ip", "X-Cluster-Client-Ip", "X-Forwarded", "X-Forwarded-Server"} {
		if g, ok := got[k]; ok {
			t.Errorf("%s: the backend got %s %q", name, k, g)
		}
	}
}

// From a peer that is not trusted, nothing the client says about who it is
// reaches the backend: it sees the peer, the connection's scheme and Host.
func TestForwardedUntrustedPeerSpoofing(t *testing.T) {
	tc := startCaddy(t, nil, "", echoSite(echoBackend(t), ""))
	sendSpoofAttempts(t, tc, func(spoofAttempt) resolved { return resolved{} })
}

// The headers by which a proxy in front tells how it rewrote the path reach
// the backend from a trusted peer only: from a client they would choose the
// path the backend authorizes (ASP.NET Core's PathBase, IIS's rewrite).
func TestForwardedRewriteHeadersOnlyFromTrustedPeers(t *testing.T) {
	backend := echoBackend(t)
	const headers = "X-Forwarded-Prefix: /admin\r\nX-Original-URL: /admin/users\r\nX-Rewrite-URL: /admin/users"
	for _, tt := range []struct {
		name, global string
		want         bool
	}{
		{"untrusted", "", false},
		{"trusted", "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCaddy(t, nil, tt.global, echoSite(backend, ""))
			got, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\n"+headers)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			for _, k := range []string{"X-Forwarded-Prefix", "X-Original-Url", "X-Rewrite-Url"} {
				if _, ok := got[k]; ok != tt.want {
					t.Errorf("backend got %s: %v (%q), want %v", k, ok, got[k], tt.want)
				}
			}
		})
	}
}

// From a trusted peer the same headers resolve to the right client: the
// kind the handler reads, whole and well-formed, is believed, and anything
// else is not.
func TestForwardedTrustedPeerSpoofing(t *testing.T) {
	backend := echoBackend(t)
	for _, inbound := range []string{"x-forwarded", "forwarded"} {
		t.Run(inbound, func(t *testing.T) {
			tc := startCaddy(t, nil, "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", echoSite(backend, "inbound "+inbound))
			sendSpoofAttempts(t, tc, func(a spoofAttempt) resolved {
				if inbound == "forwarded" {
					return a.forwarded
				}
				return a.xForwarded
			})
		})
	}
}

// From trusted peers the right client is resolved, and the backend gets one
// consistent set that reverse_proxy did not undo.
func TestForwardedTrustedPeer(t *testing.T) {
	backend := echoBackend(t)
	for _, tt := range []struct {
		name, handler, headers string
		want                   map[string]string // "-" = absent
	}{
		{"xff walks to the first untrusted", "", "X-Forwarded-For: 203.0.113.9, 198.51.100.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: app.example.com",
			map[string]string{"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "app.example.com",
				"X-Seen-Client": "198.51.100.7", "X-Seen-Caddy-Client": "198.51.100.7", "X-Seen-Proto": "https", "X-Seen-Host": "app.example.com"}},
		{"own ranges extend the server's", "trusted_proxies static 10.0.0.0/8", "X-Forwarded-For: 203.0.113.9, 10.0.0.5",
			map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Seen-Client": "203.0.113.9"}},
		{"spoofed left entries are ignored", "", "X-Forwarded-For: 10.0.0.1, 127.0.0.1, 198.51.100.7",
			map[string]string{"X-Forwarded-For": "198.51.100.7"}},
		{"several lines are one list", "", "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-For: 198.51.100.7",
			map[string]string{"X-Forwarded-For": "198.51.100.7"}},
		{"malformed: none believed", "", "X-Forwarded-For: 203.0.113.9, garbage\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: app.example.com",
			map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "{addr}",
				"X-Seen-Client": "127.0.0.1", "X-Seen-Proto": "http", "X-Seen-Host": "{addr}"}},
		{"zone: none believed", "", "X-Forwarded-For: fe80::1%eth0",
			map[string]string{"X-Forwarded-For": "127.0.0.1"}},
		{"forced https", "proto https", "X-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Proto: http",
			map[string]string{"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "https", "X-Seen-Proto": "https"}},
		{"keep chain", "keep_chain", "X-Forwarded-For: 203.0.113.9, 198.51.100.7",
			map[string]string{"X-Forwarded-For": "198.51.100.7, 127.0.0.1"}},
		{"rfc 7239 inbound", "inbound forwarded", "Forwarded: for=203.0.113.9;proto=http, for=\"[2001:db8::7]:4711\";proto=https;host=app.example.com\r\nX-Forwarded-For: 10.9.9.9",
			map[string]string{"X-Forwarded-For": "2001:db8::7", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "app.example.com",
				"X-Seen-Client": "2001:db8::7", "X-Seen-Proto": "https", "X-Seen-Host": "app.example.com"}},
		{"rfc 7239 emitted", "emit_forwarded\n\t\tby _caddy", "X-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Proto: https",
			map[string]string{"Forwarded": `for=198.51.100.7;by=_caddy;proto=https;host="{addr}"`}},
		// A client that is not an IP is the trusted proxy that reported
		// it, in every header, placeholder and Caddy's client IP alike.
		{"unknown client: the proxy that reported it", "trusted_proxies static 10.0.0.0/8\n\t\temit_forwarded", "X-Forwarded-For: 203.0.113.9, unknown, 10.0.0.2",
			map[string]string{"X-Forwarded-For": "10.0.0.2", "Forwarded": `for=10.0.0.2;proto=http;host="{addr}"`,
				"X-Seen-Client": "10.0.0.2", "X-Seen-Caddy-Client": "10.0.0.2"}},
		{"obfuscated client: the proxy that reported it", "inbound forwarded\n\t\ttrusted_proxies static 10.0.0.0/8\n\t\temit_forwarded", "Forwarded: for=_hidden;proto=https, for=10.0.0.2",
			map[string]string{"X-Forwarded-For": "10.0.0.2", "X-Forwarded-Proto": "https", "Forwarded": `for=10.0.0.2;proto=https;host="{addr}"`,
				"X-Seen-Client": "10.0.0.2", "X-Seen-Caddy-Client": "10.0.0.2", "X-Seen-Proto": "https"}},
		{"unknown client: a kept chain starts at the proxy that reported it", "trusted_proxies static 10.0.0.0/8\n\t\tkeep_chain", "X-Forwarded-For: unknown, 10.0.0.2",
			map[string]string{"X-Forwarded-For": "10.0.0.2, 127.0.0.1", "X-Seen-Client": "10.0.0.2", "X-Seen-Caddy-Client": "10.0.0.2"}},
		{"real ip from a trusted peer is dropped too", "", "X-Real-IP: 10.0.0.1\r\nX-Forwarded-For: 198.51.100.7",
			map[string]string{"X-Real-Ip": "-", "X-Forwarded-For": "198.51.100.7"}},
		{"cf-connecting-ip only from cloudflare", "", "CF-Connecting-IP: 198.51.100.99\r\nX-Forwarded-For: 198.51.100.7",
			map[string]string{"X-Forwarded-For": "198.51.100.7", "Cf-Connecting-Ip": "-"}},
		{"cf-connecting-ip from cloudflare", "cloudflare static 127.0.0.1/32", "CF-Connecting-IP: 198.51.100.99\r\nX-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Proto: https",
			map[string]string{"X-Forwarded-For": "198.51.100.99", "X-Forwarded-Proto": "https", "Cf-Connecting-Ip": "-",
				"X-Seen-Client": "198.51.100.99", "X-Seen-Proto": "https"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCaddy(t, nil, "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", echoSite(backend, tt.handler))
			got, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\n"+tt.headers)
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			for k, v := range tt.want {
				g, ok := got[k]
				switch {
				case v == "-" && ok:
					t.Errorf("the backend got %s %q", k, g)
				case v != "-" && (len(g) != 1 || g[0] != strings.ReplaceAll(v, "{addr}", tc.addr)):
					t.Errorf("the backend got %s %q, want %q", k, g, v)
				}
			}
		})
	}
}

// The server's trusted_proxies are trusted beyond the peer: the same
// ranges, read from the server, with none of the handler's own.
func TestForwardedServerTrustedProxies(t *testing.T) {
	tc := startCaddy(t, nil, "servers {\n\t\ttrusted_proxies static 127.0.0.1/32 10.0.0.0/8\n\t}", echoSite(echoBackend(t), ""))
	got, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\nX-Forwarded-For: 203.0.113.9, 10.0.0.5")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	// With only the server's verdict on the peer, the client would be
	// 10.0.0.5.
	checkResolved(t, "through 10.0.0.5", tc.addr, got, resolved{client: "203.0.113.9"})

	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		t.Fatal(err)
	}
	for name, srv := range app.(*caddyhttp.App).Servers {
		src, ok := trustedProxiesOf(srv)
		if !ok || src == nil {
			t.Fatalf("server %s: trusted_proxies %v, %v", name, src, ok)
		}
		if got := fmt.Sprint(src.GetIPRanges(nil)); got != "[127.0.0.1/32 10.0.0.0/8]" {
			t.Errorf("server %s: trusted_proxies %s", name, got)
		}
	}
	if src, ok := trustedProxiesOf(new(caddyhttp.Server)); !ok || src != nil {
		t.Errorf("a server without trusted_proxies: %v, %v; want none, read", src, ok)
	}
}

// edge_rate_limit keyed on the client IP counts the resolved clients.
func TestForwardedClientKeysRateLimits(t *testing.T) {
	backend := echoBackend(t)
	tc := startCaddy(t, nil, "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", `forwarded
	edge_rate_limit {
		zone perclient {
			key {client_ip}
			events 1
			window 1h
		}
	}
	reverse_proxy `+backend)
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	for i, tt := range []struct {
		client string
		want   int
	}{{"198.51.100.1", 200}, {"198.51.100.2", 200}, {"198.51.100.1", 429}} {
		if _, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\nX-Forwarded-For: "+tt.client); status != tt.want {
			t.Fatalf("request %d from %s: %d, want %d", i, tt.client, status, tt.want)
		}
	}
}

// Caddyfile.example's frontend does what the cluster's HAProxy frontend does:
// del-header Forwarded, X-Forwarded-For and X-Forwarded-Proto, forwardfor,
// and X-Forwarded-Proto https. The example runs here as written, with
// loopback addresses and no TLS.
func TestCaddyfileExampleFrontend(t *testing.T) {
	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	backend := echoBackend(t)
	redisSrv := redistest.Start(t)
	// The status page's password, as caddy hash-password makes it.
	hash, err := bcrypt.GenerateFromPassword([]byte("ops-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HA_STATUS_PASSWORD_HASH", string(hash))
	// exampleOn returns the example with loopback addresses for its sites.
	exampleOn := func(site, admin, files, statusPage string) string {
		text := string(example)
		for _, r := range []struct{ old, new string }{
			{"{\n\t# No HAProxy equivalent", "{\n\tadmin " + admin + "\n\tpersist_config off\n\t# No HAProxy equivalent"},
			{"address 10.0.1.20:6379", "address " + redisSrv.Addr},
			{"nodepilot.example.com {", "http://" + site + " {"},
			{"\ttls /etc/ssl/nodepilot.crt /etc/ssl/nodepilot.key\n", ""},
			{"reverse_proxy 10.0.1.10:443 10.0.1.11:443 {", "reverse_proxy " + backend + " " + loopback.FreeAddr() + " {"},
			{"files.example.com {", "http://" + files + " {"},
			{"\ttls /etc/ssl/files.crt /etc/ssl/files.key\n", ""},
			{"reverse_proxy 10.0.2.10:8080 10.0.2.11:8080 10.0.2.12:8080 {", "reverse_proxy " + backend + " {"},
			{"http://10.0.1.5:8404 {", "http://" + statusPage + " {"},
		} {
			if !strings.Contains(text, r.old) {
				t.Fatalf("Caddyfile.example no longer has %q", r.old)
			}
			text = strings.Replace(text, r.old, r.new, 1)
		}
		// The backends' TLS settings: this backend speaks plain HTTP.
		start := strings.Index(text, "\t\ttransport pinned {")
		end := strings.Index(text[start:], "\n\t\t}\n") + start + len("\n\t\t}\n")
		return text[:start] + "\t\ttransport pinned\n" + text[end:]
	}
	var site, statusPage string
	onFreePorts(t, func() error {
		site, statusPage = loopback.FreeAddr(), loopback.FreeAddr()
		text := exampleOn(site, loopback.FreeAddr(), loopback.FreeAddr(), statusPage)
		cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
		if err != nil {
			t.Fatalf("adapting:\n%s\n%v", text, err)
		}
		return caddy.Load(cfg, true)
	})
	t.Cleanup(func() { caddy.Stop() })
	var got map[string][]string
	poll.Until(t, 10*time.Second, "the example to route to the backend", func() bool {
		var status int
		got, status = rawRequest(t, site, "GET / HTTP/1.1\r\nHost: "+site+"\r\n"+spoofAttempts["everything"].headers)
		return status == 200
	})
	want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "https", "X-Forwarded-Host": site}
	for k, v := range want {
		if g := got[k]; len(g) != 1 || g[0] != v {
			t.Errorf("the backend got %s %q, want %q", k, g, v)
		}
	}
	for _, k := range []string{"Forwarded", "X-Real-Ip", "Cf-Connecting-Ip"} {
		if g, ok := got[k]; ok {
			t.Errorf("the backend got %s %q", k, g)
		}
	}
	// Its status page asks for the password, then shows the leader pool.
	if ans := send(t, "GET", "http://"+statusPage+"/"); ans.status != http.StatusUnauthorized {
		t.Errorf("the status page without a password: %d", ans.status)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+statusPage+"/", nil)
	req.SetBasicAuth("ops", "ops-password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `<div class="pool" data-pool="`+backend) {
		t.Errorf("the status page with the password: %d\n%s", resp.StatusCode, page)
	}
}

func TestForwardedConfig(t *testing.T) {
	// forwarded runs first, whatever its place in the site: nothing before
	// it can read what a client sent.
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`http://127.0.0.1:1 {
	map {header.Forwarded} {v} {
		default x
	}
	request_header X-A {header.X-Forwarded-For}
	forwarded
	respond ok
}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Index(string(out), `"handler":"forwarded"`)
	for _, other := range []string{`"handler":"map"`, `"handler":"headers"`} {
		if i := strings.Index(string(out), other); first < 0 || i < first {
			t.Fatalf("forwarded is not the first handler:\n%s", out)
		}
	}
	for _, tt := range []struct{ block, want string }{
		{"inbound cloudflare", "inbound must be x-forwarded or forwarded"},
		{"proto ftp", "proto must be http or https"},
		{"by 10.0.0.1:99999", "by \"10.0.0.1:99999\""},
		{"trusted_proxies nowhere", "http.ip_sources.nowhere"},
		{"keep_chain yes", "keep_chain: too many arguments"},
		{"pass_from_trusted Accept", "pass_from_trusted Accept is not a header the forwarded handler strips"},
		{"pass_from_trusted", "wrong argument count"},
		{"strip_method_overrides yes", "strip_method_overrides: too many arguments"},
		{"frobnicate", "unrecognized forwarded option 'frobnicate'"},
		{"cloudflare cloudflare_ranges {\n\t\t\tdownloads maybe\n\t\t}", "downloads must be on or off"},
		{"cloudflare cloudflare_ranges {\n\t\t\trefresh -1s\n\t\t}", "refresh must be positive"},
	} {
		cf := "http://127.0.0.1:1 {\n\tforwarded {\n\t\t" + tt.block + "\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: error %v, want %q with its line", tt.block, err, tt.want)
		}
	}
	err = caddy.Validate(mustConfig(t, `{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"forwarded","proto":"gopher"}]}]}}}}}`))
	if err == nil || !strings.Contains(err.Error(), "proto must be http or https") {
		t.Errorf("JSON with a bad proto: %v", err)
	}
}

// Issue 26.3: every header a widely used framework or proxy reads as the
// client's address, scheme, host, path or certificate (forwarded.Claims),
// forged in mixed letter case and repeated, reaches the backend from no
// untrusted peer (26 of 40 did before); method overrides pass unless
// strip_method_overrides. From a trusted peer, path and certificate claims
// pass, as docs/forwarded.md says, and what pass_from_trusted names.
func TestForwardedStripsEveryClaim(t *testing.T) {
	backend := echoBackend(t)
	var head strings.Builder
	for i, c := range forwarded.Claims {
		name := c.Header
		switch i % 3 {
		case 0:
			name = strings.ToLower(name)
		case 1:
			name = strings.ToUpper(name)
		}
		fmt.Fprintf(&head, "%s: forged-%d\r\n%s: forged-%d-again\r\n", name, i, c.Header, i)
	}
	const trusted = "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}"
	for _, tt := range []struct {
		name, global, options string
		kept                  func(forwarded.Claim) bool
	}{
		{"untrusted", "", "", func(c forwarded.Claim) bool { return c.Kind == forwarded.KindMethod }},
		{"untrusted, strip_method_overrides", "", "strip_method_overrides", func(forwarded.Claim) bool { return false }},
		{"trusted", trusted, "", func(c forwarded.Claim) bool { return c.FromTrusted() || c.Kind == forwarded.KindMethod }},
		{"trusted, pass_from_trusted", trusted, "pass_from_trusted X-Real-IP x-forwarded-ssl\n\t\tstrip_method_overrides",
			func(c forwarded.Claim) bool {
				return c.FromTrusted() || c.Header == "X-Real-IP" || c.Header == "X-Forwarded-Ssl"
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCaddy(t, nil, tt.global, echoSite(backend, tt.options))
			got, status := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\n"+strings.TrimSuffix(head.String(), "\r\n"))
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			reached := 0
			for i, c := range forwarded.Claims {
				v, ok := got[http.CanonicalHeaderKey(c.Header)]
				if ok {
					reached++
				}
				// Caddy itself drops every header named with an
				// underscore (Tomcat's SSL_CLIENT_CERT and kin) unless its
				// server's expected_underscore_headers allows it.
				switch want := tt.kept(c) && !strings.Contains(c.Header, "_"); {
				case want && !slices.Equal(v, []string{fmt.Sprint("forged-", i), fmt.Sprint("forged-", i, "-again")}):
					t.Errorf("%s (%s): the backend got %q, want both values passed", c.Header, c.Kind, v)
				case !want && ok:
					t.Errorf("%s (%s, read by %s): the backend got %q", c.Header, c.Kind, c.ReadBy, v)
				}
			}
			t.Logf("%d of %d claims reached the backend", reached, len(forwarded.Claims))
		})
	}
}
