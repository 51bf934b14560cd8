package caddymodule

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 64 kept-alive clients without credentials, each with a request in flight
// at once, round after round, reuse the backend connections of the first
// round: transport pinned's shared pool keeps an idle connection for each
// (up to max_pinned), where the http transport's 32 per host closed half of
// them after each round and dialed them again (160 connections in 4 rounds).
func TestPinnedSharedPoolKeepsAConnectionPerClient(t *testing.T) {
	const clients, rounds = 64, 4
	var dialed, arrived atomic.Int64
	// The backend holds each round's requests until all of them are in, so
	// that the proxy needs a connection for each at once.
	all := make([]chan struct{}, rounds)
	for i := range all {
		all[i] = make(chan struct{})
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := arrived.Add(1)
		round := all[min((n-1)/clients, rounds-1)]
		if n%clients == 0 {
			close(round)
		}
		select {
		case <-round:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "ok")
	}))
	backend.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	backend.Start()
	t.Cleanup(backend.Close)
	tc := startCaddy(t, nil, "servers {\n\t\tprotocols h1\n\t}",
		"reverse_proxy "+strings.TrimPrefix(backend.URL, "http://")+" {\n\t\ttransport pinned\n\t}")

	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	t.Cleanup(client.CloseIdleConnections)
	for round := range rounds {
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				resp, err := client.Get(tc.url("/"))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("round %d: status %d", round, resp.StatusCode)
				}
			})
		}
		wg.Wait()
	}
	if n := dialed.Load(); n > clients {
		t.Fatalf("the backend accepted %d connections for %d rounds of %d clients at once, want at most %d", n, rounds, clients, clients)
	}
}
