package caddymodule

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// haproxy/testdata/logformat.cfg run by HAProxy and by caddy-ha: the
// headers its log-format values make (the client's address and port, the
// frontend's, Host, method, URL, query, %%, the machine's name, a header
// of the request, sent twice and with commas, in double quotes too, the URL encoded) reach the server as the same bytes, the header rules
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
		w.Header().Set("X-Powered-By", "test")
		w.Header().Set("X-Api-Answer", "server")
		io.WriteString(w, "app")
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	// And a TLS frontend, for ssl_fc and ssl_fc_sni.
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, pemBytes, err := ca.Issue("shop.example")
	if err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(t.TempDir(), "shop.pem")
	if err := os.WriteFile(crt, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	text = append(text, "\nfrontend tls\n    bind 127.0.0.1:8443 ssl crt "+crt+"\n"+
		"    http-request set-header X-Path \"%[path] ssl=%[ssl_fc] sni=%[ssl_fc_sni] v%[req.ver] %[url]\"\n    default_backend app\n"...)
	hapAddr, caddyAddr := map[string]string{}, map[string]string{}
	for _, front := range []string{"web", "forwarded", "tls"} {
		hapAddr[front], caddyAddr[front] = loopback.FreeAddr(), loopback.FreeAddr()
	}
	hap := strings.NewReplacer("127.0.0.1:9001", ln.Addr().String(), "127.0.0.1:8080", hapAddr["web"], "127.0.0.1:8081", hapAddr["forwarded"],
		"127.0.0.1:8443", hapAddr["tls"]).Replace(string(text))
	startHAProxy(t, hap, hapAddr["web"], hapAddr["forwarded"], hapAddr["tls"])
	_, _, warnings := runHAProxyConfigWarned(t, strings.NewReplacer(hapAddr["web"], caddyAddr["web"], hapAddr["forwarded"], caddyAddr["forwarded"],
		hapAddr["tls"], caddyAddr["tls"]).Replace(hap))
	if len(warnings) != 3 || !slices.ContainsFunc(warnings, func(w caddyconfig.Warning) bool {
		return strings.Contains(w.Message, "url_enc of url is Caddy's {http.request.uri_escaped}")
	}) {
		t.Errorf("warnings %v, want the forwarding headers' of web and tls, and url_enc's", warnings)
	}

	compared := []string{"X-Client-Addr", "X-Conn", "X-Front", "X-Host", "X-Request", "X-Percent", "X-Literal", "X-Node",
		"X-Tag", "X-Path", "X-Url-Enc", "X-Api", "X-Secret", "X-Method-Seen", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}
	type result struct {
		status             int
		location, servedTo string
		body               string
		answered           map[string][]string // the response headers the rules set
		headers            map[string][]string
	}
	for i, tt := range []struct {
		front, method, host, path string
		header                    map[string]string
		reached                   bool
	}{
		{"web", "GET", "www.example", "/", nil, true},
		{"web", "GET", "www.example:8080", "/api/items?x=1&y=%41", map[string]string{"X-Tag": "blue", "X-Secret": "s3", "X-Api": "forged"}, true},
		{"web", "POST", "www.example", "/form?", map[string]string{"X-Secret": "s3", "X-Method-Seen": "client"}, true},
		{"web", "POST", "www.example", "/api/new", map[string]string{"X-Tag": " a , b "}, true},
		{"web", "GET", "www.example", "/tags", map[string]string{"X-Tag": "a, b\nc,d ,\te"}, true},
		// A comma between double quotes does not separate.
		{"web", "GET", "www.example", "/tags", map[string]string{"X-Tag": `a, "b,c"`}, true},
		{"web", "GET", "www.example", "/tags", map[string]string{"X-Tag": `x` + "\n" + `a, "d\",e" `}, true},
		{"web", "GET", "www.example", "/tags", map[string]string{"X-Tag": `a, "open,x`}, true},
		{"web", "HEAD", "www.example", "/p%61th/x%2Fy", map[string]string{"X-Secret": "s3"}, true},
		{"web", "GET", "shop.example", "/secure/cart?id=7", nil, false},
		{"web", "GET", "shop.example:81", "/v1/list?q=a%20b", nil, false},
		{"web", "GET", "shop.example", "/old", nil, false},
		{"web", "GET", "shop.example", "/whoami", nil, false},
		// option forwardfor, and rules with a condition on the forwarding
		// headers: the client's as sent where none holds, none where the
		// client sent none.
		{"forwarded", "GET", "www.example", "/", nil, true},
		{"forwarded", "GET", "www.example", "/tls/x", nil, true},
		{"forwarded", "POST", "www.example:8081", "/", nil, true},
		{"forwarded", "GET", "www.example", "/", map[string]string{"X-Forwarded-Proto": "gopher", "X-Forwarded-Host": "forged.example", "X-Forwarded-For": "10.1.2.3"}, true},
		{"forwarded", "POST", "www.example", "/nohost/", map[string]string{"X-Forwarded-Host": "forged.example"}, true},
		{"tls", "GET", "shop.example", "/p%61th?q=1", nil, true},
	} {
		var results []result
		for _, p := range []struct{ name, addr string }{{"haproxy", hapAddr[tt.front]}, {"caddy-ha", caddyAddr[tt.front]}} {
			id := fmt.Sprintf("%s %d", p.name, i)
			scheme := map[bool]string{true: "https", false: "http"}[tt.front == "tls"]
			req, _ := http.NewRequest(tt.method, scheme+"://"+p.addr+tt.path, nil)
			req.Host = tt.host
			req.Header.Set("X-Test-Id", id)
			for k, v := range tt.header {
				for line := range strings.SplitSeq(v, "\n") {
					req.Header.Add(k, line)
				}
			}
			var local string
			req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(c httptrace.GotConnInfo) { local = c.Conn.LocalAddr().String() },
			}))
			// A round trip: no redirect followed, no Location parsed.
			resp, err := (&http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 10 * time.Second,
				TLSClientConfig: &tls.Config{ServerName: "shop.example", InsecureSkipVerify: true}}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_, cport, _ := net.SplitHostPort(local)
			_, fport, _ := net.SplitHostPort(p.addr)
			ports := strings.NewReplacer(":"+cport, ":<client port>", ":"+fport, ":<frontend port>")
			got := result{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), servedTo: resp.Header.Get("X-Served-For"), headers: map[string][]string{},
				answered: map[string][]string{"X-Api-Answer": resp.Header.Values("X-Api-Answer"), "X-Powered-By": resp.Header.Values("X-Powered-By")}}
			mu.Lock()
			h, reached := seen[id]
			mu.Unlock()
			if reached != tt.reached {
				t.Errorf("%s: reached the server: %v, want %v", id, reached, tt.reached)
			}
			// Each header's lines joined, as one (RFC 9110, 5.3).
			for _, name := range compared {
				if v, ok := h[http.CanonicalHeaderKey(name)]; ok {
					got.headers[name] = []string{ports.Replace(strings.Join(v, ", "))}
				}
			}
			results = append(results, got)
		}
		hap, cad := results[0], results[1]
		t.Logf("%s %s %s: %+v", tt.front, tt.method, tt.path, hap)
		if !maps.EqualFunc(hap.answered, cad.answered, slices.Equal) {
			t.Errorf("%s %s %s: the client got %v from haproxy, %v from caddy-ha", tt.front, tt.method, tt.path, hap.answered, cad.answered)
		}
		if hap.status != cad.status || hap.location != cad.location || hap.servedTo != cad.servedTo || hap.body != cad.body {
			t.Errorf("%s %s %s: haproxy answered %d, Location %q, X-Served-For %q, %q; caddy-ha %d, %q, %q, %q",
				tt.front, tt.method, tt.path, hap.status, hap.location, hap.servedTo, hap.body, cad.status, cad.location, cad.servedTo, cad.body)
		}
		for _, name := range compared {
			if !slices.Equal(hap.headers[name], cad.headers[name]) {
				t.Errorf("%s %s %s: the server saw %s %q from haproxy, %q from caddy-ha", tt.front, tt.method, tt.path, name, hap.headers[name], cad.headers[name])
			}
		}
		if tt.front == "web" && tt.reached && len(hap.headers["X-Conn"]) == 0 {
			t.Errorf("%s %s: the server saw no X-Conn from haproxy", tt.method, tt.path)
		}
	}
}
