package caddymodule

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// recordingServer is a backend on loopback whose handler answers; what
// each request (by X-Client) carried in header is recorded.
type recordingServer struct {
	addr  string
	mu    sync.Mutex
	heard map[string]http.Header
}

func startRecordingServer(t *testing.T, answer http.HandlerFunc) *recordingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveRecording(t, ln, answer)
}

// serveRecording is a recordingServer on ln; each request's header holds
// its peer's address too, as X-Peer.
func serveRecording(t *testing.T, ln net.Listener, answer http.HandlerFunc) *recordingServer {
	s := &recordingServer{addr: ln.Addr().String(), heard: map[string]http.Header{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.heard[r.Header.Get("X-Client")] = r.Header.Clone()
		s.heard[r.Header.Get("X-Client")].Set("X-Peer", r.RemoteAddr)
		s.mu.Unlock()
		answer(w, r)
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *recordingServer) header(client string) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard[client]
}

// startBoth runs the golden configuration file on HAProxy and on caddy-ha,
// its addresses (old, new pairs) replaced; it returns both proxies'
// addresses for the one bind address bindAddr, and the adapter's warnings.
func startBoth(t *testing.T, file, bindAddr string, replace ...string) (hapAddr, caddyAddr string, warnings []string) {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	hapAddr, caddyAddr = loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer(append(replace, bindAddr, hapAddr)...).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	_, _, ws := runHAProxyConfigWarned(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	for _, w := range ws {
		warnings = append(warnings, w.Message)
	}
	return hapAddr, caddyAddr, warnings
}

// haproxy/testdata/compression.cfg: HAProxy and caddy-ha compress the same
// answers (gzip, the types listed, statuses 200 to 203, not what is
// already encoded or marked no-transform), with the backend's types over
// the frontend's, and with offload the server is not asked to compress;
// as documented, Caddy also compresses for User-Agent Mozilla/4 and marks
// a strong ETag where HAProxy makes it weak.
func TestHAProxyDifferentialCompression(t *testing.T) {
	page := strings.Repeat("<p>compress me</p>\n", 100)
	answer := func(w http.ResponseWriter, r *http.Request) {
		ct, status := "text/html; charset=utf-8", http.StatusOK
		switch {
		case strings.HasSuffix(r.URL.Path, ".css"):
			ct = "text/css"
		case strings.HasSuffix(r.URL.Path, ".json"):
			ct = "application/json"
		case strings.HasSuffix(r.URL.Path, ".bin"):
			ct = "application/octet-stream"
		case strings.HasSuffix(r.URL.Path, "/missing"):
			status = http.StatusNotFound
		case strings.HasSuffix(r.URL.Path, "/no-transform"):
			w.Header().Set("Cache-Control", "no-transform")
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(status)
		io.WriteString(w, page)
	}
	app, assets := startRecordingServer(t, answer), startRecordingServer(t, answer)
	hapAddr, caddyAddr, warnings := startBoth(t, "../haproxy/testdata/compression.cfg", "127.0.0.1:8080",
		"127.0.0.1:9001", app.addr, "127.0.0.1:9002", assets.addr)
	if len(warnings) == 0 {
		t.Error("no warning for the compression lines (an approximation)")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	for i, tt := range []struct {
		path, acceptEncoding string
		gzipped              bool
		userAgent            string // and HAProxy leaves it as it is (a documented difference)
	}{
		{"/index.html", "gzip", true, ""},
		{"/index.html", "gzip;q=0", false, ""},
		{"/index.html", "", false, ""},
		{"/index.html", "br, gzip", true, ""},
		{"/data.bin", "gzip", false, ""},
		{"/items.json", "gzip", true, ""}, // the frontend's second type line
		{"/missing", "gzip", false, ""},
		{"/no-transform", "gzip", false, ""},
		{"/assets/site.css", "gzip", true, ""},
		{"/assets/page.html", "gzip", false, ""}, // the backend's own types
		{"/index.html", "gzip", true, "Mozilla/4.0 (compatible; an old browser)"},
	} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			name := fmt.Sprintf("%s-%d", p.name, i)
			req, _ := http.NewRequest("GET", "http://"+p.addr+tt.path, nil)
			req.Header.Set("X-Client", name)
			if tt.acceptEncoding != "" {
				req.Header.Set("Accept-Encoding", tt.acceptEncoding)
			}
			want := tt.gzipped
			if tt.userAgent != "" {
				req.Header.Set("User-Agent", tt.userAgent)
				want = p.name == "caddy-ha"
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			gzipped := resp.Header.Get("Content-Encoding") == "gzip"
			if gzipped {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatalf("%s: %s: %v", name, tt.path, err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatalf("%s: %s: %v", name, tt.path, err)
				}
			}
			if gzipped != want || string(body) != page {
				t.Errorf("%s: %s with Accept-Encoding %q: gzipped %v (want %v), body intact %v", name, tt.path, tt.acceptEncoding, gzipped, want, string(body) == page)
			}
			// A strong ETag of a compressed answer: made weak by HAProxy,
			// marked by Caddy (a documented difference).
			if etag, want := resp.Header.Get("ETag"), map[string]string{"haproxy": `W/"v1"`, "caddy-ha": `"v1-gzip"`}[p.name]; gzipped && etag != want || !gzipped && etag != `"v1"` {
				t.Errorf("%s: %s: ETag %q (gzipped %v)", name, tt.path, etag, gzipped)
			}
			if gzipped && resp.Header.Get("Vary") != "Accept-Encoding" {
				t.Errorf("%s: %s: Vary %q, want Accept-Encoding", name, tt.path, resp.Header.Get("Vary"))
			}
			// compression offload: the app's server is not asked to compress.
			server, offload := assets, false
			if !strings.HasPrefix(tt.path, "/assets/") {
				server, offload = app, true
			}
			if ae := server.header(name).Get("Accept-Encoding"); offload && want && ae != "" || !offload && ae != tt.acceptEncoding {
				t.Errorf("%s: %s: the server saw Accept-Encoding %q", name, tt.path, ae)
			}
		}
	}
}

// haproxy/testdata/userlist.cfg: http-request auth unless an http_auth
// ACL holds asks both proxies for an account of the userlist (a plain
// password, a bcrypt hash), with HAProxy's 401 page and realm; the rule
// before it answers first; the server sees the client's Authorization.
func TestHAProxyDifferentialUserlist(t *testing.T) {
	checkBasicAuth(t, "../haproxy/testdata/userlist.cfg", []authCase{
		{"/", "", "", 401},
		{"/", "alice", "correct-horse-battery", 200},
		{"/", "alice", "correct-horse-batter", 401},
		{"/", "bob", "hunter2-bob", 200},
		{"/", "bob", "correct-horse-battery", 401},
		{"/", "carol", "hunter2-bob", 401},
		{"/health", "", "", 200},
	})
}

// haproxy/testdata/backend-auth.cfg: a backend's http-request auth asks
// the requests it gets for an account, after the frontend's rules and
// its own redirect, as HAProxy does.
func TestHAProxyDifferentialBackendAuth(t *testing.T) {
	checkBasicAuth(t, "../haproxy/testdata/backend-auth.cfg", []authCase{
		{"/", "", "", 401},
		{"/", "alice", "correct-horse-battery", 200},
		{"/", "alice", "correct-horse-batter", 401},
		{"/", "bob", "hunter2-bob", 200},
		{"/", "carol", "hunter2-bob", 401},
		{"/health", "", "", 200},
	})
}

// haproxy/testdata/userlist-sha.cfg: SHA-512 and SHA-256 crypt hashes,
// which HAProxy checks with crypt(3), checked alike by basic_auth_crypt.
func TestHAProxyDifferentialUserlistSHACrypt(t *testing.T) {
	checkBasicAuth(t, "../haproxy/testdata/userlist-sha.cfg", []authCase{
		{"/", "", "", 401},
		{"/", "alice", "correct-horse-battery", 200},
		{"/", "carol", "hunter2-carol", 200},
		{"/", "carol", "hunter2-caro", 401},
		{"/", "dave", "dave-pass", 200},
		{"/", "dave", "hunter2-carol", 401},
		{"/", "erin", "dave-pass", 401},
	})
}

// authCase is a request as a user (none: ""), and the status both
// proxies answer it with.
type authCase struct {
	path, user, password string
	status               int
}

// checkBasicAuth runs the configuration file (a frontend on
// 127.0.0.1:8080, a server on 127.0.0.1:9001 answering "app", realm
// "Admin area") on both proxies and asks each case of both.
func checkBasicAuth(t *testing.T, file string, cases []authCase) {
	app := startRecordingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	hapAddr, caddyAddr, _ := startBoth(t, file, "127.0.0.1:8080", "127.0.0.1:9001", app.addr)
	// basic_auth checks each password with bcrypt (cost 10), which the race
	// detector slows to seconds beside make test's other shards.
	client := &http.Client{Timeout: time.Minute}
	page401 := "<html><body><h1>401 Unauthorized</h1>\nYou need a valid user and password to access this content.\n</body></html>\n"
	for i, tt := range cases {
		want := map[int]string{401: page401, 200: "app"}[tt.status]
		if tt.path == "/health" {
			want = "ok"
		}
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			name := fmt.Sprintf("%s-%d", p.name, i)
			req, _ := http.NewRequest("GET", "http://"+p.addr+tt.path, nil)
			req.Header.Set("X-Client", name)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.password)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || string(body) != want {
				t.Errorf("%s: %s as %q: %d %q, want %d %q", name, tt.path, tt.user, resp.StatusCode, body, tt.status, want)
			}
			if tt.status == 401 {
				if got := resp.Header.Get("WWW-Authenticate"); got != `Basic realm="Admin area"` {
					t.Errorf("%s: WWW-Authenticate %q", name, got)
				}
				if resp.Header.Get("Content-Type") != "text/html" || resp.Header.Get("Cache-Control") != "no-cache" {
					t.Errorf("%s: 401 with Content-Type %q, Cache-Control %q", name, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
				}
			}
			if got := app.header(name).Get("Authorization"); want == "app" && got != req.Header.Get("Authorization") {
				t.Errorf("%s: the server saw Authorization %q", name, got)
			}
		}
	}
}

// haproxy/testdata/proxyprotocol.cfg: behind a load balancer that speaks
// the PROXY protocol (accept-proxy), both proxies take the client's
// address from its header (X-Forwarded-For) and refuse a connection
// without one; to a server with send-proxy-v2 both send a PROXY header
// with the client's address (its port: 0 from Caddy, a known
// approximation with its warning).
func TestHAProxyDifferentialProxyProtocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := serveRecording(t, &proxyproto.Listener{Listener: ln}, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	hapAddr, caddyAddr, warnings := startBoth(t, "../haproxy/testdata/proxyprotocol.cfg", "127.0.0.1:8080", "127.0.0.1:9001", app.addr)
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "its source port is 0") }) {
		t.Errorf("no warning for send-proxy-v2's source port: %q", warnings)
	}
	for _, p := range []struct{ name, addr, port string }{{"haproxy", hapAddr, "40000"}, {"caddy-ha", caddyAddr, "0"}} {
		status, err := askThroughProxyHeader(p.addr, "PROXY TCP4 192.0.2.10 127.0.0.1 40000 8080\r\n", p.name)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s: with a PROXY header: %d, %v", p.name, status, err)
		}
		seen := app.header(p.name)
		if xff, peer := seen.Get("X-Forwarded-For"), seen.Get("X-Peer"); xff != "192.0.2.10" || peer != "192.0.2.10:"+p.port {
			t.Errorf("%s: the server saw X-Forwarded-For %q from %q, want 192.0.2.10 from 192.0.2.10:%s", p.name, xff, peer, p.port)
		}
		if status, err := askThroughProxyHeader(p.addr, "", p.name+"-bare"); err == nil {
			t.Errorf("%s: without a PROXY header: answered %d", p.name, status)
		}
		if app.header(p.name+"-bare") != nil {
			t.Errorf("%s: a request without a PROXY header reached the server", p.name)
		}
	}
}

// askThroughProxyHeader sends a GET on a new connection to addr that
// begins with header (a PROXY protocol line, or nothing): the status.
func askThroughProxyHeader(addr, header, client string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, header+"GET / HTTP/1.1\r\nHost: edge.example\r\nX-Client: "+client+"\r\nConnection: close\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// haproxy/testdata/monitor.cfg: monitor-uri answers HAProxy's own 200
// before any rule, for any method, at that URI only; the
// http-after-response rules apply, in order, to every answer (the
// monitor's, a deny's own page, the server's); with option
// http-buffer-request the server gets the body whole.
func TestHAProxyDifferentialMonitorAfterResponse(t *testing.T) {
	app := startRecordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Powered-By", "test")
		w.Header().Set("X-Served-By", "app")
		w.Header().Set("X-Body", fmt.Sprintf("%d %q %d", len(body), r.TransferEncoding, r.ContentLength))
		io.WriteString(w, "app")
	})
	hapAddr, caddyAddr, _ := startBoth(t, "../haproxy/testdata/monitor.cfg", "127.0.0.1:8080", "127.0.0.1:9001", app.addr)
	client := &http.Client{Timeout: 10 * time.Second}
	monitorPage := "<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n"
	denyPage := "<html><body><h1>403 Forbidden</h1>\nRequest forbidden by administrative rules.\n</body></html>\n"
	type result struct {
		status          int
		body, ctype     string
		hsts, servedBy  string
		powered, xbody  string
		cacheControlSet bool
	}
	body := strings.Repeat("x", 5000)
	for i, tt := range []struct {
		method, path string
		chunked      bool
		want         result
	}{
		{"GET", "/lb-health", false, result{200, monitorPage, "text/html", "max-age=31536000", "edge, again", "", "", true}},
		{"POST", "/lb-health", false, result{200, monitorPage, "text/html", "max-age=31536000", "edge, again", "", "", true}},
		{"GET", "/lb-health?full=1", false, result{403, denyPage, "text/html", "max-age=31536000", "edge, again", "", "", true}},
		{"GET", "/page", false, result{200, "app", "text/plain; charset=utf-8", "max-age=31536000", "edge, again", "", "0 [] 0", false}},
		{"POST", "/upload", false, result{200, "app", "text/plain; charset=utf-8", "max-age=31536000", "edge, again", "", `5000 [] 5000`, false}},
		{"POST", "/upload", true, result{200, "app", "text/plain; charset=utf-8", "max-age=31536000", "edge, again", "", `5000 ["chunked"] -1`, false}}, // still chunked
	} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			name := fmt.Sprintf("%s-%d", p.name, i)
			var rd io.Reader
			switch {
			case tt.chunked: // no length: sent chunked
				rd = io.MultiReader(strings.NewReader(body))
			case tt.method == "POST":
				rd = strings.NewReader(body)
			}
			req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, rd)
			req.Header.Set("X-Client", name)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			h := resp.Header
			got := result{resp.StatusCode, string(b), h.Get("Content-Type"), h.Get("Strict-Transport-Security"),
				strings.Join(h.Values("X-Served-By"), "|"), h.Get("X-Powered-By"), h.Get("X-Body"), h.Get("Cache-Control") == "no-cache"}
			if got != tt.want {
				t.Errorf("%s: %s %s: %+v, want %+v", name, tt.method, tt.path, got, tt.want)
			}
		}
	}
}

// dst_port, the port a connection came in on, routes as in HAProxy: a
// frontend with two binds sends the requests of the second (by its
// port, or a range holding it) to another backend. Each proxy's
// configuration names its own ports.
func TestHAProxyDifferentialDstPort(t *testing.T) {
	named := func(name string) string {
		return httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-Backend", name) }))
	}
	api, console := named("api"), named("console")
	config := func(first, second string) string {
		_, port, _ := net.SplitHostPort(second)
		return fmt.Sprintf(`defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend s3
    bind %s
    bind %s
    acl console_port dst_port %s
    acl console_range dst_port %s:%s
    acl above dst_port gt %s
    use_backend console if console_port console_range !above
    default_backend api
backend api
    server a %s
backend console
    server c %s
`, first, second, port, port, port, port, api, console)
	}
	hap := []string{loopback.FreeAddr(), loopback.FreeAddr()}
	caddyAddrs := []string{loopback.FreeAddr(), loopback.FreeAddr()}
	startHAProxy(t, config(hap[0], hap[1]), hap...)
	_, _, warnings := runHAProxyConfigWarned(t, config(caddyAddrs[0], caddyAddrs[1]))
	for _, w := range warnings {
		checkKnownWarning(t, w.Message)
	}
	for i, want := range []string{"api", "console"} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hap[i]}, {"caddy-ha", caddyAddrs[i]}} {
			// A Host without the port: the connection's port decides.
			req, _ := http.NewRequest("GET", "http://"+p.addr+"/", nil)
			req.Host = "s3.example"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Backend"); got != want {
				t.Errorf("%s, bind %d: backend %q, want %q", p.name, i+1, got, want)
			}
		}
	}
}
