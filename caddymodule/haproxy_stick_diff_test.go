package caddymodule

import (
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// startStickPair runs the golden file on HAProxy and, adapted, on
// caddy-ha, each server (by its address in the file) a backend that sets
// its session cookie name on an answer to a request without it (value
// <server>-<n>), and answers which server it is (X-Server) and the
// Cookie it saw (X-Cookie). It returns both proxies' addresses.
func startStickPair(t *testing.T, file, name string, servers map[string]string) (hapAddr, caddyAddr string) {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var repl []string
	var sessions atomic.Int64
	for server, addr := range servers {
		local := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := r.Cookie(name); err != nil {
				http.SetCookie(w, &http.Cookie{Name: name, Value: server + "-" + string(rune('a'+sessions.Add(1)%26)), Path: "/"})
			}
			w.Header().Set("X-Server", server)
			w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
		}))
		repl = append(repl, addr, local)
	}
	hapAddr, caddyAddr = loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer(append(repl, "127.0.0.1:8080", hapAddr)...).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	return hapAddr, caddyAddr
}

// session is one client's visits: its first request without cookies, then
// four with every cookie the first answer set; it returns the cookies the
// client got (name to value) and fails unless every visit reached the
// first one's server and that server saw the session cookie it set
// (sessionOf the client's value of name).
func session(t *testing.T, proxy, addr, name string, sessionOf func(string) string) map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := map[string]string{}
	var cookies []string
	for _, c := range resp.Cookies() {
		got[c.Name] = c.Value
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	server := resp.Header.Get("X-Server")
	for i := range 4 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s := resp.Header.Get("X-Server"); s != server {
			t.Errorf("%s: visit %d with %q went to %s, not %s", proxy, i, cookies, s, server)
		}
		if seen, want := resp.Header.Get("X-Cookie"), name+"="+sessionOf(got[name]); !strings.Contains(seen, want) {
			t.Errorf("%s: the server saw Cookie %q, want %q in it", proxy, seen, want)
		}
	}
	return got
}

// haproxy/testdata/stick.cfg's portal (the servers' JSESSIONID learned
// into a string table): through HAProxy and caddy-ha, a client stays on
// the server that set its session, which sees the session as it set it.
// The documented difference: caddy-ha's client also gets
// JSESSIONID_SERVER, Caddy's own cookie, which HAProxy's does not.
func TestHAProxyDifferentialStickSessionCookie(t *testing.T) {
	hapAddr, caddyAddr := startStickPair(t, "../haproxy/testdata/stick.cfg", "JSESSIONID",
		map[string]string{"tc1": "127.0.0.1:9001", "tc2": "127.0.0.1:9002", "api1": "127.0.0.1:9011", "api2": "127.0.0.1:9012"})
	same := func(v string) string { return v }
	for _, p := range []struct{ name, addr, pin string }{{"haproxy", hapAddr, ""}, {"caddy-ha", caddyAddr, "JSESSIONID_SERVER"}} {
		servers := map[string]bool{}
		for range 2 { // a client of each server (round robin)
			got := session(t, p.name, p.addr, "JSESSIONID", same)
			servers[strings.Split(got["JSESSIONID"], "-")[0]] = true
			if _, ok := got["JSESSIONID_SERVER"]; ok != (p.pin != "") {
				t.Errorf("%s: cookies %v: JSESSIONID_SERVER only through caddy-ha (the documented difference)", p.name, got)
			}
		}
		if len(servers) != 2 {
			t.Errorf("%s: two new clients went to %v, want both servers (round robin)", p.name, servers)
		}
	}
}

// haproxy/testdata/cookie-prefix.cfg's keycloak backend (cookie
// AUTH_SESSION_ID prefix): through HAProxy and caddy-ha, a client stays on
// the server that set its session, which sees the session as it set it.
// The documented difference: HAProxy's client holds kc1~<session>, one
// cookie; caddy-ha's holds the session as the server set it and
// AUTH_SESSION_ID_SERVER, Caddy's own.
func TestHAProxyDifferentialCookiePrefix(t *testing.T) {
	hapAddr, caddyAddr := startStickPair(t, "../haproxy/testdata/cookie-prefix.cfg", "AUTH_SESSION_ID",
		map[string]string{"kc1": "127.0.0.1:9001", "kc2": "127.0.0.1:9002", "old1": "127.0.0.1:9011"})
	unprefixed := func(v string) string { _, s, _ := strings.Cut(v, "~"); return s }
	got := session(t, "haproxy", hapAddr, "AUTH_SESSION_ID", unprefixed)
	if server, sessionValue, ok := strings.Cut(got["AUTH_SESSION_ID"], "~"); len(got) != 1 || !ok || !strings.HasPrefix(sessionValue, server+"-") {
		t.Errorf("haproxy: cookies %v, want AUTH_SESSION_ID=<server>~<server>-<n> alone", got)
	}
	got = session(t, "caddy-ha", caddyAddr, "AUTH_SESSION_ID", func(v string) string { return v })
	if len(got) != 2 || strings.Contains(got["AUTH_SESSION_ID"], "~") || got["AUTH_SESSION_ID_SERVER"] == "" {
		t.Errorf("caddy-ha: cookies %v, want the server's AUTH_SESSION_ID unchanged and AUTH_SESSION_ID_SERVER", got)
	}
}

// haproxy/testdata/cache.cfg: a repeated GET of a cacheable answer under
// /static/ reaches HAProxy's server once (the second is answered from the
// cache, with Age) and caddy-ha's twice: the documented difference
// (`requests to servers`, "Caddy has no cache in this build").
func TestHAProxyDifferentialCache(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/cache.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int64
	addr := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Cache-Control", "max-age=60")
		w.Write([]byte("body")) //nolint:errcheck // the client reads it
	}))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:9001", addr, "127.0.0.1:8080", hapAddr).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range []struct {
		name, addr string
		want       int64
	}{{"haproxy", hapAddr, 1}, {"caddy-ha", caddyAddr, 2}} {
		reached.Store(0)
		var age string
		for range 2 {
			resp, err := client.Get("http://" + p.addr + "/static/app.css")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			age = resp.Header.Get("Age")
		}
		if n := reached.Load(); n != p.want || (age != "") != (p.name == "haproxy") {
			t.Errorf("%s: the server got %d of two requests (want %d), the second answer's Age %q", p.name, n, p.want, age)
		}
	}
}
