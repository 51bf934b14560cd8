package caddymodule

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-ha/caddy-ha/internal/hadiff"
)

// haproxy/testdata/grpc-h2c.cfg through HAProxy 2.6 and caddy-ha to
// servers that speak HTTP/2 in clear only (proto h2, versions h2c): a
// client's HTTP/1.1 request reaches the server over HTTP/2 from both,
// with the request line and headers the harness compares alike; and a
// gRPC-like POST (application/grpc, TE: trailers) gets the server's
// answer and its trailers through both.
func TestHAProxyDifferentialH2C(t *testing.T) {
	backends := hadiff.NewBackends()
	t.Cleanup(backends.Close)
	var replace []string
	for _, s := range []struct{ id, addr string }{{"grpc_orders/orders1", "127.0.0.1:6001"}, {"grpc_orders/orders2", "127.0.0.1:6002"}} {
		addr, err := backends.StartH2C(s.id)
		if err != nil {
			t.Fatal(err)
		}
		replace = append(replace, s.addr, addr)
	}
	grpc := startGRPCLike(t)
	replace = append(replace, "127.0.0.1:6011", grpc.addr)
	hapAddr, caddyAddr, _ := startBoth(t, "../haproxy/testdata/grpc-h2c.cfg", "127.0.0.1:8080", replace...)
	hap, caddy := hadiff.Target{Addr: hapAddr}, hadiff.Target{Addr: caddyAddr}

	for i, req := range []hadiff.Request{
		{Method: "GET", Host: "grpc.example", Target: "/orders.v1.OrderService/List?page=2"},
		{Method: "POST", Host: "grpc.example", Target: "/orders.v1.OrderService/Create", Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"7"}}},
		{Method: "DELETE", Host: "grpc.example:8080", Target: "/orders.v1.OrderService/Delete/7", Header: http.Header{"Authorization": {"Bearer t"}, "Accept": {"a/b, c/d"}}},
	} {
		n := fmt.Sprintf("h2c-%d", i)
		h := hadiff.Send(hap, req, n+"-haproxy", nil)
		h.Seen = backends.Seen(n + "-haproxy")
		c := hadiff.Send(caddy, req, n+"-caddy-ha", nil)
		c.Seen = backends.Seen(n + "-caddy-ha")
		h.MaskBindPort(hapAddr)
		c.MaskBindPort(caddyAddr)
		for _, o := range []struct {
			proxy string
			out   hadiff.Outcome
		}{{"HAProxy", h}, {"caddy-ha", c}} {
			if o.out.Status != http.StatusOK || len(o.out.Seen) != 1 || !strings.HasSuffix(o.out.Seen[0].Line, " HTTP/2.0") {
				t.Errorf("%s through %s: status %d, %s, seen %+v: want 200 from a server reached over HTTP/2", req, o.proxy, o.out.Status, o.out.Err, o.out.Seen)
			}
		}
		for _, d := range hadiff.Compare(h, c, map[string]bool{"grpc_orders": true}) {
			t.Errorf("%s: %s", req, d)
		}
	}

	for _, proxy := range []struct{ name, addr string }{{"HAProxy", hapAddr}, {"caddy-ha", caddyAddr}} {
		status, body, trailer := sendGRPCLike(t, proxy.addr, proxy.name)
		seen := grpc.seen(proxy.name)
		if status != http.StatusOK || body != "reply to 7 bytes" || trailer != "0" {
			t.Errorf("gRPC-like POST through %s: %d %q, Grpc-Status trailer %q; want 200 \"reply to 7 bytes\" \"0\"", proxy.name, status, body, trailer)
		}
		if seen != "HTTP/2.0 POST /users.v1.UserService/Get application/grpc trailers 7" {
			t.Errorf("gRPC-like POST through %s: the server saw %q", proxy.name, seen)
		}
	}
}

// grpcLike is a server speaking HTTP/2 in clear only that answers as a
// gRPC server does: the reply, then the status as a trailer. It records,
// by the request's X-Client, its protocol, method, path, Content-Type, TE
// and body length.
type grpcLike struct {
	addr string
	mu   sync.Mutex
	got  map[string]string
}

func startGRPCLike(t *testing.T) *grpcLike {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &grpcLike{addr: ln.Addr().String(), got: map[string]string{}}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.got[r.Header.Get("X-Client")] = fmt.Sprintf("%s %s %s %s %s %d", r.Proto, r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Te"), len(body))
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "reply to %d bytes", len(body))
		w.(http.Flusher).Flush() // streamed, as gRPC's: no Content-Length
		w.Header().Set("Grpc-Status", "0")
	})}
	go srv.Serve(ln) //nolint:errcheck // until Close
	t.Cleanup(func() { srv.Close() })
	return g
}

func (g *grpcLike) seen(client string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got[client]
}

// sendGRPCLike posts a gRPC-like request over HTTP/1.1 to addr as client
// and returns the answer's status, body and Grpc-Status trailer.
func sendGRPCLike(t *testing.T, addr, client string) (status int, body, trailer string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/users.v1.UserService/Get", strings.NewReader("message"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("X-Client", client)
	resp, err := (&http.Client{Timeout: hadiff.Timeout}).Do(req)
	if err != nil {
		t.Fatalf("gRPC-like POST through %s: %v", client, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Trailer.Get("Grpc-Status")
}
