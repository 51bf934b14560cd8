package healthcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func probeOnce(t *testing.T, p *HTTPProber, addr string, timeout time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Probe(ctx, addr)
}

func TestHTTPProberAnswers(t *testing.T) {
	const good = `{"status":"leader","nodeId":"node-a","leaseExpiresAt":"2026-01-01T00:00:30Z","leaseEpoch":7,"lastRenewAt":"2026-01-01T00:00:00Z"}`
	tests := []struct {
		name       string
		status     int
		body       string
		bare       bool
		wantLeader bool
		wantEpoch  int64
		wantLeft   time.Duration
	}{
		{"leader", 200, good, false, true, 7, 30 * time.Second},
		{"follower 503", 503, `{"status":"follower"}`, false, false, 0, 0},
		{"200 not JSON", 200, `<html>ok</html>`, false, false, 0, 0},
		{"200 not JSON, bare accepted", 200, `ok`, true, true, 0, 0},
		{"200 empty, bare accepted", 200, ``, true, true, 0, 0},
		{"200 status follower", 200, `{"status":"follower","leaseEpoch":3}`, false, false, 0, 0},
		{"200 without epoch", 200, `{"status":"leader","nodeId":"x"}`, false, false, 0, 0},
		{"200 negative epoch", 200, `{"status":"leader","leaseEpoch":-1}`, false, false, 0, 0},
		{"200 epoch as string", 200, `{"status":"leader","leaseEpoch":"7"}`, false, false, 0, 0},
		{"200 huge body", 200, `{"status":"leader","leaseEpoch":7,"pad":"` + strings.Repeat("x", 1<<20) + `"}`, false, false, 0, 0},
		{"200 without lease times", 200, `{"status":"leader","leaseEpoch":2}`, false, true, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz/leader" || r.Host != "cluster.internal" {
					http.Error(w, "wrong request "+r.Host+r.URL.Path, 400)
					return
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := &HTTPProber{Client: srv.Client(), Scheme: "http", URI: "/healthz/leader", Host: "cluster.internal", AcceptBare200: tc.bare}
			r := probeOnce(t, p, srv.Listener.Addr().String(), time.Second)
			if !r.Answered || r.Status != tc.status {
				t.Fatalf("answered=%v status=%d err=%v", r.Answered, r.Status, r.Err)
			}
			if r.Leader != tc.wantLeader || r.Epoch != tc.wantEpoch || r.LeaseLeft != tc.wantLeft {
				t.Fatalf("leader=%v epoch=%d left=%v (err %v), want %v %d %v", r.Leader, r.Epoch, r.LeaseLeft, r.Err, tc.wantLeader, tc.wantEpoch, tc.wantLeft)
			}
		})
	}
}

func TestHTTPProberRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &HTTPProber{Client: &http.Client{}, Scheme: "http", URI: "/healthz/leader"}
	if r := probeOnce(t, p, addr, time.Second); r.Answered || r.Err == nil {
		t.Fatalf("refused port answered: %+v", r)
	}
}

// A node that accepts the connection and never answers must cost one
// timeout, not a hang.
func TestHTTPProberNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	p := &HTTPProber{Client: &http.Client{}, Scheme: "http", URI: "/healthz/leader"}
	start := time.Now()
	r := probeOnce(t, p, ln.Addr().String(), 100*time.Millisecond)
	if r.Answered || r.Err == nil {
		t.Fatalf("silent node answered: %+v", r)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("probe of a silent node took %v", el)
	}
}

// A node that sends headers and then stalls mid-body is not an answer.
func TestHTTPProberStallsMidBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		w.Write([]byte(`{"status":"leader",`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p := &HTTPProber{Client: srv.Client(), Scheme: "http", URI: "/healthz/leader"}
	if r := probeOnce(t, p, srv.Listener.Addr().String(), 100*time.Millisecond); r.Answered || r.Leader {
		t.Fatalf("stalled answer taken: %+v", r)
	}
}

// A probe's Duration is how long it took (the probe latency that the
// metrics and the status page show): before, it was always 0.
func TestHTTPProberMeasuresDuration(t *testing.T) {
	const delay = 30 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay) // a slow node, not a synchronisation
		w.WriteHeader(503)
	}))
	defer srv.Close()
	p := &HTTPProber{Client: srv.Client(), Scheme: "http", URI: "/healthz/leader"}
	if r := probeOnce(t, p, srv.Listener.Addr().String(), time.Second); r.Duration < delay || r.Duration > time.Second {
		t.Fatalf("duration %v of a probe answered after %v", r.Duration, delay)
	}
}
