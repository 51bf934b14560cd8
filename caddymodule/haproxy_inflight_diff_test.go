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

// heldGet sends GET / on a connection of its own to addr and returns the
// connection (open, for the test to close) and the answer's status; the
// exchange is bounded by 10s.
func heldGet(addr string) (net.Conn, int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: inflight.example\r\n\r\n")); err != nil {
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
// the 21st is answered 429; once they end, the next passes.
func TestHAProxyDifferentialInFlight(t *testing.T) {
	text, err := os.ReadFile("../haproxy/testdata/inflight.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, proxy := range []string{"haproxy", "caddy-ha"} {
		t.Run(proxy, func(t *testing.T) {
			b := newHeldBackend(t)
			addr := loopback.FreeAddr()
			cfg := strings.NewReplacer("127.0.0.1:9001", strings.TrimPrefix(b.URL, "http://"), "127.0.0.1:8080", addr).Replace(string(text))
			if proxy == "haproxy" {
				startHAProxy(t, cfg, addr)
			} else {
				runHAProxyConfig(t, cfg)
			}
			for i := range 21 {
				b.release <- struct{}{}
				c, status, err := heldGet(addr)
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
			held := make(chan result, 20)
			for range 20 {
				go func() {
					c, status, err := heldGet(addr)
					held <- result{c, status, err}
				}()
			}
			b.waitArrived(t, 20) // the 20th in progress has passed
			c, status, err := heldGet(addr)
			if c != nil {
				c.Close()
			}
			if err != nil || status != 429 {
				t.Errorf("the 21st request in progress: %d %v, want 429", status, err)
			}
			for range 20 {
				b.release <- struct{}{}
			}
			for range 20 {
				r := <-held
				if r.conn != nil {
					r.conn.Close()
				}
				if r.err != nil || r.status != 200 {
					t.Errorf("a request held in progress: %d %v, want 200", r.status, r.err)
				}
			}
			b.release <- struct{}{}
			c, status, err = heldGet(addr)
			if c != nil {
				c.Close()
			}
			if err != nil || status != 200 {
				t.Errorf("a request once the others ended: %d %v, want 200", status, err)
			}
		})
	}
}
