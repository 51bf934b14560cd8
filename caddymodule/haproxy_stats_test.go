package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// appServer serves "app" on a free port, counting the requests it heard
// by X-Client; it stops when the test ends.
type appServer struct {
	addr  string
	mu    sync.Mutex
	heard map[string]int
}

func startAppServer(t *testing.T) *appServer {
	t.Helper()
	a := &appServer{heard: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.heard[r.Header.Get("X-Client")]++
		a.mu.Unlock()
		io.WriteString(w, "app")
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	return a
}

func (a *appServer) heardFrom(client string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heard[client]
}

// statsConfig is haproxy/testdata/stats.cfg on the test's addresses.
func statsConfig(t *testing.T, app, web, stats string) string {
	t.Helper()
	text, err := os.ReadFile("../haproxy/testdata/stats.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("127.0.0.1:9001", app, "127.0.0.1:8080", web, "127.0.0.1:8404", stats).Replace(string(text))
}

// statsAnswer is what a client saw of a request to a stats page.
type statsAnswer struct {
	status       int
	authenticate string // WWW-Authenticate
	reached      bool   // the backend heard it
}

// statsCase is one request of the stats tests.
type statsCase struct {
	site, method, path, user, password string
	want                               statsAnswer
}

const statsRealm = `Basic realm="HAProxy Statistics"`

// statsCases are the requests both proxies answer alike: the page asks
// for credentials (401 with the realm) and shows itself with them, the
// defaults' page to its two users, the listen's (every path) to its own;
// a method other than GET, HEAD and POST, and a path outside the uri, go
// on to the backend (the listen has none: 503); the deny before the page
// and the redirect after it as written.
var statsCases = []statsCase{
	{"web", "GET", "/admin?stats", "", "", statsAnswer{401, statsRealm, false}},
	{"web", "GET", "/admin?stats", "admin", "wrong", statsAnswer{401, statsRealm, false}},
	{"web", "GET", "/admin?stats", "admin", "AdMiN123", statsAnswer{200, "", false}},
	{"web", "GET", "/admin?stats;csv", "ops", "s3cret:with:colons", statsAnswer{200, "", false}},
	{"web", "HEAD", "/admin?stats", "admin", "AdMiN123", statsAnswer{200, "", false}},
	{"web", "POST", "/admin?stats", "", "", statsAnswer{401, statsRealm, false}},
	{"web", "GET", "/admin?stats", "admin", "an0ther", statsAnswer{401, statsRealm, false}}, // the listen's password
	{"web", "PUT", "/admin?stats", "", "", statsAnswer{200, "", true}},
	{"web", "GET", "/admin", "", "", statsAnswer{200, "", true}},
	{"web", "GET", "/Admin?stats", "", "", statsAnswer{200, "", true}},
	{"web", "GET", "/private/admin?stats", "", "", statsAnswer{403, "", false}},
	{"web", "GET", "/old/x", "", "", statsAnswer{302, "", false}},
	{"stats", "GET", "/", "", "", statsAnswer{401, statsRealm, false}},
	{"stats", "GET", "/anything?at=all", "admin", "an0ther", statsAnswer{200, "", false}},
	{"stats", "GET", "/", "admin", "AdMiN123", statsAnswer{401, statsRealm, false}}, // the defaults' password: replaced
	{"stats", "PUT", "/", "", "", statsAnswer{503, "", false}},
}

// askStats sends c's request to addr (whose proxy is named proxy) and
// returns what came back, with the answer itself.
func askStats(t *testing.T, app *appServer, proxy, addr string, i int, c statsCase) (statsAnswer, *http.Response, string) {
	t.Helper()
	// Each signed request costs a bcrypt check of cost 10, slow under -race:
	// beside make test's other packages one took over 10s.
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	name := fmt.Sprintf("%s-%d", proxy, i)
	req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
	req.Header.Set("X-Client", name)
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return statsAnswer{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), app.heardFrom(name) == 1}, resp, string(body)
}

// haproxy/testdata/stats.cfg through --adapter haproxy, in Caddy: each
// page answers 401 without credentials and 200 with them (ha_status),
// where HAProxy's would; migrate's Caddyfile adapts to the same JSON
// (runHAProxyConfig checks it: the hashes do not change from one
// translation to the next), and each hash is bcrypt's of its password.
func TestHAProxyStatsPage(t *testing.T) {
	app := startAppServer(t)
	web, stats := loopback.FreeAddr(), loopback.FreeAddr()
	adapted, text := runHAProxyConfig(t, statsConfig(t, app.addr, web, stats))
	for _, pw := range []string{"AdMiN123", "s3cret", "an0ther"} {
		if strings.Contains(string(adapted), pw) || strings.Contains(text, pw) {
			t.Errorf("password %s is in the translation", pw)
		}
	}
	hashes := regexp.MustCompile(`\$2a\$10\$[./A-Za-z0-9]{53}`).FindAllString(string(adapted), -1)
	if len(hashes) != 3 {
		t.Fatalf("%d bcrypt hashes in the JSON, want 3:\n%s", len(hashes), adapted)
	}
	for _, pw := range []string{"AdMiN123", "s3cret:with:colons", "an0ther"} { // the servers' order is their addresses'
		if !slices.ContainsFunc(hashes, func(h string) bool { return bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)) == nil }) {
			t.Errorf("no hash in the JSON is bcrypt's of %s", pw)
		}
	}
	addrs := map[string]string{"web": web, "stats": stats}
	for i, c := range statsCases {
		got, resp, body := askStats(t, app, "caddy-ha", addrs[c.site], i, c)
		if got != c.want {
			t.Errorf("%s %s %s as %q: %+v, want %+v", c.site, c.method, c.path, c.user, got, c.want)
		}
		if got.status == 200 && !got.reached && c.method == "GET" {
			if !strings.Contains(body, "caddy-ha") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("%s %s: not the ha_status page: %s %.200s", c.site, c.path, resp.Header.Get("Content-Type"), body)
			}
			refresh := map[string]string{"web": `<meta http-equiv="refresh" content="2">`, "stats": ""}[c.site]
			if refresh != "" && !strings.Contains(body, refresh) || refresh == "" && strings.Contains(body, "http-equiv") {
				t.Errorf("%s: the page's refresh is not stats refresh's (want %q)", c.site, refresh)
			}
		}
	}
	// The same view as JSON, as ha_status gives it.
	req, _ := http.NewRequest("GET", "http://"+stats+"/?format=json", nil)
	req.SetBasicAuth("admin", "an0ther")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var view map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || view["generated_at"] == nil {
		t.Errorf("?format=json: %v %v", err, view)
	}
}

// maxconnConfig is haproxy/testdata/maxconn.cfg on the test's addresses
// (servers app1, app2 and static1, then the binds), with global maxconn
// at global.
func maxconnConfig(t *testing.T, servers, binds [3]string, global string) string {
	t.Helper()
	text, err := os.ReadFile("../haproxy/testdata/maxconn.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("127.0.0.1:9001", servers[0], "127.0.0.1:9002", servers[1], "127.0.0.1:9003", servers[2],
		"127.0.0.1:8080", binds[0], "127.0.0.1:8081", binds[1], "127.0.0.1:8082", binds[2],
		"    maxconn 100", "    maxconn "+global).Replace(string(text))
}

// slowServer answers each request once released, counting those it
// holds and the most it held at once.
type slowServer struct {
	addr           string
	release        chan struct{}
	mu             sync.Mutex
	inflight, most int
}

func startSlowServer(t *testing.T) *slowServer {
	t.Helper()
	s := &slowServer{release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inflight++
		s.most = max(s.most, s.inflight)
		s.mu.Unlock()
		<-s.release
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
		io.WriteString(w, "slow")
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		srv.Close()
	})
	return s
}

func (s *slowServer) counts() (inflight, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight, s.most
}

// checkServerMaxconn sends 8 requests at once to frontend api, whose two
// servers have maxconn 3: each server holds 3 at most, the 2 others wait.
// HAProxy answers those 503 after timeout queue (1s); caddy-ha's wait
// for a free connection (documented); all the others are answered once
// the servers answer.
func checkServerMaxconn(t *testing.T, proxy, api string, app1, app2 *slowServer) {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	statuses := make(chan int, 8)
	for range 8 {
		go func() {
			resp, err := client.Get("http://" + api + "/")
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	poll.Until(t, 10*time.Second, "each server to hold 3 requests", func() bool {
		a, _ := app1.counts()
		b, _ := app2.counts()
		return a == 3 && b == 3
	})
	got := map[int]int{}
	if proxy == "haproxy" {
		for range 2 {
			select {
			case code := <-statuses:
				got[code]++
			case <-time.After(5 * time.Second):
				t.Fatal("haproxy: the queued requests are not answered after timeout queue")
			}
		}
		if got[503] != 2 {
			t.Fatalf("haproxy: the queued requests got %v, want two 503 after timeout queue", got)
		}
	} else {
		select {
		case code := <-statuses:
			t.Fatalf("caddy-ha: a request answered %d while both servers hold 3: the documented wait is gone", code)
		case <-time.After(1500 * time.Millisecond): // past timeout queue
		}
	}
	close(app1.release)
	close(app2.release)
	for range 8 - got[503] {
		select {
		case code := <-statuses:
			got[code]++
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not every request answered once the servers answer: %v", proxy, got)
		}
	}
	want := map[string]map[int]int{"haproxy": {200: 6, 503: 2}, "caddy-ha": {200: 8}}[proxy]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: statuses %v, want %v", proxy, got, want)
	}
	for _, s := range []*slowServer{app1, app2} {
		if _, most := s.counts(); most != 3 {
			t.Errorf("%s: a server held %d requests at once, want maxconn 3", proxy, most)
		}
	}
}

// checkMaxconn runs the maxconn scenario on a proxy with binds: web's two
// binds share its maxconn 2, so that a third connection, on either, waits
// (in the kernel's backlog) until one closes; then, with global maxconn 3,
// api's second connection waits for one of web's.
func checkMaxconn(t *testing.T, binds [3]string) {
	t.Helper()
	a, b := dialAndAsk(t, binds[0]), dialAndAsk(t, binds[1])
	if !a.answered(t, 5*time.Second) || !b.answered(t, 5*time.Second) {
		t.Fatal("the first two connections are not answered")
	}
	third := dialAndAsk(t, binds[0])
	if third.answered(t, heldWindow) {
		t.Fatal("a third connection answered while maxconn 2 are open")
	}
	a.c.Close()
	if !third.answered(t, 5*time.Second) {
		t.Fatal("the third connection is not answered once one of the two closed")
	}
	fourth := dialAndAsk(t, binds[1]) // web's other bind: the same count
	if fourth.answered(t, heldWindow) {
		t.Fatal("a connection on web's second bind answered while web has maxconn 2 open")
	}
	// Global maxconn 3: web's two and api's first.
	api1 := dialAndAsk(t, binds[2])
	if !api1.answered(t, 5*time.Second) {
		t.Fatal("api's first connection is not answered")
	}
	api2 := dialAndAsk(t, binds[2])
	if api2.answered(t, heldWindow) {
		t.Fatal("api's second connection answered while global maxconn 3 are open")
	}
	b.c.Close()
	third.c.Close()
	if !api2.answered(t, 5*time.Second) || !fourth.answered(t, 5*time.Second) {
		t.Fatal("the waiting connections are not answered once two closed")
	}
}

// haproxy/testdata/maxconn.cfg through --adapter haproxy, in Caddy, with
// global maxconn 3: frontend web's maxconn 2 holds across its two binds,
// global maxconn across both frontends.
func TestHAProxyMaxconnHoldsConnectionsPastIt(t *testing.T) {
	app := startAppServer(t)
	binds := [3]string{loopback.FreeAddr(), loopback.FreeAddr(), loopback.FreeAddr()}
	adapted, _ := runHAProxyConfig(t, maxconnConfig(t, [3]string{app.addr, app.addr, app.addr}, binds, "3"))
	for _, want := range []string{`"wrapper":"max_connections"`, `"group":"global"`, `"group":"frontend/web"`, `"max_conns_per_host":3`} {
		if !strings.Contains(string(adapted), want) {
			t.Errorf("the adapted config lacks %s", want)
		}
	}
	checkMaxconn(t, binds)
}

// The same through HAProxy itself: its listeners stop accepting at
// maxconn, as caddy-ha's do; and a server's maxconn 3 holds through both,
// the excess queued (HAProxy answers it 503 after timeout queue, caddy-ha
// waits: documented).
func TestHAProxyDifferentialMaxconn(t *testing.T) {
	app := startAppServer(t)
	for _, proxy := range []string{"haproxy", "caddy-ha"} {
		run := func(t *testing.T, servers, binds [3]string, global string) {
			cfg := maxconnConfig(t, servers, binds, global)
			if proxy == "haproxy" {
				startHAProxy(t, cfg, binds[2])
			} else {
				runHAProxyConfig(t, cfg)
			}
		}
		t.Run(proxy+"/connections", func(t *testing.T) {
			binds := [3]string{loopback.FreeAddr(), loopback.FreeAddr(), loopback.FreeAddr()}
			run(t, [3]string{app.addr, app.addr, app.addr}, binds, "3")
			checkMaxconn(t, binds)
		})
		t.Run(proxy+"/server", func(t *testing.T) {
			app1, app2 := startSlowServer(t), startSlowServer(t)
			binds := [3]string{loopback.FreeAddr(), loopback.FreeAddr(), loopback.FreeAddr()}
			run(t, [3]string{app1.addr, app2.addr, app.addr}, binds, "100")
			checkServerMaxconn(t, proxy, binds[2], app1, app2)
		})
	}
}

// haproxy/testdata/stats.cfg through HAProxy and through caddy-ha: the
// same status, WWW-Authenticate and backend for each request. The
// documented differences, asserted: the page itself (HAProxy's proxies,
// or ha_status), HAProxy's refresh as a Refresh header where ha_status's
// page has its meta refresh, and the 401's body (HAProxy's HTML, none).
func TestHAProxyDifferentialStats(t *testing.T) {
	app := startAppServer(t)
	hapWeb, hapStats, caddyWeb, caddyStats := loopback.FreeAddr(), loopback.FreeAddr(), loopback.FreeAddr(), loopback.FreeAddr()
	startHAProxy(t, statsConfig(t, app.addr, hapWeb, hapStats), hapStats)
	runHAProxyConfig(t, statsConfig(t, app.addr, caddyWeb, caddyStats))
	addrs := map[string]map[string]string{"haproxy": {"web": hapWeb, "stats": hapStats}, "caddy-ha": {"web": caddyWeb, "stats": caddyStats}}
	for i, c := range statsCases {
		for _, proxy := range []string{"haproxy", "caddy-ha"} {
			got, resp, body := askStats(t, app, proxy, addrs[proxy][c.site], i, c)
			if got != c.want {
				t.Errorf("%s: %s %s %s as %q: %+v, want %+v", proxy, c.site, c.method, c.path, c.user, got, c.want)
			}
			if got.status == 401 && (proxy == "haproxy") != strings.Contains(body, "401 Unauthorized") {
				t.Errorf("%s: the 401's body %q: the documented difference is gone", proxy, body)
			}
			if got.status == 200 && !got.reached && c.method == "GET" && c.path == "/admin?stats" {
				page := map[string]string{"haproxy": "Statistics Report", "caddy-ha": "caddy-ha"}[proxy]
				refresh := map[string]bool{"haproxy": resp.Header.Get("Refresh") == "2",
					"caddy-ha": strings.Contains(body, `<meta http-equiv="refresh" content="2">`)}[proxy]
				if !strings.Contains(body, page) || !refresh {
					t.Errorf("%s: the page (%q) or its refresh every 2s (Refresh %q) is not as documented", proxy, page, resp.Header.Get("Refresh"))
				}
			}
		}
	}
}

// haproxy/testdata/stats-backend.cfg: a backend's own stats page answers
// the requests that backend gets, behind its stats auth, after its
// http-request rules; the rest go to its server, or (a backend without
// one) are answered 503, through HAProxy 2.6 and caddy-ha alike.
func TestHAProxyDifferentialBackendStats(t *testing.T) {
	app := startRecordingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	hapAddr, caddyAddr, _ := startBoth(t, "../haproxy/testdata/stats-backend.cfg", "127.0.0.1:8080", "127.0.0.1:9001", app.addr)
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		method, path, user, password string
		status                       int
		page                         bool // the answer is the stats page (not the server's "app")
	}{
		{"GET", "/ops/stats", "", "", 401, false},
		{"GET", "/ops/stats", "ops", "wrong", 401, false},
		{"GET", "/ops/stats", "ops", "s3cret", 200, true},
		{"PUT", "/ops/stats", "", "", 200, false},
		{"GET", "/ops/private/stats", "ops", "s3cret", 403, false},
		{"GET", "/ops/other", "", "", 200, false},
		{"GET", "/status", "", "", 200, true},
		{"GET", "/status/x", "", "", 200, true},
		{"DELETE", "/status", "", "", 503, false},
		{"GET", "/", "", "", 200, false},
	} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, nil)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.password)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page := map[string]string{"haproxy": "Statistics Report", "caddy-ha": "caddy-ha"}[p.name]
			if resp.StatusCode != tt.status || tt.page != strings.Contains(string(body), page) || (tt.status == 200 && !tt.page) != (string(body) == "app") {
				t.Errorf("%s: %s %s as %q: %d %.60q, want %d (the page: %v)", p.name, tt.method, tt.path, tt.user, resp.StatusCode, body, tt.status, tt.page)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") != `Basic realm="Operators"` {
				t.Errorf("%s: %s: WWW-Authenticate %q", p.name, tt.path, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}
