package caddymodule

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// heldGet sends GET / on a connection of its own to addr, after a PROXY
// header saying it comes from client if client is not "", and returns
// the connection (open, for the test to close) and the answer's status;
// the exchange is bounded by 10s.
func heldGet(addr, client string) (net.Conn, int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: inflight.example\r\n\r\n"
	if client != "" {
		req = "PROXY TCP4 " + client + " 127.0.0.1 40000 8080\r\n" + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return c, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, 0, err
	}
	resp.Body.Close()
	return c, resp.StatusCode, nil
}

// haproxy/testdata/inflight.cfg (sc_conn_cur(0) gt 20 after track-sc0
// src) beside HAProxy 2.6: 21 idle kept-alive connections of a client
// count nothing; of its requests in progress at once the 20th passes and
// the 21st is answered 429; once they end, the next passes. Behind
// accept-proxy the client is the PROXY header's: another client, through
// the same peer, passes while the first has 20 in progress.
func TestHAProxyDifferentialInFlight(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/inflight.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, proxy := range []string{"haproxy", "caddy-ha"} {
		for _, client := range []string{"", "192.0.2.7"} {
			name := proxy
			if client != "" {
				name += "/accept-proxy"
			}
			t.Run(name, func(t *testing.T) { checkInFlight(t, proxy, string(text), client) })
		}
	}
}

// checkInFlight runs TestHAProxyDifferentialInFlight's requests through
// proxy, from client through a PROXY header if it is not "".
func checkInFlight(t *testing.T, proxy, text, client string) {
	b := newHeldBackend(t)
	addr := loopback.FreeAddr()
	bind := addr
	if client != "" {
		bind += " accept-proxy"
	}
	cfg := strings.NewReplacer("127.0.0.1:9001", strings.TrimPrefix(b.URL, "http://"), "127.0.0.1:8080", bind).Replace(text)
	if proxy == "haproxy" {
		startHAProxy(t, cfg, addr)
	} else {
		runHAProxyConfig(t, cfg)
	}
	for i := range 21 {
		b.release <- struct{}{}
		c, status, err := heldGet(addr, client)
		if c != nil {
			defer c.Close() // kept open, idle, to the end
		}
		if err != nil || status != 200 {
			t.Fatalf("request %d, each on a connection kept open: %d %v, want 200", i+1, status, err)
		}
	}
	b.waitArrived(t, 21)
	type result struct {
		conn   net.Conn
		status int
		err    error
	}
	held := make(chan result, 21)
	hold := func(from string) {
		c, status, err := heldGet(addr, from)
		held <- result{c, status, err}
	}
	for range 20 {
		go hold(client)
	}
	b.waitArrived(t, 20) // the 20th in progress has passed
	c, status, err := heldGet(addr, client)
	if c != nil {
		c.Close()
	}
	if err != nil || status != 429 {
		t.Errorf("the 21st request in progress: %d %v, want 429", status, err)
	}
	inProgress := 20
	if client != "" {
		go hold("192.0.2.8")
		b.waitArrived(t, 1) // another client's passes meanwhile
		inProgress++
	}
	for range inProgress {
		b.release <- struct{}{}
	}
	for range inProgress {
		r := <-held
		if r.conn != nil {
			r.conn.Close()
		}
		if r.err != nil || r.status != 200 {
			t.Errorf("a request held in progress: %d %v, want 200", r.status, r.err)
		}
	}
	b.release <- struct{}{}
	c, status, err = heldGet(addr, client)
	if c != nil {
		c.Close()
	}
	if err != nil || status != 200 {
		t.Errorf("a request once the others ended: %d %v, want 200", status, err)
	}
}
