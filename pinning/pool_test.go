package pinning

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

func TestHasConnectionAuth(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   bool
	}{
		{[]string{"NTLM TlRMTVNTUAABAAAA"}, true},
		{[]string{"negotiate YIIG"}, true},
		{[]string{"KERBEROS"}, true},
		{[]string{"Basic realm=x, Negotiate"}, true},
		{[]string{"Basic realm=x", "ntlm"}, true},
		{[]string{"Bearer abc"}, false},
		{[]string{"Basic dXNlcjpwdw=="}, false},
		{[]string{"NTLMish abc"}, false},
		{nil, false},
	} {
		h := http.Header{"Www-Authenticate": tt.values}
		if got := HasConnectionAuth(h, "WWW-Authenticate"); got != tt.want {
			t.Errorf("%q: %v, want %v", tt.values, got, tt.want)
		}
	}
}

func TestContinuesHandshake(t *testing.T) {
	for _, tt := range []struct {
		status int
		values []string
		want   bool
	}{
		{401, []string{"NTLM TlRMTVNTUAACAAAA"}, true},
		{401, []string{"Negotiate oYG2MIGzoAMKAQGh"}, true},
		{401, []string{"Negotiate", "NTLM"}, false},
		{401, []string{"Negotiate, NTLM"}, false},
		{200, []string{"Negotiate oRQwEqADCgEA"}, false}, // Kerberos mutual authentication: done
	} {
		resp := &http.Response{StatusCode: tt.status, Header: http.Header{"Www-Authenticate": tt.values}}
		if got := continuesHandshake(resp); got != tt.want {
			t.Errorf("%d %q: %v, want %v", tt.status, tt.values, got, tt.want)
		}
	}
}

// upstream is a real HTTP server on loopback that names the connection
// each answer went on. /challenge answers 401 with an NTLM challenge,
// /offer 401 with a bare offer, /bye closes the connection after its answer,
// /drop closes it without one.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	closed map[string]bool
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{closed: map[string]bool{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Conn", r.RemoteAddr)
		switch r.URL.Path {
		case "/challenge":
			w.Header().Set("WWW-Authenticate", "NTLM TlRMTVNTUAACAAAA")
			w.WriteHeader(http.StatusUnauthorized)
		case "/offer":
			w.Header().Add("WWW-Authenticate", "Negotiate")
			w.Header().Add("WWW-Authenticate", "NTLM")
			w.WriteHeader(http.StatusUnauthorized)
		case "/bye":
			w.Header().Set("Connection", "close")
		case "/drop": // closed under the request, nothing answered
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		}
	}))
	u.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			u.mu.Lock()
			u.closed[c.RemoteAddr().String()] = true
			u.mu.Unlock()
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) isClosed(conn string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closed[conn]
}

func (u *upstream) addr() string { return u.Listener.Addr().String() }

// client is a client connection as the proxy's server sees it: the pool
// needs it only as an identity to close.
type client struct {
	conn, peer net.Conn
}

func newClient(t *testing.T) *client {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &client{conn: a, peer: b}
}

// isClosed reports whether the pool closed the client connection.
func (c *client) isClosed() bool {
	_ = c.peer.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.peer.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// send makes one request of c's through the pool, framed as the server
// does (active, then idle), and returns the answer's upstream connection.
func send(t *testing.T, p *Pool, c *client, upstreamAddr, path string, header http.Header) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+upstreamAddr+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	req.ProtoMajor, req.ProtoMinor = 1, 1
	p.ConnState(c.conn, http.StateActive)
	resp, err := p.RoundTrip(c.conn, req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	p.ConnState(c.conn, http.StateIdle)
	return resp, err
}

func mustSend(t *testing.T, p *Pool, c *client, upstreamAddr, path string) *http.Response {
	t.Helper()
	return mustSendWith(t, p, c, upstreamAddr, path, nil)
}

func mustSendWith(t *testing.T, p *Pool, c *client, upstreamAddr, path string, header http.Header) *http.Response {
	t.Helper()
	resp, err := send(t, p, c, upstreamAddr, path, header)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// negotiate is a handshake's first credentials (an NTLM NEGOTIATE), which
// pin the client connection.
var negotiate = http.Header{"Authorization": {"NTLM TlRMTVNTUAABAAAA"}}

// signIn pins c with a handshake's first leg to path.
func signIn(t *testing.T, p *Pool, c *client, upstreamAddr, path string) *http.Response {
	t.Helper()
	return mustSendWith(t, p, c, upstreamAddr, path, negotiate)
}

func newPool(t *testing.T, cfg Config) *Pool {
	if cfg.Max == 0 {
		cfg.Max = 100
	}
	p := New(&http.Transport{}, cfg)
	t.Cleanup(p.Close)
	return p
}

func TestEachClientItsOwnUpstreamConnection(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{})
	alice, bob := newClient(t), newClient(t)
	conns := map[*client]string{}
	for i := range 3 {
		for _, c := range []*client{alice, bob} {
			header := negotiate
			if i > 0 {
				header = nil // a pinned connection stays pinned
			}
			got := mustSendWith(t, p, c, u.addr(), "/", header).Header.Get("X-Conn")
			if conns[c] == "" {
				conns[c] = got
			}
			if got != conns[c] {
				t.Fatalf("a client moved from upstream connection %s to %s", conns[c], got)
			}
		}
	}
	if conns[alice] == conns[bob] {
		t.Fatal("two clients shared an upstream connection")
	}
	if p.Len() != 2 {
		t.Fatalf("%d pins, want 2", p.Len())
	}
}

// A pin, locked by its first credentials, never gets another upstream
// connection: its client is told to sign in again and its connection
// closes.
func TestLockedPinNeverGetsAnotherConnection(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{})
	locked := newClient(t)
	up := signIn(t, p, locked, u.addr(), "/challenge").Header.Get("X-Conn")
	if resp := mustSend(t, p, locked, u.addr(), "/bye"); resp.Header.Get("X-Conn") != up {
		t.Fatal("a locked pin's request went on another connection")
	}
	poll.Until(t, time.Second, "the client connection to close once idle", locked.isClosed)
	_, err := send(t, p, locked, u.addr(), "/", nil)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Reason != RefusedPinLost || r.Status != http.StatusUnauthorized {
		t.Fatalf("a request on a lost pin: %v, want the pin_lost refusal", err)
	}
}

// A pin whose requests must go to another node: mid-handshake the client is
// told to start over; otherwise it moves there on a fresh connection and
// the old one closes.
func TestPinMovesOnlyBetweenHandshakes(t *testing.T) {
	a, b := newUpstream(t), newUpstream(t)
	p := newPool(t, Config{})

	mid := newClient(t)
	signIn(t, p, mid, a.addr(), "/challenge")
	_, err := send(t, p, mid, b.addr(), "/", http.Header{"Authorization": {"NTLM TlRMTVNTUAADAAAA"}})
	r, ok := errors.AsType[*Refusal](err)
	if !ok || r.Reason != RefusedHandshakeCut || r.Header.Get("Www-Authenticate") != "NTLM" {
		t.Fatalf("a handshake's second leg to another node: %v, want handshake_cut with NTLM offered", err)
	}
	poll.Until(t, time.Second, "the cut client's connection to close", mid.isClosed)

	done := newClient(t)
	mustSend(t, p, done, a.addr(), "/offer")
	old := signIn(t, p, done, a.addr(), "/").Header.Get("X-Conn")
	mustSend(t, p, done, b.addr(), "/")
	poll.Until(t, time.Second, "the old node's connection to close", func() bool { return a.isClosed(old) })
	if done.isClosed() {
		t.Fatal("a pin that moved between handshakes closed its client")
	}
}

func TestCapRefusesNeverShares(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{Max: 1})
	first, second := newClient(t), newClient(t)
	signIn(t, p, first, u.addr(), "/")
	_, err := send(t, p, second, u.addr(), "/", negotiate)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("beyond the cap: %v, want 503 with Retry-After", err)
	}
	p.ConnState(first.conn, http.StateClosed)
	signIn(t, p, second, u.addr(), "/")
}

func TestIdleTimeoutClosesBothEnds(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{IdleTimeout: 20 * time.Millisecond})
	c := newClient(t)
	up := signIn(t, p, c, u.addr(), "/").Header.Get("X-Conn")
	poll.Until(t, time.Second, "the idle client to be closed", c.isClosed)
	p.ConnState(c.conn, http.StateClosed) // what the server does next
	poll.Until(t, time.Second, "its upstream connection to close", func() bool { return u.isClosed(up) })
	if p.Len() != 0 {
		t.Fatalf("%d pins left", p.Len())
	}
}

func TestHTTP2And3CredentialsRefused(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.addr()+"/", nil)
	req.Header.Set("Authorization", "Negotiate YIIG")
	for _, major := range []int{2, 3} {
		req.ProtoMajor = major
		if _, err := p.RoundTrip(newClient(t).conn, req); !isRefusal(err, http.StatusHTTPVersionNotSupported) {
			t.Fatalf("HTTP/%d credentials: %v, want 505", major, err)
		}
	}
	req.Header.Del("Authorization")
	resp, err := p.RoundTrip(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p.Len() != 0 {
		t.Fatal("an HTTP/2 request was pinned")
	}
}

func isRefusal(err error, status int) bool {
	r, ok := errors.AsType[*Refusal](err)
	return ok && r.Status == status
}

// Close ends a pin whose client waits at once, and one whose client is
// being answered only once that answer is out: Caddy cleans up a config
// while its server still answers its last requests, which must not be cut
// (they were answered 502). No new pin is made after Close.
func TestCloseEndsEveryPin(t *testing.T) {
	u := newUpstream(t)
	p := New(&http.Transport{}, Config{Max: 10})
	waiting, answering := newClient(t), newClient(t)
	up := signIn(t, p, waiting, u.addr(), "/").Header.Get("X-Conn")
	busyUp := signIn(t, p, answering, u.addr(), "/").Header.Get("X-Conn")
	p.ConnState(answering.conn, http.StateActive) // its next request is being read
	p.Close()
	poll.Until(t, time.Second, "the waiting pin's upstream connection to close", func() bool { return u.isClosed(up) })
	if !waiting.isClosed() {
		t.Fatal("the waiting client connection is still open")
	}
	// The answering client's request goes on, on its own pin.
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.addr()+"/", nil)
	resp, err := p.RoundTrip(answering.conn, req)
	if err != nil {
		t.Fatalf("the busy pin's request after Close: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("X-Conn"); got != busyUp || answering.isClosed() {
		t.Fatalf("after Close the busy pin's request went on %s (want %s), client closed %v", got, busyUp, answering.isClosed())
	}
	p.ConnState(answering.conn, http.StateIdle)
	poll.Until(t, time.Second, "the answered client connection to close once it waits", answering.isClosed)
	p.ConnState(answering.conn, http.StateClosed) // as its server reports that close
	poll.Until(t, time.Second, "its upstream connection to close", func() bool { return u.isClosed(busyUp) })
	if p.Len() != 0 {
		t.Fatalf("%d pins after Close and the last answer", p.Len())
	}
	if _, err := send(t, p, newClient(t), u.addr(), "/", negotiate); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("a new pin after Close: %v", err)
	}
}

// The pin's request path against a shared transport's, to the same real
// upstream on loopback: the difference is what finding the pin, checking
// the headers and cloning nothing costs per request.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.ProtoMajor, req.ProtoMinor = 1, 1
	do := func(b *testing.B, rt func(*http.Request) (*http.Response, error)) {
		for b.Loop() {
			resp, err := rt(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("shared", func(b *testing.B) {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		do(b, tr.RoundTrip)
	})
	b.Run("pinned", func(b *testing.B) {
		p := New(&http.Transport{}, Config{Max: 10})
		defer p.Close()
		conn, peer := net.Pipe()
		defer peer.Close()
		pinned := req.Clone(req.Context())
		pinned.Header = negotiate.Clone()
		do(b, func(*http.Request) (*http.Response, error) { return p.RoundTrip(conn, pinned) })
	})
}

// Clients that never sent connection-based credentials share upstream
// connections, as the stock transport does, and take no pin; they are
// never served on a pinned (authenticated) connection. A client answering
// a shared connection's offer with credentials gets a fresh connection of
// its own for the handshake.
func TestAnonymousClientsShareCleanConnections(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{Max: 1})
	alice := newClient(t)
	pinned := signIn(t, p, alice, u.addr(), "/").Header.Get("X-Conn")
	shared := map[string]bool{}
	for range 3 {
		for _, c := range []*client{newClient(t), newClient(t)} {
			conn := mustSend(t, p, c, u.addr(), "/").Header.Get("X-Conn")
			if conn == pinned {
				t.Fatalf("an anonymous client was served on alice's pinned connection %s", conn)
			}
			shared[conn] = true
		}
	}
	if len(shared) != 1 {
		t.Errorf("6 anonymous requests one after another went on %d upstream connections, want 1 shared", len(shared))
	}
	if p.Len() != 1 {
		t.Fatalf("%d pins, want alice's only", p.Len())
	}

	p.ConnState(alice.conn, http.StateClosed)
	bob := newClient(t)
	offer := mustSend(t, p, bob, u.addr(), "/offer").Header.Get("X-Conn")
	if !shared[offer] {
		t.Fatalf("bob's anonymous request went on %s, not the shared connection", offer)
	}
	own := signIn(t, p, bob, u.addr(), "/challenge").Header.Get("X-Conn")
	if shared[own] || own == pinned {
		t.Fatalf("bob's credentials went on %s, not a fresh connection", own)
	}
	if got := mustSend(t, p, bob, u.addr(), "/").Header.Get("X-Conn"); got != own {
		t.Fatalf("bob's anonymous request after his credentials went on %s, not his pin %s", got, own)
	}
	if got := mustSend(t, p, newClient(t), u.addr(), "/").Header.Get("X-Conn"); !shared[got] {
		t.Fatalf("an anonymous client after bob's sign-in went on %s, not the shared connection", got)
	}
}

// A handshake begun and never completed holds its pin for HandshakeTimeout
// only; then the pin ends and both connections close. A completed one
// keeps its pin.
func TestHandshakeTimeoutEndsIncompletePins(t *testing.T) {
	u := newUpstream(t)
	// Long enough for the completed handshake's two legs on a loaded machine.
	const timeout = 500 * time.Millisecond
	p := newPool(t, Config{HandshakeTimeout: timeout})
	done, stalled := newClient(t), newClient(t)
	signIn(t, p, done, u.addr(), "/challenge")
	mustSendWith(t, p, done, u.addr(), "/", http.Header{"Authorization": {"NTLM TlRMTVNTUAADAAAA"}})
	start := time.Now()
	up := signIn(t, p, stalled, u.addr(), "/challenge").Header.Get("X-Conn")
	poll.Until(t, 5*time.Second, "the stalled handshake's client connection to close", stalled.isClosed)
	if waited := time.Since(start); waited < timeout {
		t.Fatalf("the stalled handshake was cut after %s, before its %s", waited, timeout)
	}
	poll.Until(t, time.Second, "its upstream connection to close", func() bool { return u.isClosed(up) })
	if p.Len() != 1 || done.isClosed() {
		t.Fatalf("%d pins, completed client closed %v: want the completed pin kept", p.Len(), done.isClosed())
	}
}

// addrConn is a client connection from a given address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func clientFrom(t *testing.T, ip string) *client {
	c := newClient(t)
	c.conn = addrConn{Conn: c.conn, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	return c
}

// One address holds at most MaxPerClient pins; beyond them it is refused
// at once, and other addresses are not.
func TestPerClientCap(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{MaxPerClient: 2, PinWait: time.Minute})
	first := clientFrom(t, "192.0.2.1")
	signIn(t, p, first, u.addr(), "/")
	signIn(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/")
	start := time.Now()
	_, err := send(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/", negotiate)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Reason != RefusedClientCap || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a third pin of one address: %v, want the client_cap refusal", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the client_cap refusal took %s: it must not wait", waited)
	}
	signIn(t, p, clientFrom(t, "192.0.2.2"), u.addr(), "/")
	p.ConnState(first.conn, http.StateClosed)
	signIn(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/")
	if p.Len() != 3 {
		t.Fatalf("%d pins, want 3", p.Len())
	}
}

// At Max a new pin waits up to PinWait: it gets a pin that ends within
// the wait, and 503 after it.
func TestPinWaitsAtCap(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{Max: 1, PinWait: time.Minute})
	first, second := newClient(t), newClient(t)
	signIn(t, p, first, u.addr(), "/")
	got := make(chan error, 1)
	go func() {
		_, err := send(t, p, second, u.addr(), "/", negotiate)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a pin at the cap did not wait: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	p.ConnState(first.conn, http.StateClosed)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a waiting pin once one ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting pin got no pin that ended")
	}

	const wait = 100 * time.Millisecond
	short := newPool(t, Config{Max: 1, PinWait: wait})
	signIn(t, short, newClient(t), u.addr(), "/")
	start := time.Now()
	_, err := send(t, short, newClient(t), u.addr(), "/", negotiate)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Reason != RefusedAtCap {
		t.Fatalf("after the wait: %v, want the cap refusal", err)
	}
	if waited := time.Since(start); waited < wait {
		t.Fatalf("refused after %s, before the %s wait", waited, wait)
	}
}

// Only a handshake's last leg, accepted, completes a sign-in: garbage or a
// first message answered 200 by a path served anonymously does not.
func TestCompletesHandshake(t *testing.T) {
	ntlm := func(msgType byte) string {
		return base64.StdEncoding.EncodeToString(append([]byte("NTLMSSP\x00"), msgType, 0, 0, 0))
	}
	spnegoWithNTLM := base64.StdEncoding.EncodeToString(append([]byte{0x60, 0x28, 0x06, 0x06}, []byte("NTLMSSP\x00\x01\x00\x00\x00")...))
	kerberos := base64.StdEncoding.EncodeToString([]byte{0x60, 0x82, 0x01, 0x00, 0x06, 0x09})
	for _, tt := range []struct {
		auth   string
		status int
		want   bool
	}{
		{"NTLM " + ntlm(3), 200, true},
		{"Negotiate " + ntlm(3), 204, true},
		{"Negotiate " + kerberos, 200, true},
		{"Kerberos " + kerberos, 302, true},
		{"NTLM " + ntlm(3), 401, false},
		{"NTLM " + ntlm(3), 403, false},
		{"NTLM " + ntlm(1), 200, false},
		{"Negotiate " + spnegoWithNTLM, 200, false},
		{"NTLM Zm9v", 200, false},
		{"Negotiate Zm9v", 200, false},
		{"NTLM !!!", 200, false},
		{"Basic " + ntlm(3), 200, false},
	} {
		req := &http.Request{Header: http.Header{"Authorization": {tt.auth}}}
		if got := completesHandshake(req, &http.Response{StatusCode: tt.status}); got != tt.want {
			t.Errorf("%s answered %d: %v, want %v", tt.auth, tt.status, got, tt.want)
		}
	}
}

// Credentials that are no handshake's last leg hold a pin only until
// HandshakeTimeout, even where the upstream answers them 200 (a path it
// serves anonymously): before, any answer but 401 counted as signed in.
func TestBogusCredentialsDoNotStopTheHandshakeTimer(t *testing.T) {
	u := newUpstream(t)
	const timeout = 300 * time.Millisecond
	p := newPool(t, Config{HandshakeTimeout: timeout})
	bogus := newClient(t)
	mustSendWith(t, p, bogus, u.addr(), "/", http.Header{"Authorization": {"NTLM Zm9v"}})
	poll.Until(t, 5*time.Second, "the bogus pin to end, its client connection closed", func() bool { return bogus.isClosed() && p.Len() == 0 })
}

// authenticate is an NTLM AUTHENTICATE message: answered 200, it signs the
// pin in (see completesHandshake).
var authenticate = http.Header{"Authorization": {"NTLM " + base64.StdEncoding.EncodeToString([]byte("NTLMSSP\x00\x03\x00\x00\x00"))}}

// Issue 26.1: MaxHandshakesPerClient counts one address's handshakes in
// progress, never its signed-in pins: a terminal server's hundreds of
// users sign in from one address, while handshakes begun and never
// finished are capped, and a handshake that signs in frees its place.
func TestHandshakeCapCountsOnlySignInsInProgress(t *testing.T) {
	u := newUpstream(t)
	const limit, users = 3, 40
	const wait = 300 * time.Millisecond
	p := newPool(t, Config{MaxHandshakesPerClient: limit, PinWait: wait})
	for range users {
		c := clientFrom(t, "192.0.2.1")
		signIn(t, p, c, u.addr(), "/")
		mustSendWith(t, p, c, u.addr(), "/", authenticate)
	}
	var stalled []*client
	for range limit {
		c := clientFrom(t, "192.0.2.1")
		signIn(t, p, c, u.addr(), "/challenge")
		stalled = append(stalled, c)
	}
	start := time.Now()
	_, err := send(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/", negotiate)
	r, ok := errors.AsType[*Refusal](err)
	if !ok || r.Reason != RefusedHandshakeCap || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" ||
		r.Client != "192.0.2.1" || r.Limit != limit {
		t.Fatalf("a handshake beyond %d in progress: %v %+v, want the handshake_cap refusal naming the address", limit, err, r)
	}
	if waited := time.Since(start); waited < wait {
		t.Fatalf("refused after %s, before its %s wait for a place", waited, wait)
	}
	signIn(t, p, clientFrom(t, "192.0.2.2"), u.addr(), "/") // another address
	// A handshake waiting at the cap gets the place of one that signs in.
	p.cfg.PinWait = time.Minute
	waited := make(chan error, 1)
	go func() {
		_, err := send(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/", negotiate)
		waited <- err
	}()
	poll.Until(t, 5*time.Second, "a handshake to wait at the cap", func() bool { return p.waiting.Load() == 1 })
	mustSendWith(t, p, stalled[0], u.addr(), "/", authenticate)
	if err := <-waited; err != nil {
		t.Fatalf("the handshake waiting at the cap once another signed in: %v", err)
	}
	// One ends unsigned: its place is free too.
	p.ConnState(stalled[1].conn, http.StateClosed)
	signIn(t, p, clientFrom(t, "192.0.2.1"), u.addr(), "/")
	if got, want := p.Len(), users+limit+2; got != want {
		t.Fatalf("%d pins, want %d", got, want)
	}
}

// An IPv6 host's addresses share one per-client cap by their /64.
func TestPerClientCapCountsIPv6ByPrefix(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{MaxPerClient: 1, PinWait: time.Minute})
	signIn(t, p, clientFrom(t, "2001:db8::1"), u.addr(), "/")
	_, err := send(t, p, clientFrom(t, "2001:db8::2"), u.addr(), "/", negotiate)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Reason != RefusedClientCap {
		t.Fatalf("a second address of the same /64: %v, want the client_cap refusal", err)
	}
	signIn(t, p, clientFrom(t, "2001:db8:0:1::1"), u.addr(), "/")
	signIn(t, p, clientFrom(t, "192.0.2.7"), u.addr(), "/")
}

// An upstream connection that closed while its pin waited, which the idle
// watch hears only when the next request stops it, is a lost pin (401, a
// fresh challenge) for a signed-in pin, and a fresh connection for one that
// never was: never an error the client cannot recover from (it was a 502,
// "use of closed network connection", at a node's planned stop).
func TestUpstreamClosedUnderTheNextRequest(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{})
	closeUnderneath := func(c *client) {
		v, _ := p.pins.Load(c.conn)
		pn := v.(*pin)
		pn.mu.Lock()
		uc := pn.conn
		pn.mu.Unlock()
		_ = uc.Conn.Close() // not through upstreamConn: nobody has heard yet
	}
	locked := newClient(t)
	signIn(t, p, locked, u.addr(), "/challenge")
	closeUnderneath(locked)
	_, err := send(t, p, locked, u.addr(), "/", nil)
	if r, ok := errors.AsType[*Refusal](err); !ok || r.Reason != RefusedPinLost || r.Status != http.StatusUnauthorized {
		t.Fatalf("a request on a signed-in pin whose upstream closed: %v, want the pin_lost refusal", err)
	}

	fresh := newClient(t)
	first := mustSendWith(t, p, fresh, u.addr(), "/", negotiate).Header.Get("X-Conn") // answered 200: not locked by a challenge
	v, _ := p.pins.Load(fresh.conn)
	v.(*pin).mu.Lock()
	v.(*pin).locked = false // a pin that has not seen connection authentication yet
	v.(*pin).mu.Unlock()
	closeUnderneath(fresh)
	if got := mustSend(t, p, fresh, u.addr(), "/").Header.Get("X-Conn"); got == "" || got == first {
		t.Fatalf("an unlocked pin's request after its upstream closed went on %q (first %q), want a fresh connection", got, first)
	}
}

// A signed-in pin's kept-alive connection that its upstream closes under
// an idempotent request, answering nothing (a node's planned stop closing
// its idle connections as the request arrives), is a lost pin: 401, sign
// in again, never a 502 (make chaos's "leader planned stop" had 8 in a
// run). A write that may have run stays the proxy's error.
func TestUpstreamClosedUnderAnIdempotentRequest(t *testing.T) {
	u := newUpstream(t)
	p := newPool(t, Config{})
	for _, tt := range []struct {
		method string
		header http.Header
		lost   bool
	}{
		{http.MethodGet, nil, true},
		{http.MethodPost, http.Header{"Idempotency-Key": {"k1"}}, true},
		{http.MethodPost, nil, false},
	} {
		c := newClient(t)
		signIn(t, p, c, u.addr(), "/challenge")
		req, _ := http.NewRequest(tt.method, "http://"+u.addr()+"/drop", nil)
		maps.Copy(req.Header, tt.header)
		req.ProtoMajor, req.ProtoMinor = 1, 1
		p.ConnState(c.conn, http.StateActive)
		_, err := p.RoundTrip(c.conn, req)
		r, refused := errors.AsType[*Refusal](err)
		switch {
		case tt.lost && (!refused || r.Reason != RefusedPinLost || r.Status != http.StatusUnauthorized):
			t.Errorf("%s %v closed under it: %v, want the pin_lost refusal", tt.method, tt.header, err)
		case !tt.lost && (refused || err == nil):
			t.Errorf("%s closed under it: %v, want the proxy's error", tt.method, err)
		}
		p.ConnState(c.conn, http.StateIdle)
		if !c.isClosed() {
			t.Errorf("%s %v: the client connection of a lost pin stays open", tt.method, tt.header)
		}
	}
}

// deadlineResetter is a connection that sets its own read deadline before
// each read, as reverse_proxy's read_timeout wrapper does, and reaches its
// read late, as a goroutine on a loaded machine does.
type deadlineResetter struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineResetter) Read(b []byte) (int, error) {
	time.Sleep(50 * time.Millisecond) // the late start, not a synchronisation
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(b)
}

// The next exchange on a pin stops the idle watch even on a connection
// that re-arms its read deadline before each read: before, the watch read
// on until that deadline (reverse_proxy's read_timeout), and a sign-in's
// next leg stalled that long (10 s, then sent again on another connection,
// in the HAProxy adapter's comparison test).
func TestNextExchangeStopsTheWatchOfADeadlineResettingConn(t *testing.T) {
	u := newUpstream(t)
	const readTimeout = 30 * time.Second
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineResetter{Conn: c, timeout: readTimeout}, nil
	}}
	p := New(tr, Config{Max: 10})
	t.Cleanup(p.Close)
	c := newClient(t)
	first := signIn(t, p, c, u.addr(), "/challenge").Header.Get("X-Conn")
	start := time.Now()
	second := mustSendWith(t, p, c, u.addr(), "/", http.Header{"Authorization": {"NTLM TlRMTVNTUAADAAAA"}}).Header.Get("X-Conn")
	if took := time.Since(start); took > readTimeout/3 || second != first {
		t.Fatalf("the second leg took %v on %s (first on %s): the watch read on until the connection's own deadline", took, second, first)
	}
}
