package caddymodule

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// haproxy/testdata/logformat.cfg run by HAProxy and by caddy-ha: the
// headers its log-format values make (the client's address and port, the
// frontend's, Host, method, URL, query, %%, the machine's name, a header
// of the request) reach the server as the same bytes, the header rules
// with a condition apply to the same requests in the order written, and
// the redirects built of samples send the client to the same Location.
// The client's port and the frontend's, which differ between the two,
// are compared as the ports each connection had.
func TestHAProxyDifferentialLogFormat(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/logformat.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]http.Header{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Test-Id")] = r.Header.Clone()
		mu.Unlock()
		io.WriteString(w, "app")
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	hapAddr, caddyAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := strings.NewReplacer("127.0.0.1:9001", ln.Addr().String(), "127.0.0.1:8080", hapAddr).Replace(string(text))
	startHAProxy(t, cfg, hapAddr)
	_, _, warnings := runHAProxyConfigWarned(t, strings.ReplaceAll(cfg, hapAddr, caddyAddr))
	if len(warnings) != 2 || !strings.Contains(warnings[1].Message, "hdr: HAProxy takes the header's last value") {
		t.Errorf("warnings %v, want the forwarding headers' and hdr(x-tag)'s", warnings)
	}

	compared := []string{"X-Client-Addr", "X-Conn", "X-Front", "X-Host", "X-Request", "X-Percent", "X-Literal", "X-Node",
		"X-Tag", "X-Api", "X-Secret", "X-Method-Seen"}
	type result struct {
		status             int
		location, servedTo string
		headers            map[string][]string
	}
	for _, tt := range []struct {
		method, host, path string
		header             map[string]string
		reached            bool
	}{
		{"GET", "www.example", "/", nil, true},
		{"GET", "www.example:8080", "/api/items?x=1&y=%41", map[string]string{"X-Tag": "blue", "X-Secret": "s3", "X-Api": "forged"}, true},
		{"POST", "www.example", "/form?", map[string]string{"X-Secret": "s3", "X-Method-Seen": "client"}, true},
		{"HEAD", "www.example", "/p%61th/{x}", map[string]string{"X-Secret": "s3"}, true},
		{"GET", "shop.example", "/secure/cart?id=7", nil, false},
		{"GET", "shop.example:81", "/v1/list?q=a%20b", nil, false},
		{"GET", "shop.example", "/old", nil, false},
	} {
		var results []result
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr}, {"caddy-ha", caddyAddr}} {
			id := p.name + " " + tt.method + " " + tt.path
			req, _ := http.NewRequest(tt.method, "http://"+p.addr+tt.path, nil)
			req.Host = tt.host
			req.Header.Set("X-Test-Id", id)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			var local string
			req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(c httptrace.GotConnInfo) { local = c.Conn.LocalAddr().String() },
			}))
			// A round trip: no redirect followed, no Location parsed.
			resp, err := (&http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 10 * time.Second}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the headers are compared
			resp.Body.Close()
			_, cport, _ := net.SplitHostPort(local)
			_, fport, _ := net.SplitHostPort(p.addr)
			ports := strings.NewReplacer(":"+cport, ":<client port>", ":"+fport, ":<frontend port>")
			got := result{status: resp.StatusCode, location: resp.Header.Get("Location"), servedTo: resp.Header.Get("X-Served-For"), headers: map[string][]string{}}
			mu.Lock()
			h, reached := seen[id]
			mu.Unlock()
			if reached != tt.reached {
				t.Errorf("%s: reached the server: %v, want %v", id, reached, tt.reached)
			}
			for _, name := range compared {
				for _, v := range h.Values(name) {
					got.headers[name] = append(got.headers[name], ports.Replace(v))
				}
			}
			results = append(results, got)
		}
		hap, cad := results[0], results[1]
		if hap.status != cad.status || hap.location != cad.location || hap.servedTo != cad.servedTo {
			t.Errorf("%s %s: haproxy answered %d, Location %q, X-Served-For %q; caddy-ha %d, %q, %q",
				tt.method, tt.path, hap.status, hap.location, hap.servedTo, cad.status, cad.location, cad.servedTo)
		}
		for _, name := range compared {
			if !slices.Equal(hap.headers[name], cad.headers[name]) {
				t.Errorf("%s %s: the server saw %s %q from haproxy, %q from caddy-ha", tt.method, tt.path, name, hap.headers[name], cad.headers[name])
			}
		}
		if tt.reached && len(hap.headers["X-Conn"]) == 0 {
			t.Errorf("%s %s: the server saw no X-Conn from haproxy", tt.method, tt.path)
		}
		t.Logf("%s %s: %+v", tt.method, tt.path, hap)
	}
}
