package caddymodule

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/testproc"
	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// diffTimeouts are added to the seed's defaults in the differential
// tests: HAProxy wants them, and timeout queue bounds how long caddy-ha
// holds a request for a leader (else 15s): 5s, as node-b leads within a
// renew tick (1s) and a probe (1s) of
// node-a's planned stop, which a loaded machine stretched past 2s (4 and
// 15 writes answered 503 in make test runs beside a CPU-bound job).
const diffTimeouts = "    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    timeout queue 5s\n"

// forBoth is seedConfig's text as both proxies run it: with diffTimeouts,
// and checks every second, as both bound a check (its connection and TLS
// handshake) by inter, which 100ms does not hold on a loaded machine, nor
// 500ms beside make test's other packages and a CPU-bound job (node-b,
// leading, failed two checks in a row, and both proxies held or refused
// writes for seconds across the planned stop).
func forBoth(cfgText string) string {
	return strings.ReplaceAll(strings.Replace(cfgText, "defaults\n", "defaults\n"+diffTimeouts, 1), "inter 100ms", "inter 1s")
}

// startHAProxy runs Debian's haproxy on cfgText in the foreground, killed
// when the test ends, and waits until it accepts connections on each of
// addrs.
func startHAProxy(t *testing.T, cfgText string, addrs ...string) {
	t.Helper()
	bin, ok := tools.Find(t, "haproxy", "the adapter is not compared with HAProxy")
	if !ok {
		t.SkipNow()
	}
	cfgFile := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c refuses the configuration: %v\n%s\n%s", err, out, cfgText)
	}
	var logs syncBuffer
	cmd := exec.Command(bin, "-f", cfgFile, "-db")
	cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = &logs, &logs, testproc.Attr(nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("haproxy's output:\n%s", logs.String())
		}
	})
	for _, addr := range addrs {
		poll.Until(t, 5*time.Second, "haproxy to listen on "+addr, func() bool {
			select {
			case <-exited:
				t.Fatalf("haproxy exited: %s", logs.String())
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
}

// syncBuffer is a bytes.Buffer that a child process's output may be
// written to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// frontendClient is a client of the seed's frontend: it trusts the test
// CA and asks for the frontend's name, whatever the address.
func frontendClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "nodepilot.internal.example"}}}
}

// seen is what a client saw of one request.
type seen struct {
	status int
	node   string // X-Node-Id
	header http.Header
	err    error
}

func (a seen) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d from %q", a.status, a.node)
}

func ask(client *http.Client, method, url, clientName string, header http.Header) seen {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	req, _ := http.NewRequest(method, url, body)
	maps.Copy(req.Header, header)
	req.Header.Set("X-Client", clientName)
	req.Header.Set("X-Request-Id", clientName)
	resp, err := client.Do(req)
	if err != nil {
		return seen{err: err}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return seen{status: resp.StatusCode, node: resp.Header.Get("X-Node-Id"), header: resp.Header}
}

// heardBy returns, for each X-Client name, the requests the cluster's
// nodes heard from it.
func heardBy(c *fakecluster.Cluster) map[string][]fakecluster.Heard {
	out := map[string][]fakecluster.Heard{}
	for _, n := range c.Nodes() {
		for _, h := range n.Heard() {
			out[h.Client] = append(out[h.Client], h)
		}
	}
	return out
}

// received sums the requests other than probes that reached the nodes.
func received(c *fakecluster.Cluster) int {
	sum := 0
	for _, n := range c.Nodes() {
		sum += n.Received()
	}
	return sum
}

// The seed's configuration run by HAProxy itself and by caddy-ha (via the
// adapter), side by side on the same fake cluster over TLS, with the same
// traffic; what the nodes recorded is compared. Differences are the
// documented ones (docs/haproxy.md, "Compared with HAProxy").
func TestHAProxyDifferential(t *testing.T) {
	c, _, hapAddr, caddyAddr, client, proxies := startSeedPair(t)

	t.Run("headers", func(t *testing.T) {
		forged := http.Header{
			"X-Forwarded-For":   {"203.0.113.9"},
			"Forwarded":         {"for=203.0.113.9;proto=https"},
			"X-Forwarded-Proto": {"http"},
			"X-Forwarded-Host":  {"evil.example"},
			"X-Real-Ip":         {"203.0.113.9"},
			"X-Custom":          {"kept"},
		}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			var answers []http.Header
			for _, p := range proxies {
				a := ask(client, method, p.url+"/api/items", p.name+"-"+method, forged)
				if a.status != 200 || a.node != "node-a" {
					t.Fatalf("%s %s: %v, want 200 from node-a (the leader, which passes HAProxy's check)", p.name, method, a)
				}
				answers = append(answers, a.header)
			}
			// The client gets the same answer's fields from both (no Via:
			// HAProxy adds none), the node's own, with the same values but
			// for the time, the body's length (it names the client) and
			// the node connection's number.
			for _, h := range answers {
				for _, varies := range []string{"Date", "Content-Length", "X-Upstream-Conn"} {
					h.Del(varies)
				}
			}
			if !maps.EqualFunc(answers[0], answers[1], slices.Equal) {
				t.Errorf("%s: the client got\n%v\nfrom haproxy and\n%v\nfrom caddy-ha", method, answers[0], answers[1])
			}
			heard := heardBy(c)
			hap, ch := heard["haproxy-"+method], heard["caddy-ha-"+method]
			if len(hap) != 1 || len(ch) != 1 {
				t.Fatalf("%s: heard %d via haproxy and %d via caddy-ha, want 1 each", method, len(hap), len(ch))
			}
			if hap[0].Host != hapAddr || ch[0].Host != caddyAddr {
				t.Errorf("%s: Host %q via haproxy, %q via caddy-ha, want each the client's (%s, %s)", method, hap[0].Host, ch[0].Host, hapAddr, caddyAddr)
			}
			for _, h := range []fakecluster.Heard{hap[0], ch[0]} {
				if got := h.Header.Values("X-Forwarded-For"); !slices.Equal(got, []string{"127.0.0.1"}) {
					t.Errorf("%s: X-Forwarded-For %q, want the client's address alone", h.Client, got)
				}
				if got := h.Header.Values("X-Forwarded-Proto"); !slices.Equal(got, []string{"https"}) {
					t.Errorf("%s: X-Forwarded-Proto %q, want https", h.Client, got)
				}
				if got := h.Header.Values("Forwarded"); got != nil {
					t.Errorf("%s: the client's Forwarded %q reached the node", h.Client, got)
				}
				if h.Path != "/api/items" || h.Header.Get("X-Custom") != "kept" {
					t.Errorf("%s: path %q X-Custom %q", h.Client, h.Path, h.Header.Get("X-Custom"))
				}
			}
			// The documented differences: forwarded removes the client's
			// X-Real-IP (HAProxy passes it on) and sends X-Forwarded-Host
			// (the client's one removed; HAProxy passes the client's on).
			want := hap[0].Header.Clone()
			for _, h := range []string{"X-Client", "X-Request-Id", "X-Real-Ip", "X-Forwarded-Host"} {
				want.Del(h)
			}
			got := ch[0].Header.Clone()
			for _, h := range []string{"X-Client", "X-Request-Id", "X-Forwarded-Host"} {
				got.Del(h)
			}
			if !maps.EqualFunc(want, got, slices.Equal) {
				t.Errorf("%s: the node heard\n%v\nvia haproxy and\n%v\nvia caddy-ha", method, hap[0].Header, ch[0].Header)
			}
			if got := hap[0].Header.Get("X-Real-Ip"); got != "203.0.113.9" {
				t.Errorf("via haproxy, X-Real-IP %q: the documented difference is gone", got)
			}
			if got := hap[0].Header.Get("X-Forwarded-Host"); got != "evil.example" {
				t.Errorf("via haproxy, X-Forwarded-Host %q: the documented difference is gone", got)
			}
			if got := ch[0].Header.Get("X-Forwarded-Host"); got != caddyAddr {
				t.Errorf("via caddy-ha, X-Forwarded-Host %q, want the request's host %q", got, caddyAddr)
			}
		}
	})

	// A planned stop of the leader: node-a releases the lease, serves as a
	// follower for StopDrain, then closes. HAProxy sends writes to node-a
	// until its check has failed twice (node-a answers them 503 as a
	// follower, or HAProxy 503 once it is closed), then to the backup
	// node-b, which has the lease by then. caddy-ha holds each write until
	// node-b leads: none fails (the documented improvement).
	t.Run("planned stop", func(t *testing.T) {
		type write struct {
			proxy string
			a     seen
		}
		var mu sync.Mutex
		var writes []write
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, p := range proxies {
			wg.Go(func() {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				var inflight sync.WaitGroup
				defer inflight.Wait()
				for i := range 1000 { // bounds the stream at 10s
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					inflight.Go(func() {
						a := ask(client, http.MethodPost, p.url+"/api/orders", fmt.Sprintf("%s-w%d", p.name, i), nil)
						mu.Lock()
						writes = append(writes, write{p.name, a})
						mu.Unlock()
					})
				}
			})
		}
		c.Node("node-a").Stop()
		// Until both proxies have written to node-b a few times.
		poll.Until(t, 10*time.Second, "writes through both proxies to reach node-b", func() bool {
			mu.Lock()
			defer mu.Unlock()
			n := map[string]int{}
			for _, w := range writes {
				if w.a.node == "node-b" && w.a.status == 200 {
					n[w.proxy]++
				}
			}
			return n["haproxy"] >= 5 && n["caddy-ha"] >= 5
		})
		close(stop)
		wg.Wait()
		failed := map[string][]string{}
		for _, w := range writes {
			if w.a.status != 200 {
				failed[w.proxy] = append(failed[w.proxy], w.a.String())
			}
		}
		if len(failed["caddy-ha"]) > 0 {
			t.Errorf("caddy-ha failed %d writes across the planned stop: %v", len(failed["caddy-ha"]), failed["caddy-ha"])
		}
		if len(failed["haproxy"]) == 0 {
			t.Errorf("haproxy failed no write across the planned stop: the documented difference is gone")
		}
		t.Logf("planned stop: %d writes, haproxy answered %d with 503, caddy-ha %d", len(writes), len(failed["haproxy"]), len(failed["caddy-ha"]))
		for id, n := range c.ExecutedIDs() {
			if n != 1 {
				t.Errorf("write %s executed %d times", id, n)
			}
		}
	})
}

// startSeedPair runs the seed's configuration through HAProxy and through
// caddy-ha on a fake cluster over TLS, and waits until each proxy reaches
// the leader (HAProxy marks its servers up only after their checks).
func startSeedPair(t *testing.T) (c *fakecluster.Cluster, caFile, hapAddr, caddyAddr string, client *http.Client, proxies []struct{ name, url string }) {
	caFile, serverTLS := testPKI(t)
	c = newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: time.Second,
		TLS: serverTLS, StopDrain: 300 * time.Millisecond}, 2)
	hapAddr, caddyAddr = loopback.FreeAddr(), loopback.FreeAddr()
	hapCfg := forBoth(seedConfig(t, c, caFile, serverTLS, hapAddr))
	startHAProxy(t, hapCfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(hapCfg, hapAddr, caddyAddr))
	client = frontendClient(t, caFile)
	proxies = []struct{ name, url string }{{"haproxy", "https://" + hapAddr}, {"caddy-ha", "https://" + caddyAddr}}
	for _, p := range proxies {
		poll.Until(t, 10*time.Second, p.name+" to reach node-a", func() bool {
			return ask(client, http.MethodGet, p.url+"/api/ready", p.name+"-ready", nil).node == "node-a"
		})
	}
	return c, caFile, hapAddr, caddyAddr, client, proxies
}

// The seed through HAProxy and caddy-ha, with http-reuse never: one node
// connection per client connection in both, real curl --ntlm signing in
// and then asking anonymously on the same connection, each answered as its
// own user.
func TestHAProxyDifferentialNTLM(t *testing.T) {
	c, caFile, _, _, _, proxies := startSeedPair(t)
	curl := tools.Must(t, "curl")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, p := range proxies {
		port := p.url[strings.LastIndex(p.url, ":")+1:]
		for i := range 8 {
			wg.Go(func() {
				user := fmt.Sprintf("%s-%d", p.name, i)
				base := "https://nodepilot.internal.example:" + port
				if err := curlSignIn(curl, user, "--cacert", caFile, "--resolve", "nodepilot.internal.example:"+port+":127.0.0.1",
					"-H", "X-Client: ntlm-"+user, "-D", "-", "-o", "/dev/null", base+"/sso/me",
					"-D", "-", "-o", "/dev/null", base+"/api/whoami"); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	connOwner := map[string]string{}
	for client, heard := range heardBy(c) {
		if !strings.HasPrefix(client, "ntlm-") {
			continue
		}
		conns := map[string]bool{}
		for _, h := range heard {
			conns[h.Conn] = true
			if other, ok := connOwner[h.Conn]; ok && other != client {
				t.Errorf("node connection %s served %s and %s", h.Conn, other, client)
			}
			connOwner[h.Conn] = client
		}
		// curl's handshake and its two requests: three on one connection.
		if len(heard) != 3 || len(conns) != 1 {
			for _, h := range heard {
				t.Logf("%s: %s %s on %s, Authorization %.20q", client, h.Method, h.Path, h.Conn, h.Header.Get("Authorization"))
			}
			t.Errorf("%s: %d requests on node connections %v, want 3 on one", client, len(heard), slices.Sorted(maps.Keys(conns)))
		}
	}
	if len(connOwner) != 16 {
		t.Errorf("%d node connections for 16 curl connections", len(connOwner))
	}
}

// A node whose certificate does not verify, for the configured CA or for
// the configured name, gets no request from either proxy: both answer
// 503 and the nodes hear nothing.
func TestHAProxyDifferentialRefusesUnverifiedNodes(t *testing.T) {
	caFile, serverTLS := testPKI(t)
	otherCA, _ := testPKI(t)
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: time.Second, TLS: serverTLS}, 2)
	client := frontendClient(t, caFile)
	for _, tt := range []struct{ name, from, to string }{
		{"wrong CA", "ca-file " + caFile, "ca-file " + otherCA},
		{"wrong name", "sni str(nodepilot.internal.example) check-sni nodepilot.internal.example verifyhost nodepilot.internal.example",
			"sni str(other.example) check-sni other.example verifyhost other.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			hapCfg := strings.ReplaceAll(forBoth(seedConfig(t, c, caFile, serverTLS, hapAddr)), tt.from, tt.to)
			if !strings.Contains(hapCfg, tt.to) {
				t.Fatalf("no %q in\n%s", tt.to, hapCfg)
			}
			startHAProxy(t, hapCfg, hapAddr)
			runHAProxyConfig(t, strings.ReplaceAll(hapCfg, hapAddr, caddyAddr))
			before := received(c)
			for _, p := range []struct{ name, url string }{{"haproxy", "https://" + hapAddr}, {"caddy-ha", "https://" + caddyAddr}} {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					if a := ask(client, method, p.url+"/api/items", p.name, nil); a.status != http.StatusServiceUnavailable {
						t.Errorf("%s %s: %v, want 503", p.name, method, a)
					}
				}
			}
			if n := received(c) - before; n != 0 {
				t.Errorf("the nodes heard %d requests from unverified proxies", n)
			}
		})
	}
}

// haproxy/testdata/acl.cfg (acl, use_backend, backends without checks)
// run by HAProxy and by caddy-ha on the same plain backends: every
// request, by path, method, Host and client address, reaches a server of
// the same backend through both.
func TestHAProxyDifferentialRoutesByACL(t *testing.T) {
	// Each server answers with its name; the backend is the name less its number.
	hapAddr, caddyAddr := startNamedServersPair(t, "../haproxy/testdata/acl.cfg", func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Backend", strings.TrimRight(name, "0123456789"))
		}
	})

	lan := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	clients := map[string]*http.Client{
		"127.0.0.1": {Timeout: 10 * time.Second, Transport: &http.Transport{}},
		"127.0.0.2": {Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: lan.DialContext}},
	}
	for _, tt := range []struct{ from, method, host, path, want string }{
		{"127.0.0.1", "GET", "www.example", "/api/orders", "api"},
		{"127.0.0.1", "POST", "www.example", "/api/orders", "app"},
		{"127.0.0.2", "POST", "www.example", "/v2/orders", "api"},
		{"127.0.0.1", "GET", "www.example", "/site.css", "static"},
		{"127.0.0.1", "GET", "www.example", "/API/x.js", "static"},
		{"127.0.0.2", "GET", "ADMIN.example", "/", "admin"},
		{"127.0.0.1", "GET", "admin.example", "/app/x", "app"},
		{"127.0.0.1", "GET", "www.example", "/reports/42", "reports"},
		{"127.0.0.1", "GET", "www.example", "/reports/4x2", "app"},
		{"127.0.0.1", "GET", "www.example", "/report", "reports"},
		{"127.0.0.1", "GET", "www.example", "/report/", "app"},
		{"127.0.0.1", "GET", "other.example", "/", "admin"},
		{"127.0.0.1", "GET", "www.example", "/", "app"},
		{"127.0.0.1", "GET", "www.example", "/API/orders", "app"}, // path_beg without -i: case counts
		{"127.0.0.1", "GET", "WWW.example", "/", "admin"},         // so in hdr_beg
	} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, nil)
			req.Host = tt.host
			resp, err := clients[tt.from].Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Backend"); resp.StatusCode != 200 || got != tt.want {
				t.Errorf("%s: %s %s %s from %s: %d from backend %q, want %s", p.name, tt.method, tt.host, tt.path, tt.from, resp.StatusCode, got, tt.want)
			}
		}
	}
}

// haproxy/testdata/listen.cfg (a listen section with servers, checked,
// and a use_backend rule) run by HAProxy and by caddy-ha: a request the
// rule takes reaches the other backend, the rest the listen's own
// servers in turns, through both. (A listen with servers was refused.)
func TestHAProxyDifferentialListen(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/listen.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var repl []string
	for _, s := range []struct{ name, addr string }{{"app1", "127.0.0.1:9001"}, {"app2", "127.0.0.1:9002"}, {"files", "127.0.0.1:9003"}} {
		repl = append(repl, s.addr, httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Server", s.name)
		})))
	}
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer(append(repl, "127.0.0.1:8080", hapAddr)...).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	serverOf := func(url string) string {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Server")
	}
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		// HAProxy marks a checked server up once its first check passes.
		poll.Until(t, 10*time.Second, p.name+" to reach both servers", func() bool {
			return serverOf("http://"+p.addr+"/") != serverOf("http://"+p.addr+"/")
		})
		if got := serverOf("http://" + p.addr + "/static/site.css"); got != "files" {
			t.Errorf("%s: /static/site.css reached %q, want files (use_backend static)", p.name, got)
		}
		var got []string
		for range 4 {
			got = append(got, serverOf("http://"+p.addr+"/orders"))
		}
		if got[0] == got[1] || got[0] != got[2] || got[1] != got[3] || !slices.Contains(got, "app1") || !slices.Contains(got, "app2") {
			t.Errorf("%s: /orders reached %v, want app1 and app2 in turns", p.name, got)
		}
	}
}

// haproxy/testdata/answer.cfg (http-request deny, return, redirect, and
// redirect, an errorfile) run by HAProxy and by caddy-ha: the same status,
// Location and body for each request; one the rules answer never reaches
// the backend. Without an errorfile HAProxy's deny has an HTML body,
// caddy-ha's none (documented).
func TestHAProxyDifferentialAnswers(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/answer.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	heard := map[string]int{}
	addr := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard[r.Header.Get("X-Client")]++
		mu.Unlock()
		w.Header().Set("X-Seen", r.Header.Get("X-Seen"))
		w.Header().Set("X-Powered-By", "test")
		io.WriteString(w, "app")
	}))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:9001", addr, "127.0.0.1:8080", hapAddr,
		"testdata/429.http", "../haproxy/testdata/429.http").Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))

	lan := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	clients := map[string]*http.Client{
		"127.0.0.1": {Timeout: 10 * time.Second},
		"127.0.0.2": {Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: lan.DialContext}},
	}
	for _, c := range clients {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	type result struct {
		status         int
		location, body string
		reached        bool
	}
	for i, tt := range []struct {
		from, method, host, path string
		want                     result
	}{
		{"127.0.0.2", "GET", "www.example", "/", result{status: 403, body: "<html><body><h1>403 Forbidden</h1>\nRequest forbidden by administrative rules.\n</body></html>\n"}}, // HAProxy's own page
		{"127.0.0.1", "GET", "www.example", "/flood/x", result{status: 429, body: "Slow down, please.\n"}},                                                                      // its errorfile
		{"127.0.0.1", "GET", "www.example", "/health", result{status: 200, body: "ok, healthy"}},
		{"127.0.0.1", "GET", "www.example", "/empty", result{status: 204}},
		{"127.0.0.1", "GET", "www.example", "/old", result{status: 301, location: "/new/place"}},
		{"127.0.0.1", "GET", "www.example", "/v1/items?x=1", result{status: 302, location: "/v2/v1/items?x=1"}},
		{"127.0.0.1", "GET", "SECURE.example", "/a?b=c", result{status: 308, location: "https://SECURE.example/a?b=c"}},
		{"127.0.0.1", "POST", "www.example", "/form", result{status: 302, location: "/maintenance"}},
		{"127.0.0.1", "POST", "www.example", "/api/x", result{status: 200, body: "app", reached: true}},
		{"127.0.0.1", "GET", "www.example", "/page", result{status: 200, body: "app", reached: true}},
	} {
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			client := fmt.Sprintf("%s-%d", p.name, i)
			req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, nil)
			req.Host = tt.host
			req.Header.Set("X-Client", client)
			resp, err := clients[tt.from].Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			got := result{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(body), reached: heard[client] == 1}
			mu.Unlock()
			if tt.want.status == 403 && (resp.Header.Get("Content-Type") != "text/html" || resp.Header.Get("Cache-Control") != "no-cache") {
				t.Errorf("%s: deny's page with Content-Type %q and Cache-Control %q, want text/html and no-cache (HAProxy's own page)",
					p.name, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
			}
			if server := resp.Header.Get("Server"); server != "" {
				t.Errorf("%s: %s %s: Server %q: HAProxy adds none, nor should caddy-ha", p.name, tt.method, tt.path, server)
			}
			if (tt.path == "/health" || tt.path == "/flood/x") && resp.Header.Get("Content-Type") != "text/plain" {
				t.Errorf("%s: return's Content-Type %q, want text/plain", p.name, resp.Header.Get("Content-Type"))
			}
			if got != tt.want {
				t.Errorf("%s: %s %s %s from %s: %+v, want %+v", p.name, tt.method, tt.host, tt.path, tt.from, got, tt.want)
			}
			if got.reached && resp.Header.Get("X-Seen") != "yes" {
				t.Errorf("%s: %s: the backend did not see the set-header", p.name, tt.path)
			}
			// The backend's http-response rules, then the frontend's; none
			// for what a rule answered.
			frame, powered := resp.Header.Values("X-Frame-Options"), resp.Header.Get("X-Powered-By")
			if got.reached && (!slices.Equal(frame, []string{"DENY"}) || powered != "") ||
				!got.reached && (frame != nil || powered != "") {
				t.Errorf("%s: %s: X-Frame-Options %q, X-Powered-By %q", p.name, tt.path, frame, powered)
			}
		}
	}
}

// haproxy/testdata/retries.cfg: with retries and option redispatch, a
// request whose server refuses the connection is sent to another, by
// HAProxy and by caddy-ha alike: every request is answered 200. Without
// retries (retries 0), both fail those sent to it.
func TestHAProxyDifferentialRetries(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/retries.cfg")
	if err != nil {
		t.Fatal(err)
	}
	addr := httptestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	gone := loopback.FreeAddr() // nothing listens there
	for _, tt := range []struct {
		retries string
		want200 bool
	}{{"retries 2", true}, {"retries 0", false}} {
		t.Run(tt.retries, func(t *testing.T) {
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			cfg := strings.NewReplacer("127.0.0.1:9001", gone, "127.0.0.1:9002", addr,
				"127.0.0.1:8080", hapAddr, "retries 2", tt.retries).Replace(string(text))
			startHAProxy(t, cfg, hapAddr)
			runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
			client := &http.Client{Timeout: 10 * time.Second}
			for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
				statuses := map[int]int{}
				for range 6 {
					resp, err := client.Get("http://" + p.addr + "/")
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					statuses[resp.StatusCode]++
				}
				// A refused connection: HAProxy answers 503, Caddy 502 (documented).
				failed := map[string]int{"haproxy": 503, "caddy-ha": 502}[p.name]
				if all := statuses[200] == 6; all != tt.want200 || statuses[200]+statuses[failed] != 6 {
					t.Errorf("%s with %s: statuses %v", p.name, tt.retries, statuses)
				}
			}
		})
	}
}

// haproxy/testdata/cookie.cfg (cookie SRV insert indirect nocache): the
// first answer sets the cookie and is private; with it, every request goes
// to the same server, which never sees it (the client's other cookies it
// does), through HAProxy and through caddy-ha. Documented differences: the
// cookie's value (the server's cookie, or a hash of its address), and
// caddy-ha marks every answer private, not just those that set it.
func TestHAProxyDifferentialCookieAffinity(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/cookie.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var repl []string
	for _, name := range []string{"app1", "app2"} {
		addr := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Server", name)
			w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
			w.Header().Set("Cache-Control", "max-age=60") // cacheable: nocache applies
		}))
		repl = append(repl, map[string]string{"app1": "127.0.0.1:9001", "app2": "127.0.0.1:9002"}[name], addr)
	}
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer(append(repl, "127.0.0.1:8080", hapAddr)...).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url, cookie string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		for range 2 { // a client of each server (round robin)
			first := get("http://"+p.addr+"/", "")
			var srv *http.Cookie
			for _, c := range first.Cookies() {
				if c.Name == "SRV" {
					srv = c
				}
			}
			if cc := strings.Join(first.Header.Values("Cache-Control"), ", "); srv == nil || !strings.Contains(cc, "private") {
				t.Fatalf("%s: first answer Set-Cookie %q, Cache-Control %q: want SRV, private", p.name, first.Header.Values("Set-Cookie"), cc)
			}
			server := first.Header.Get("X-Server")
			for i := range 4 {
				resp := get("http://"+p.addr+"/", "a=1; SRV="+srv.Value+"; b=2")
				if got := resp.Header.Get("X-Server"); got != server {
					t.Errorf("%s: request %d with SRV=%s went to %s, not %s", p.name, i, srv.Value, got, server)
				}
				if got := resp.Header.Get("X-Cookie"); strings.Contains(got, "SRV") || !strings.Contains(got, "a=1") || !strings.Contains(got, "b=2") {
					t.Errorf("%s: the server saw Cookie %q: want a=1 and b=2, no SRV (indirect)", p.name, got)
				}
				if resp.Header.Get("Set-Cookie") != "" {
					t.Errorf("%s: the cookie set again: %q", p.name, resp.Header.Get("Set-Cookie"))
				}
				cc := strings.Join(resp.Header.Values("Cache-Control"), ", ")
				if strings.Contains(cc, "private") != (p.name == "caddy-ha") {
					t.Errorf("%s: Cache-Control %q on an answer that sets no cookie: the documented difference is gone", p.name, cc)
				}
			}
		}
	}
}

// haproxy/testdata/ratelimit.cfg (stick-table http_req_rate(10s),
// track-sc0 src, deny_status 429 over 5): from one address, 5 requests
// pass and the next are answered 429 and never reach the backend, through
// HAProxy and through caddy-ha (edge_rate_limit); another address has its
// own count. caddy-ha's 429 tells when to come back (Retry-After). The
// same over conn_rate (ratelimit-conn-rate.cfg): tracked by http-request
// it counts each request, on kept-alive connections too, in both.
func TestHAProxyDifferentialRateLimit(t *testing.T) {
	for _, file := range []string{"ratelimit.cfg", "ratelimit-conn-rate.cfg"} {
		t.Run(file, func(t *testing.T) { checkRateLimit(t, file) })
	}
}

// checkRateLimit runs TestHAProxyDifferentialRateLimit's requests with
// haproxy/testdata's file.
func checkRateLimit(t *testing.T, file string) {
	text, err := os.ReadFile("../haproxy/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int64
	addr := httptestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:9001", addr, "127.0.0.1:8080", hapAddr).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
			before := reached.Load()
			var statuses []int
			for range 8 {
				resp, err := client.Get("http://" + p.addr + "/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				statuses = append(statuses, resp.StatusCode)
				if resp.StatusCode == 429 && (resp.Header.Get("Retry-After") != "") != (p.name == "caddy-ha") {
					t.Errorf("%s: Retry-After %q: the documented difference is gone", p.name, resp.Header.Get("Retry-After"))
				}
			}
			if want := []int{200, 200, 200, 200, 200, 429, 429, 429}; !slices.Equal(statuses, want) || reached.Load()-before != 5 {
				t.Errorf("%s from %s: %v, %d reached the backend; want %v, 5", p.name, from, statuses, reached.Load()-before, want)
			}
		}
	}
}

// haproxy/testdata/health.cfg (balance first, option httpchk, a backup):
// HAProxy and caddy-ha send every request to the first server whose check
// passes, to the backup only when no other is up, and back once the first
// passes again. The servers' checks pass only with the configured Host.
func TestHAProxyDifferentialActiveChecks(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/health.cfg")
	if err != nil {
		t.Fatal(err)
	}
	down := map[string]*atomic.Bool{}
	var repl []string
	for _, s := range []struct{ name, addr string }{{"app1", "127.0.0.1:9001"}, {"app2", "127.0.0.1:9002"}, {"spare", "127.0.0.1:9003"}} {
		down[s.name] = new(atomic.Bool)
		addr := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" && (down[s.name].Load() || r.Host != "app.internal" || r.Method != http.MethodGet) {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Server", s.name)
		}))
		repl = append(repl, s.addr, addr)
	}
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer(append(repl, "127.0.0.1:8080", hapAddr)...).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	servedBy := func(addr string) string {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.Header.Get("X-Server")
	}
	for _, step := range []struct {
		down []string
		want string
	}{{nil, "app1"}, {[]string{"app1"}, "app2"}, {[]string{"app1", "app2"}, "spare"}, {[]string{"app2"}, "app1"}} {
		for name, d := range down {
			d.Store(slices.Contains(step.down, name))
		}
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			poll.Until(t, 10*time.Second, fmt.Sprintf("%s to send to %s with %v down", p.name, step.want, step.down), func() bool {
				return servedBy(p.addr) == step.want
			})
		}
		// Settled: it stays so.
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			for range 3 {
				if got := servedBy(p.addr); got != step.want {
					t.Fatalf("%s with %v down: served by %s, want %s", p.name, step.down, got, step.want)
				}
			}
		}
	}
}

// startCfgBackends starts a test backend (testBackends) for each server
// line of an HAProxy configuration, named as the server, and returns the
// configuration with their addresses, its frontend on hapAddr.
func startCfgBackends(t *testing.T, cfgText, hapAddr string) (string, map[string]*atomic.Bool) {
	t.Helper()
	var names, from []string
	for l := range strings.SplitSeq(cfgText, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "server" {
			names, from = append(names, f[1]), append(from, f[2])
		}
	}
	addr, down := testBackends(t, names...)
	repl := []string{"127.0.0.1:8080", hapAddr}
	for i, name := range names {
		repl = append(repl, from[i], addr[name])
	}
	return strings.NewReplacer(repl...).Replace(cfgText), down
}

// haproxy/testdata/backup.cfg (balance roundrobin, two primaries and two
// backups, checked): HAProxy and caddy-ha take the primaries in turns,
// the first backup (in the servers' order) only once both primaries fail
// their checks, the next backup when it fails too, and the primaries again
// once they pass; with option allbackups, the backups in turns.
func TestHAProxyDifferentialBackups(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/backup.cfg")
	if err != nil {
		t.Fatal(err)
	}
	type step struct{ down, want []string }
	for _, tt := range []struct {
		name, from, to string
		steps          []step
	}{
		{"first backup", "", "", []step{
			{nil, []string{"app1", "app2"}},
			{[]string{"app1"}, []string{"app2"}},
			{[]string{"app1", "app2"}, []string{"spare1"}},
			{[]string{"app1", "app2", "spare1"}, []string{"spare2"}},
			{[]string{"app1", "app2", "spare2"}, []string{"spare1"}},
			{[]string{"app2"}, []string{"app1"}},
			{nil, []string{"app1", "app2"}},
		}},
		{"allbackups", "    balance roundrobin\n", "    balance roundrobin\n    option allbackups\n", []step{
			{nil, []string{"app1", "app2"}},
			{[]string{"app1", "app2"}, []string{"spare1", "spare2"}},
			{[]string{"app1", "app2", "spare1"}, []string{"spare2"}},
			{[]string{"app2"}, []string{"app1"}},
			{nil, []string{"app1", "app2"}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
			cfg, down := startCfgBackends(t, strings.Replace(string(text), tt.from, tt.to, 1), hapAddr)
			startHAProxy(t, cfg, hapAddr)
			runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
			client := &http.Client{Timeout: 10 * time.Second}
			for _, s := range tt.steps {
				setDown(down, s.down...)
				for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
					waitForTurns(t, fmt.Sprintf("%s with %v down", p.name, s.down), func() string { return serverOf(client, "http://"+p.addr+"/") }, s.want...)
				}
			}
		})
	}
}

// haproxy/testdata/weight.cfg: balance roundrobin with weights 3 and 1
// gives the same split of 40 requests through HAProxy and caddy-ha, 30
// and 10; backend sorry (static-rr, option allbackups) 20 and 10 of 30 to
// its primaries of weight 20 and 10, none to the one of weight 0, and once
// those two fail their checks (the one of weight 0 still passing), 10 and
// 30 of 40 to its backups of weight 10 and 30.
func TestHAProxyDifferentialWeights(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/weight.cfg")
	if err != nil {
		t.Fatal(err)
	}
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg, down := startCfgBackends(t, string(text), hapAddr)
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	proxies := []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}}
	splits := map[string][]map[string]int{}
	for _, p := range proxies {
		ask := func(path string) func() string {
			return func() string { return serverOf(client, "http://"+p.addr+path) }
		}
		splits[p.name] = append(splits[p.name], split(40, ask("/")), split(30, ask("/sorry/")))
	}
	setDown(down, "web1", "web2")
	for _, p := range proxies {
		ask := func() string { return serverOf(client, "http://"+p.addr+"/sorry/") }
		poll.Until(t, 15*time.Second, p.name+" to send to the backups", func() bool { return strings.HasPrefix(ask(), "sorry") })
		splits[p.name] = append(splits[p.name], split(40, ask))
	}
	want := []map[string]int{{"big": 30, "small": 10}, {"web1": 20, "web2": 10}, {"sorry1": 10, "sorry2": 30}}
	for _, p := range proxies {
		for i, got := range splits[p.name] {
			if !maps.Equal(got, want[i]) {
				t.Errorf("%s: split %d: %v, want %v", p.name, i, got, want[i])
			}
		}
	}
}

// A rate limit per API key (haproxy/testdata/ratelimit-key.cfg: a string
// stick-table, track-sc1 req.hdr(X-API-Key) for /api, a deny over counter
// 1), beside HAProxy 2.6: each key gets its limit, requests without the
// key or off /api are never counted nor denied (issue 28). Of a key sent
// with several values (on one line with commas, or on two lines), both
// count its last: a client varying the others does not escape the limit;
// a key sent empty is counted, as the key "".
func TestHAProxyDifferentialRateLimitByKey(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/ratelimit-key.cfg")
	if err != nil {
		t.Fatal(err)
	}
	addr := httptestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:9001", addr, "127.0.0.1:8080", hapAddr).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		for _, tt := range []struct {
			keys []string // the values sent, with the request's number for %d
			path string
			want []int
		}{
			{[]string{"alpha"}, "/api/items", []int{200, 200, 200, 429, 429}},
			{[]string{"beta"}, "/api/items", []int{200, 200, 200, 429, 429}},
			{[]string{"alpha"}, "/other", []int{200, 200, 200, 200, 200}}, // not tracked here
			{nil, "/api/items", []int{200, 200, 200, 200, 200}},           // no key: nothing tracked
			{[]string{"forged%d, gamma"}, "/api/items", []int{200, 200, 200, 429, 429}},
			{[]string{"forged%d", "delta"}, "/api/items", []int{200, 200, 200, 429, 429}},
			{[]string{""}, "/api/items", []int{200, 200, 200, 429, 429}}, // sent empty: the key ""
			// A comma between double quotes is not a separator: each a key of its own.
			{[]string{`a, "q%d,z"`}, "/api/items", []int{200, 200, 200, 200, 200}},
			{[]string{`"r,z" , "a\",b"`}, "/api/items", []int{200, 200, 200, 429, 429}},
		} {
			var statuses []int
			for i := range len(tt.want) {
				req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+tt.path, nil)
				for _, k := range tt.keys {
					req.Header.Add("X-API-Key", strings.ReplaceAll(k, "%d", strconv.Itoa(i)))
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				statuses = append(statuses, resp.StatusCode)
			}
			if !slices.Equal(statuses, tt.want) {
				t.Errorf("%s: keys %q to %s: %v, want %v", p.name, tt.keys, tt.path, statuses, tt.want)
			}
		}
	}
}

// A server behind either proxy sees the Accept-Encoding the client sent,
// none where it sent none: HAProxy adds none, and the translation's
// transports ask for no gzip of their own (Go's would).
func TestHAProxyDifferentialAcceptEncoding(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{}
	addr := httptestServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Client")] = r.Header.Values("Accept-Encoding")
		mu.Unlock()
	}))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := "defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n" +
		"frontend web\n    bind " + hapAddr + "\n    default_backend app\nbackend app\n    server app1 " + addr + "\n"
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		for _, sent := range []string{"", "br"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/", nil)
			req.Header.Set("X-Client", p.name+sent)
			if sent != "" {
				req.Header.Set("Accept-Encoding", sent)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			got := seen[p.name+sent]
			mu.Unlock()
			if want := slices.DeleteFunc([]string{sent}, func(s string) bool { return s == "" }); !slices.Equal(got, want) {
				t.Errorf("%s: the client sent Accept-Encoding %q, the server saw %q", p.name, sent, got)
			}
		}
	}
}

// startNamedServersPair runs the golden configuration file (its bind
// 127.0.0.1:8080) by HAProxy and by caddy-ha, each of its "server <name>
// <address>" lines a loopback server answering with handler(name); it
// gives HAProxy's address and caddy-ha's.
func startNamedServersPair(t *testing.T, file string, handler func(name string) http.HandlerFunc) (hapAddr, caddyAddr string) {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var repl []string
	for l := range strings.SplitSeq(string(text), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "server" {
			repl = append(repl, f[2], httptestServer(t, handler(f[1])))
		}
	}
	hapAddr, caddyAddr, warnings := startBoth(t, file, "127.0.0.1:8080", repl...)
	for _, w := range warnings {
		checkKnownWarning(t, w)
	}
	return hapAddr, caddyAddr
}

// What the header rules set or add to a forwarding header reaches the
// server through caddy-ha as through HAProxy, without option forwardfor
// (reverse_proxy's own X-Forwarded-* removed): the corpus differential
// excuses a client's own forwarding headers, not the configuration's.
func TestHAProxyDifferentialRuledForwardingHeaders(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]http.Header{}
	addr := httptestServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Client")] = r.Header.Clone()
		mu.Unlock()
	}))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := "defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n" +
		"frontend web\n    bind " + hapAddr + "\n    http-request set-header X-Forwarded-Proto https\n    http-request add-header X-Forwarded-Host edge.example\n" +
		"    default_backend app\nbackend app\n    server app1 " + addr + "\n"
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/", nil)
		req.Header.Set("X-Client", p.name)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		h := seen[p.name]
		mu.Unlock()
		if got := [2][]string{h.Values("X-Forwarded-Proto"), h.Values("X-Forwarded-Host")}; !slices.Equal(got[0], []string{"https"}) || !slices.Equal(got[1], []string{"edge.example"}) {
			t.Errorf("%s: the server saw X-Forwarded-Proto %q and X-Forwarded-Host %q, want the rules' https and edge.example", p.name, got[0], got[1])
		}
	}
}

// Brute-force protection on a login form (haproxy/testdata/corpus/
// ratelimit-login-path.cfg: track-sc2 req.hdr(X-Forwarded-For,-1) of the
// POSTs to /login, a deny over sc_http_req_rate(2),sub(txn.limit) gt 0
// with txn.limit int(10)), beside HAProxy 2.6: from one last
// X-Forwarded-For value the 11th POST /login is answered 429 and never
// reaches the server; a GET of /login or a POST elsewhere is never
// limited nor counted, nor a POST without the header; a client varying the values
// before the last (on one line, or on lines before it) does not escape
// the limit (issue 28).
func TestHAProxyDifferentialRateLimitLogin(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/corpus/ratelimit-login-path.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int64
	addr := httptestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:8000", addr, "bind :8080", "bind "+hapAddr).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	runHAProxyConfig(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	client := &http.Client{Timeout: 10 * time.Second}
	passed := func(n int) []int { return slices.Repeat([]int{200}, n) }
	limited := append(passed(10), 429, 429)
	for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		poll.Until(t, 10*time.Second, p.name+" to pass GET / to its server", func() bool {
			resp, err := client.Get("http://" + p.addr + "/")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		})
		for _, tt := range []struct {
			method, path string
			xff          []string // the X-Forwarded-For lines sent, with the request's number for %d
			want         []int
		}{
			{"POST", "/login", []string{"198.51.100.7"}, limited},
			{"GET", "/login", []string{"198.51.100.7"}, passed(3)}, // over the limit, but not a POST
			{"POST", "/other", []string{"198.51.100.7"}, passed(3)},
			{"POST", "/login", nil, passed(12)}, // no header: not tracked
			{"GET", "/login", []string{"198.51.100.10"}, passed(12)},
			{"POST", "/login", []string{"198.51.100.10"}, limited}, // the GETs were not counted
			{"POST", "/login", []string{"10.0.0.%d, 198.51.100.8"}, limited},
			{"POST", "/login", []string{"10.0.0.%d", "198.51.100.9"}, limited},
		} {
			before := reached.Load()
			var statuses []int
			for i := range len(tt.want) {
				req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, nil)
				for _, v := range tt.xff {
					req.Header.Add("X-Forwarded-For", strings.ReplaceAll(v, "%d", strconv.Itoa(i)))
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				statuses = append(statuses, resp.StatusCode)
			}
			passedN := int64(len(slices.DeleteFunc(slices.Clone(tt.want), func(s int) bool { return s != 200 })))
			if !slices.Equal(statuses, tt.want) || reached.Load()-before != passedN {
				t.Errorf("%s: %s %s with X-Forwarded-For %q: %v, %d reached the server; want %v, %d", p.name, tt.method, tt.path, tt.xff, statuses, reached.Load()-before, tt.want, passedN)
			}
		}
	}
}
