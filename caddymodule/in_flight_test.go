package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// heldBackend answers each request once the test releases it, telling the
// test when a request has arrived.
type heldBackend struct {
	*httptest.Server
	arrived chan struct{}
	release chan struct{}
}

func newHeldBackend(t *testing.T) *heldBackend {
	b := &heldBackend{arrived: make(chan struct{}, 64), release: make(chan struct{}, 64)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.arrived <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(b.Close)
	return b
}

// waitArrived waits, at most 5s, for n requests to reach the backend.
func (b *heldBackend) waitArrived(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-b.arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d requests reached the backend", i, n)
		}
	}
}

// A client's requests in progress count, this one included; one that
// ends gives its place back.
func TestInFlightCountsTheClientsRequestsInProgress(t *testing.T) {
	b := newHeldBackend(t)
	tc := startCaddy(t, nil, "", `route {
		in_flight {
			size 10
		}
		header X-In-Flight {http.in_flight.count}
		@over expression `+"`{http.in_flight.count} > 2`"+`
		respond @over 429
		reverse_proxy `+strings.TrimPrefix(b.URL, "http://")+`
	}`)
	client := &http.Client{Timeout: 5 * time.Second}
	statuses := make(chan int, 4)
	get := func() {
		resp, err := client.Get(tc.url("/"))
		if err != nil {
			statuses <- 0
			return
		}
		resp.Body.Close()
		statuses <- resp.StatusCode
	}
	for range 2 {
		go get()
	}
	b.waitArrived(t, 2)
	resp, err := client.Get(tc.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("X-In-Flight") != "3" {
		t.Fatalf("the third request in progress: %d, count %q; want 429, 3", resp.StatusCode, resp.Header.Get("X-In-Flight"))
	}
	b.release <- struct{}{}
	if s := <-statuses; s != 200 {
		t.Fatalf("a held request: %d, want 200", s)
	}
	go get()
	b.waitArrived(t, 1) // one place back: the next request passes
	b.release <- struct{}{}
	b.release <- struct{}{}
	for range 2 {
		if s := <-statuses; s != 200 {
			t.Fatalf("a held request: %d, want 200", s)
		}
	}
	b.release <- struct{}{} // for the next request, alone again
	resp, err = client.Get(tc.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-In-Flight") != "1" {
		t.Fatalf("alone again: %d, count %q; want 200, 1", resp.StatusCode, resp.Header.Get("X-In-Flight"))
	}
}

// A bad in_flight is refused when the Caddyfile is adapted, with its line.
func TestInFlightRefusesBadSettings(t *testing.T) {
	for block, want := range map[string]string{
		"in_flight":                          "in_flight: size must be at least 1, got 0, at Caddyfile:2",
		"in_flight {\n\tsize 0\n}":           "size must be a whole number of at least 1, got 0, at Caddyfile:3",
		"in_flight {\n\tmax 3\n}":            "unrecognized in_flight option 'max'",
		"in_flight 3":                        "wrong argument count",
		"in_flight {\n\tsize 1\n\tsize 2\n}": "duplicate size option",
	} {
		cf := "http://127.0.0.1:1 {\n" + block + "\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", block, err, want)
		}
	}
}
