package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Cloudflare's ranges as the suite serves them: the "Cloudflare" edge is
// 127.0.0.2 (loopback holds all of 127.0.0.0/8), a peer outside them is
// 127.0.0.3. cloudflare_ranges refreshes every cloudflareRefresh, so a
// failing download happens several times within a fault.
const (
	cloudflareEdge    = "127.0.0.2"
	cloudflareOutside = "127.0.0.3"
	cloudflareRefresh = 500 * time.Millisecond
)

// cloudflareLists serves Cloudflare's two lists on loopback, or answers 500
// while failing is set.
type cloudflareLists struct {
	addr    string
	srv     *http.Server
	done    chan struct{}
	failing atomic.Bool
}

func startCloudflareLists() (*cloudflareLists, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &cloudflareLists{addr: ln.Addr().String(), done: make(chan struct{})}
	c.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case c.failing.Load():
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
		case req.URL.Path == "/ips-v4":
			io.WriteString(w, cloudflareEdge+"/32\n")
		case req.URL.Path == "/ips-v6":
			io.WriteString(w, "2001:db8:cf::/48\n")
		default:
			http.NotFound(w, req)
		}
	})}
	go func() {
		defer close(c.done)
		if err := c.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("the Cloudflare lists stopped:", err)
		}
	}()
	return c, nil
}

func (c *cloudflareLists) close() {
	_ = c.srv.Close()
	<-c.done
}

// waitTrusted waits until cloudflare_ranges has loaded the lists: a
// CF-Connecting-IP from the edge is believed.
func (c *cloudflareLists) waitTrusted(r *rig, timeout time.Duration) error {
	client := cloudflareClient(cloudflareEdge, time.Second)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		got, err := cloudflareAsk(client, r.url("/cf/ready"), "203.0.113.1")
		if err == nil && got == "203.0.113.1" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cloudflare_ranges trusts no edge within %v: %q, %v", timeout, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cloudflareClient sends from the local address from.
func cloudflareClient(from string, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4}}
}

// cloudflareAsk sends a request with CF-Connecting-IP: client and returns
// the client the site resolved.
func cloudflareAsk(c *http.Client, url, client string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("CF-Connecting-IP", client)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return strings.TrimSpace(string(body)), err
}
