package caddymodule

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// A bind with one crt file, several, or a directory of them, through
// HAProxy 2.6 and caddy-ha: the client's SNI picks the certificate, and a
// client whose SNI names none, or that sends none, gets HAProxy's default
// certificate, the first crt's (the first file's of a directory), from
// both; of several files, caddy-ha serves it one of the bind's (Caddy picks
// among a site's tls files in no set order where no name matches: a
// documented difference). Before, a directory's failed those handshakes.
func TestHAProxyDifferentialBindCertificates(t *testing.T) {
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var crts []string
	for _, name := range []string{"a.example", "b.example"} {
		_, pemBytes, err := ca.Issue(name)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".pem")
		if err := os.WriteFile(f, pemBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		crts = append(crts, f)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	app := startAppServer(t)
	for _, tt := range []struct {
		name, crt string
		names     []string // of the bind's certificates, HAProxy's default first
		anyOf     bool     // caddy-ha serves one of them where no name matches
	}{
		{"one file", "crt " + crts[1], []string{"b.example"}, false},
		{"files", "crt " + crts[0] + " crt " + crts[1], []string{"a.example", "b.example"}, true},
		{"directory", "crt " + dir, []string{"a.example", "b.example"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			cfg := "defaults\n\tmode http\n\ttimeout connect 2s\n\ttimeout client 10s\n\ttimeout server 10s\n" +
				"frontend web\n\tbind " + hapAddr + " ssl " + tt.crt + "\n\tdefault_backend app\nbackend app\n\tserver app1 " + app.addr + "\n"
			startHAProxy(t, cfg, hapAddr)
			runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
			for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
				for _, sni := range []string{"a.example", "b.example", "other.example", ""} {
					want := []string{sni}
					if !slices.Contains(tt.names, sni) {
						want = tt.names[:1] // HAProxy's default certificate
						if p.name == "caddy-ha" && tt.anyOf {
							want = tt.names
						}
					}
					// The name is checked here, not by the handshake: an
					// unknown SNI gets a certificate for another name.
					conn, err := tls.Dial("tcp", p.addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
					if err != nil {
						t.Errorf("%s, SNI %q: %v", p.name, sni, err)
						continue
					}
					got := conn.ConnectionState().PeerCertificates[0]
					conn.Close()
					if _, err := got.Verify(x509.VerifyOptions{Roots: pool}); err != nil || !slices.ContainsFunc(want, func(n string) bool { return slices.Contains(got.DNSNames, n) }) {
						t.Errorf("%s, SNI %q: the certificate of %v (%v), want one of %v", p.name, sni, got.DNSNames, err, want)
					}
				}
			}
		})
	}
}

// haproxy/testdata/https-redirect.cfg through HAProxy 2.6 and caddy-ha:
// one frontend on HTTP and HTTPS (two Caddy sites importing one snippet),
// a plain HTTP request redirected to HTTPS unless { ssl_fc } or an ACME
// challenge, the challenge over HTTP to certbot, what comes over TLS to
// the app (use_backend app if tls, acl tls ssl_fc): the same status,
// Location and backend from both.
func TestHAProxyDifferentialHTTPSRedirect(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/https-redirect.cfg")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, pemBytes, err := ca.Issue("www.example")
	if err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(crt, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	app, certbot := startAppServer(t), startAppServer(t)
	hap := [2]string{loopback.FreeAddr(), loopback.FreeAddr()}
	cdy := [2]string{loopback.FreeAddr(), loopback.FreeAddr()}
	cfg := strings.NewReplacer("127.0.0.1:9001", app.addr, "127.0.0.1:9002", certbot.addr, "/etc/haproxy/site.pem", crt,
		"127.0.0.1:8080", hap[0], "127.0.0.1:8443", hap[1]).Replace(string(text))
	startHAProxy(t, cfg, hap[1])
	runHAProxyConfig(t, strings.NewReplacer(hap[0], cdy[0], hap[1], cdy[1]).Replace(cfg))

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "www.example"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type result struct {
		status   int
		location string
		backend  string // "app", "certbot" or "" for none
	}
	for i, tt := range []struct {
		tls  bool
		path string
		want result
	}{
		{false, "/page?x=1", result{301, "https://www.example/page?x=1", ""}},
		{false, "/.well-known/acme-challenge/tok", result{200, "", "certbot"}},
		{true, "/page?x=1", result{200, "", "app"}},
		{true, "/.well-known/acme-challenge/tok", result{200, "", "app"}},
	} {
		for _, p := range []struct {
			name  string
			addrs [2]string
		}{{"haproxy", hap}, {"caddy-ha", cdy}} {
			url := "http://" + p.addrs[0] + tt.path
			if tt.tls {
				url = "https://" + p.addrs[1] + tt.path
			}
			name := fmt.Sprintf("%s-%d", p.name, i)
			req, _ := http.NewRequest("GET", url, nil)
			req.Host = "www.example"
			req.Header.Set("X-Client", name)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", p.name, url, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := result{resp.StatusCode, resp.Header.Get("Location"), ""}
			switch {
			case app.heardFrom(name) > 0 && certbot.heardFrom(name) == 0:
				got.backend = "app"
			case certbot.heardFrom(name) > 0 && app.heardFrom(name) == 0:
				got.backend = "certbot"
			case app.heardFrom(name) > 0:
				got.backend = "both"
			}
			if got != tt.want {
				t.Errorf("%s: %s: %+v, want %+v", p.name, url, got, tt.want)
			}
		}
	}
}

// option forwardfor, through HAProxy 2.6 and caddy-ha: the node sees what
// the client sent in the header, then the client's address after it, and
// no other X-Forwarded-* (before, the translation of header X-Client-IP sent
// X-Forwarded-For and no X-Client-IP, and that of plain forwardfor dropped
// the client's X-Forwarded-For). HAProxy adds a header line, reverse_proxy
// folds both into one: the same list. Issue 28: a backend's own option
// adds it to the requests that backend gets; except <network> adds none
// for a client of that network (the test's clients are on 127.0.0.1),
// if-none none to a request that has one: the node sees the request's as
// it was sent, or none (these were refused).
func TestHAProxyDifferentialForwardFor(t *testing.T) {
	const client = "127.0.0.1"
	for _, tt := range []struct {
		frontend, backend, header string
		added                     bool // the client's address added to a request that has the header
		addedToNone               bool // to one that has none
	}{
		{"option forwardfor header X-Client-IP", "", "X-Client-IP", true, true},
		{"option forwardfor", "", "X-Forwarded-For", true, true},
		{"", "option forwardfor", "X-Forwarded-For", true, true},
		{"option forwardfor except 127.0.0.0/8", "", "X-Forwarded-For", false, false},
		{"option forwardfor except 10.0.0.0/8", "", "X-Forwarded-For", true, true},
		{"option forwardfor if-none", "", "X-Forwarded-For", false, true},
		{"", "option forwardfor except 127.0.0.1 if-none", "X-Forwarded-For", false, false},
		{"option forwardfor if-none", "option forwardfor", "X-Forwarded-For", true, true},
	} {
		t.Run(tt.frontend+"/"+tt.backend, func(t *testing.T) {
			seen := make(chan http.Header, 4)
			app := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Clone()
				io.WriteString(w, "app")
			}))
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			cfg := "defaults\n\tmode http\n\ttimeout connect 2s\n\ttimeout client 10s\n\ttimeout server 10s\n" +
				"frontend web\n\tbind " + hapAddr + "\n\t" + tt.frontend + "\n\tdefault_backend app\n" +
				"backend app\n\tserver app1 " + app + "\n\t" + tt.backend + "\n"
			startHAProxy(t, cfg, hapAddr)
			runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
			for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
				for _, sent := range []string{"203.0.113.7", ""} {
					req, _ := http.NewRequest("GET", "http://"+p.addr+"/", nil)
					want := ""
					if sent != "" {
						req.Header.Set(tt.header, sent)
						want = sent
					}
					if sent != "" && tt.added {
						want += ", " + client
					} else if sent == "" && tt.addedToNone {
						want = client
					}
					resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
					if err != nil {
						t.Fatalf("%s: %v", p.name, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					h := <-seen
					if got := strings.Join(h.Values(tt.header), ", "); got != want || (want == "") != (h.Values(tt.header) == nil) {
						t.Errorf("%s, the client sending %q: the node saw %s %q, want %q", p.name, sent, tt.header, h.Values(tt.header), want)
					}
					for _, other := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
						if other != tt.header && h.Values(other) != nil {
							t.Errorf("%s: the node saw %s %q, want none", p.name, other, h.Values(other))
						}
					}
				}
			}
		})
	}
}

// httptestServer serves h on a loopback address until the test ends.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// ssl-default-bind-options no-tls-tickets, through HAProxy 2.6 and
// caddy-ha: no TLS 1.2 session resumes through either (HAProxy issues no
// ticket; the adapter's JSON turns Caddy's off, which its Caddyfile cannot
// say), where both resume one without the option. A TLS 1.3 session
// resumes through HAProxy (OpenSSL's stateful tickets), not through
// caddy-ha (Go's TLS keeps no session): the warning's difference.
func TestHAProxyDifferentialNoTLSTickets(t *testing.T) {
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, pemBytes, err := ca.Issue("site.example")
	if err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(crt, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	app := startAppServer(t)
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-tls-tickets %v", off), func(t *testing.T) {
			options := "ssl-min-ver TLSv1.2"
			if off {
				options += " no-tls-tickets"
			}
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			cfg := "global\n\tssl-default-bind-options " + options + "\ndefaults\n\tmode http\n\ttimeout connect 2s\n\ttimeout client 10s\n\ttimeout server 10s\n" +
				"frontend web\n\tbind " + hapAddr + " ssl crt " + crt + "\n\tdefault_backend app\nbackend app\n\tserver app1 " + app.addr + "\n"
			startHAProxy(t, cfg, hapAddr)
			_, text, warnings := runHAProxyConfigWarned(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
			if said := strings.Contains(text, "apps.tls.session_tickets.disabled"); said != off {
				t.Errorf("the Caddyfile says the JSON turns tickets off: %v", said)
			}
			if warned := slices.ContainsFunc(warnings, func(w caddyconfig.Warning) bool {
				return strings.Contains(w.Message, "Go's TLS then resumes no session")
			}); warned != off {
				t.Errorf("warned of the resumption: %v (%v)", warned, warnings)
			}
			for _, v := range []struct {
				name                  string
				version               uint16
				haproxyResumes, caddy bool
			}{
				{"TLS 1.2", tls.VersionTLS12, !off, !off},
				{"TLS 1.3", tls.VersionTLS13, true, !off},
			} {
				if got := resumesSession(t, hapAddr, v.version, pool); got != v.haproxyResumes {
					t.Errorf("haproxy, %s: the second connection resumed the session: %v, want %v", v.name, got, v.haproxyResumes)
				}
				if got := resumesSession(t, caddyAddr, v.version, pool); got != v.caddy {
					t.Errorf("caddy-ha, %s: the second connection resumed the session: %v, want %v", v.name, got, v.caddy)
				}
			}
		})
	}
}

// resumesSession tells whether a client that keeps its sessions (Go's:
// tickets only) resumes on its second connection to addr: each sends a
// request and reads the answer, after which TLS 1.3's tickets come.
func resumesSession(t *testing.T, addr string, version uint16, pool *x509.CertPool) bool {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		ServerName: "site.example", RootCAs: pool, MinVersion: version, MaxVersion: version,
		ClientSessionCache: tls.NewLRUClientSessionCache(4),
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resumed := false
	for range 2 {
		resp, err := client.Get("https://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // the answer read to its end, for TLS 1.3's tickets
		resp.Body.Close()
		resumed = resp.TLS.DidResume
	}
	return resumed
}

// haproxy/testdata/tls-samples.cfg's samples: the version and suite each
// client negotiated reach the server by OpenSSL's names through HAProxy
// 2.6 and caddy-ha alike (ssl_fc_cipher's map), for each suite both
// negotiate with an ECDSA certificate over TLS 1.2, and over TLS 1.3 the
// suite the client got (HAProxy and Go choose it by their own orders: the
// warning's difference); nothing over plain HTTP.
func TestHAProxyDifferentialTLSSamples(t *testing.T) {
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, pemBytes, err := ca.Issue("site.example")
	if err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(crt, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	app := startRecordingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	text, err := os.ReadFile("../haproxy/testdata/tls-samples.cfg")
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string][2]string{}
	for _, proxy := range []string{"haproxy", "caddy-ha"} {
		plain, tlsAddr := loopback.FreeAddr(), loopback.FreeAddr()
		addrs[proxy] = [2]string{plain, tlsAddr}
		cfg := strings.NewReplacer("127.0.0.1:8080", plain, "127.0.0.1:8443", tlsAddr, "/etc/haproxy/certs/site.pem", crt, "127.0.0.1:9001", app.addr).Replace(string(text))
		if proxy == "haproxy" {
			startHAProxy(t, cfg, plain, tlsAddr)
		} else {
			runHAProxyConfig(t, cfg)
		}
	}
	for i, c := range []struct {
		version          uint16
		suite            uint16 // 0: the version's own choice
		protocol, cipher string
	}{
		{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"},
		{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384"},
		{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, "TLSv1.2", "ECDHE-ECDSA-CHACHA20-POLY1305"},
		{tls.VersionTLS13, 0, "TLSv1.3", ""},
		{0, 0, "", ""},
	} {
		for _, proxy := range []string{"haproxy", "caddy-ha"} {
			name := fmt.Sprintf("%s-%d", proxy, i)
			url := "http://" + addrs[proxy][0] + "/"
			tr := &http.Transport{}
			if c.version != 0 {
				url = "https://" + addrs[proxy][1] + "/"
				tr.TLSClientConfig = &tls.Config{ServerName: "site.example", RootCAs: pool, MinVersion: c.version, MaxVersion: c.version}
				if c.suite != 0 {
					tr.TLSClientConfig.CipherSuites = []uint16{c.suite}
				}
			}
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Client", name)
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			resp.Body.Close()
			tr.CloseIdleConnections()
			want := [2]string{c.protocol, c.cipher}
			if c.version == tls.VersionTLS13 {
				want[1] = tls.CipherSuiteName(resp.TLS.CipherSuite) // OpenSSL's TLS 1.3 names are IANA's, as Go's
			}
			h := app.header(name)
			if got := [2]string{h.Get("X-SSL-Protocol"), h.Get("X-SSL-Cipher")}; got != want {
				t.Errorf("%s: the server saw X-SSL-Protocol and X-SSL-Cipher %q, want %q", name, got, want)
			}
		}
	}
}
