package pinning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EndReason says why a pin ended.
type EndReason string

// Why pins end.
const (
	// EndClientClosed: the client connection closed.
	EndClientClosed EndReason = "client_closed"
	// EndUpstreamClosed: the upstream closed a locked pin's connection, so
	// the client connection was closed too.
	EndUpstreamClosed EndReason = "upstream_closed"
	// EndFailover: the request had to go to another node; the client
	// connection goes on with a pin there.
	EndFailover EndReason = "failover"
	// EndIdle: the client connection waited IdleTimeout for a request.
	EndIdle EndReason = "idle"
	// EndUpgraded: the connection was upgraded (a WebSocket); the stream
	// owns both connections now and closes them when it ends.
	EndUpgraded EndReason = "upgraded"
	// EndPoolClosed: the pool was closed (its config was unloaded).
	EndPoolClosed EndReason = "pool_closed"
	// EndHandshakeTimeout: no handshake completed within HandshakeTimeout
	// of the pin's first credentials; the client connection was closed.
	EndHandshakeTimeout EndReason = "handshake_timeout"
)

// Observer hears what a pool does, for logs and metrics. Its methods are
// called without the pool's locks held and must not block.
type Observer interface {
	// Pinned: a client connection got an upstream connection of its own.
	Pinned()
	// Ended: a pin ended.
	Ended(EndReason)
	// Refused: a request was answered by the pool itself.
	Refused(*Refusal)
	// Panicked: a timer callback or a pin's goroutine panicked (and was
	// recovered).
	Panicked(v any, stack []byte)
}

// Config sets a pool's bounds.
type Config struct {
	// Max is the most client connections pinned at once. At Max a new pin
	// waits up to PinWait for one to end, then its request is refused
	// (503, RefusedAtCap); it is never sent on a shared connection.
	Max int
	// MaxHandshakesPerClient is the most handshakes in progress of one
	// client address (the client connection's remote IP; for IPv6 its
	// /64) at once: pins, held or waited for, that have not signed in (see
	// completesHandshake). At it a new pin waits up to PinWait for one of
	// them to sign in or end (a real handshake takes milliseconds: a
	// terminal server's users signing in at once queue that long), then is
	// refused (503, RefusedHandshakeCap). Signed-in pins do not count: they
	// cost an attacker a real sign-in, and a terminal server puts hundreds
	// of signed-in users behind one address. 0: no cap.
	MaxHandshakesPerClient int
	// MaxPerClient is the most pins, signed in or not, held or waited for,
	// of one client address at once. Beyond it a new pin is refused at
	// once (503, RefusedClientCap). 0: no cap (Max bounds them all).
	MaxPerClient int
	// PinWait is how long a new pin waits for a free one at Max. 0: none.
	PinWait time.Duration
	// HandshakeTimeout ends a pin, and closes its client connection, when
	// it has not signed in (see completesHandshake) within this time of its
	// first credentials: a handshake begun and never completed holds no
	// pin for longer. 0: never.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a pinned client connection (and its upstream
	// connection) that waited this long for its next request, as HAProxy's
	// timeout http-keep-alive does. 0: never.
	IdleTimeout time.Duration
	// Observer, if set, hears of pins and refusals.
	Observer Observer
}

// Pool holds the pins of one upstream set: at most one upstream
// connection per client connection that sent connection-based
// credentials, never shared.
type Pool struct {
	template *http.Transport
	// shared carries the requests of client connections that never sent
	// connection-based credentials, pooled as the stock transport pools
	// them: its upstream connections never carry any, so they never
	// become someone's.
	shared *http.Transport
	cfg    Config

	pins  sync.Map      // net.Conn (the client's) → *pin
	slots chan struct{} // one element per pin held; capacity Max
	done  chan struct{} // closed by Close, for pins waiting for a slot

	mu        sync.Mutex
	perClient map[string]clientPins // by client address; no zeros
	// handshakeEnded is closed, and replaced, when a handshake of any
	// address signs in or ends, for pins waiting at their address's cap.
	handshakeEnded chan struct{}
	waiting        atomic.Int64 // pins waiting at their address's handshake cap

	closed atomic.Bool
}

// ErrPoolClosed is returned by RoundTrip after Close.
var ErrPoolClosed = errors.New("pinning: pool closed")

// errPinLost refuses a second upstream connection for a locked pin.
var errPinLost = errors.New("pinning: the upstream closed this client's authenticated connection; a pinned client never gets another")

// New returns a pool whose pins each have one kept-alive HTTP/1.1
// connection, made with template's dialers and TLS settings, that never
// times out on its own: the pin's client connection decides its life (see
// conn.go). Requests that need no pin share a clone of template.
func New(template *http.Transport, cfg Config) *Pool {
	return &Pool{
		template: template, shared: template.Clone(), cfg: cfg,
		slots: make(chan struct{}, max(cfg.Max, 0)), done: make(chan struct{}),
		perClient: map[string]clientPins{}, handshakeEnded: make(chan struct{}),
	}
}

// clientPins counts one client address's pins, held or waited for.
type clientPins struct {
	pins       int // all of them
	handshakes int // those not signed in
}

// Len returns how many client connections are pinned.
func (p *Pool) Len() int { return len(p.slots) }

// RoundTrip sends req, which arrived on client connection client (nil if
// unknown). A client connection is pinned from its first request with
// connection-based credentials for the rest of its life: such requests go
// on its pin, its own upstream connection to req.URL.Host. Requests of a
// client connection that never sent such credentials need no pin and go
// on the shared transport. Requests the pool answers itself (see
// Refusal) come back as a *Refusal error. Requests over HTTP/2 or HTTP/3
// cannot carry connection-based authentication: with such credentials
// they are refused (505); without, they are shared.
func (p *Pool) RoundTrip(client net.Conn, req *http.Request) (*http.Response, error) {
	credentials := HasConnectionAuth(req.Header, "Authorization")
	if client == nil || req.ProtoMajor != 1 {
		if credentials {
			return nil, p.refuse(refusedUnpinnable(req.ProtoMajor))
		}
		return p.shared.RoundTrip(req)
	}
	if v, ok := p.pins.Load(client); ok {
		return v.(*pin).roundTrip(req)
	}
	if !credentials {
		return p.shared.RoundTrip(req)
	}
	if p.closed.Load() {
		return nil, ErrPoolClosed // no new pins: the config is going
	}
	pn, err := p.pin(req.Context(), client)
	if err != nil {
		return nil, err
	}
	return pn.roundTrip(req)
}

// pin binds client to a new pin, once a slot is free (see acquire).
func (p *Pool) pin(ctx context.Context, client net.Conn) (*pin, error) {
	addr := clientAddr(client)
	if err := p.acquire(ctx, addr); err != nil {
		return nil, err
	}
	pn := p.newPin(client, addr)
	if v, loaded := p.pins.LoadOrStore(client, pn); loaded {
		p.release(addr, true)
		return v.(*pin), nil
	}
	p.observe(func(o Observer) { o.Pinned() })
	if timeout := p.cfg.HandshakeTimeout; timeout > 0 {
		pn.mu.Lock()
		pn.handshake = time.AfterFunc(timeout, pn.handshakeExpired)
		pn.mu.Unlock()
	}
	if p.closed.Load() { // Close ran meanwhile and did not see this pin
		p.pins.Delete(client)
		pn.end(EndPoolClosed, true)
		return nil, ErrPoolClosed
	}
	return pn, nil
}

// clientAddr is the address MaxPerClient counts by: the client's IP, and
// for IPv6 its /64, which one host can fill with addresses of its own.
func clientAddr(c net.Conn) string {
	a := c.RemoteAddr().String()
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		prefix, _ := ip.Prefix(64)
		return prefix.String()
	}
	return host
}

// acquire takes a slot for a new pin (a handshake beginning) of client
// address addr: never more than MaxPerClient pins for addr; once fewer
// than MaxHandshakesPerClient handshakes of addr are in progress; then
// below Max. Each wait is for the first place freed within what is left
// of PinWait. Waiters are not served in strict order.
func (p *Pool) acquire(ctx context.Context, addr string) error {
	wait := time.NewTimer(max(p.cfg.PinWait, 0))
	defer wait.Stop()
	if err := p.countHandshake(ctx, addr, wait.C); err != nil {
		return err
	}
	err := p.takeSlot(ctx, addr, wait.C)
	if err != nil {
		p.forget(addr, true, true)
	}
	return err
}

// countHandshake counts a new pin and its handshake for addr, waiting
// until expired while addr is at MaxHandshakesPerClient.
func (p *Pool) countHandshake(ctx context.Context, addr string, expired <-chan time.Time) error {
	p.mu.Lock()
	for {
		n := p.perClient[addr]
		if limit := p.cfg.MaxPerClient; limit > 0 && n.pins >= limit {
			p.mu.Unlock()
			return p.refuse(refusedClientCap(limit, addr))
		}
		limit := p.cfg.MaxHandshakesPerClient
		if limit <= 0 || n.handshakes < limit {
			p.perClient[addr] = clientPins{pins: n.pins + 1, handshakes: n.handshakes + 1}
			p.mu.Unlock()
			return nil
		}
		ended := p.handshakeEnded
		p.mu.Unlock()
		if err := p.await(ctx, ended, expired, refusedHandshakeCap(limit, addr)); err != nil {
			return err
		}
		p.mu.Lock()
	}
}

// takeSlot takes one of Max slots, waiting until expired for one.
func (p *Pool) takeSlot(ctx context.Context, addr string, expired <-chan time.Time) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	if p.cfg.PinWait <= 0 {
		return p.refuse(refusedAtCap(p.cfg.Max, 0, addr))
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-expired:
		return p.refuse(refusedAtCap(p.cfg.Max, p.cfg.PinWait, addr))
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrPoolClosed
	}
}

// await waits for ended until expired, when atCap is the answer; without
// PinWait it answers atCap at once.
func (p *Pool) await(ctx context.Context, ended <-chan struct{}, expired <-chan time.Time, atCap *Refusal) error {
	if p.cfg.PinWait <= 0 {
		return p.refuse(atCap)
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	select {
	case <-ended:
		return nil
	case <-expired:
		return p.refuse(atCap)
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrPoolClosed
	}
}

// release frees the slot of a pin of client address addr, and its
// handshake's count if it never signed in.
func (p *Pool) release(addr string, handshake bool) {
	<-p.slots
	p.forget(addr, true, handshake)
}

// forget takes a pin and its handshake, or its handshake alone, off
// addr's counts.
func (p *Pool) forget(addr string, pin, handshake bool) {
	p.mu.Lock()
	n := p.perClient[addr]
	if pin {
		n.pins--
	}
	if handshake {
		n.handshakes--
		close(p.handshakeEnded)
		p.handshakeEnded = make(chan struct{})
	}
	if n.pins > 0 {
		p.perClient[addr] = n
	} else {
		delete(p.perClient, addr)
	}
	p.mu.Unlock()
}

// ConnState is the HTTP server's connection hook: it tells pins when
// their client connection waits, works, closes or is upgraded.
func (p *Pool) ConnState(c net.Conn, s http.ConnState) {
	v, ok := p.pins.Load(c)
	if !ok {
		return
	}
	pn := v.(*pin)
	switch s {
	case http.StateActive:
		pn.setIdle(false)
	case http.StateIdle:
		pn.setIdle(true)
	case http.StateClosed:
		p.pins.Delete(c)
		pn.end(EndClientClosed, true)
	case http.StateHijacked:
		p.pins.Delete(c)
		pn.end(EndUpgraded, false)
	}
}

// Close ends every pin, closing its client and upstream connections: a
// pin whose client waits for its next request at once, one whose client is
// being answered once that answer is out (its client's next wait), since
// Caddy cleans up a config while its server still answers its last
// requests. Those requests keep their pins and the shared connections; no
// new pin is made. Upgraded connections belong to their stream and are
// left to it.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.done)
	p.pins.Range(func(k, v any) bool {
		pn := v.(*pin)
		pn.mu.Lock()
		busy := !pn.idle && !pn.ended
		if busy {
			pn.closeOnIdle = EndPoolClosed
		}
		pn.mu.Unlock()
		if !busy {
			p.pins.Delete(k)
			pn.end(EndPoolClosed, true)
			_ = pn.client.Close()
		}
		return true
	})
	p.shared.CloseIdleConnections()
}

func (p *Pool) observe(f func(Observer)) {
	if p.cfg.Observer != nil {
		f(p.cfg.Observer)
	}
}

func (p *Pool) refuse(r *Refusal) *Refusal {
	p.observe(func(o Observer) { o.Refused(r) })
	return r
}

// pin is one client connection's binding to one upstream connection.
type pin struct {
	pool   *Pool
	client net.Conn
	addr   string // the client's, as the per-client caps count it

	mu   sync.Mutex
	node string        // the upstream address of the binding
	conn *upstreamConn // its connection; nil before the first dial
	// locked: the binding has seen connection-based authentication, so its
	// connection is never replaced.
	locked bool
	// lost: a locked binding's connection closed; the client must go.
	lost bool
	// midHandshake: the last answer was a challenge that the client's next
	// request answers on the same connection.
	midHandshake bool
	schemes      []string // the connection-based schemes the upstream offered
	// authenticated: a handshake's last leg was accepted (see
	// completesHandshake), so the handshake timer is stopped for good and
	// the pin no longer counts as its address's handshake.
	authenticated bool
	handshake     *time.Timer // ends the pin at HandshakeTimeout
	idle          bool
	closeOnIdle   EndReason // set: close the client connection once it waits
	reason        EndReason // why the pool closed the client connection
	timer         *time.Timer
	ended         bool
}

func (p *Pool) newPin(client net.Conn, addr string) *pin {
	return &pin{pool: p, client: client, addr: addr}
}

func (pn *pin) roundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	pn.mu.Lock()
	if pn.lost {
		pn.closeOnIdle = EndUpstreamClosed
		schemes := pn.schemes
		pn.mu.Unlock()
		return nil, pn.pool.refuse(refusedRestart(RefusedPinLost, schemes))
	}
	var old *upstreamConn
	moved := pn.node != "" && pn.node != addr
	if moved {
		if pn.midHandshake {
			// The handshake's next leg belongs to the old node's
			// connection, and nothing may go there now: start over.
			pn.closeOnIdle = EndFailover
			schemes := pn.schemes
			pn.mu.Unlock()
			return nil, pn.pool.refuse(refusedRestart(RefusedHandshakeCut, schemes))
		}
		old, pn.conn, pn.locked = pn.conn, nil, false
	}
	pn.node = addr
	pn.mu.Unlock()
	if old != nil { // not after a dial that failed: nothing was bound
		old.closeByPin()
		pn.pool.observe(func(o Observer) { o.Ended(EndFailover); o.Pinned() })
	}

	resp, err := pn.exchange(req)
	if err != nil {
		return nil, pn.lostUnder(req, err)
	}
	pn.mu.Lock()
	credentials := HasConnectionAuth(req.Header, "Authorization")
	if credentials || HasConnectionAuth(resp.Header, "WWW-Authenticate") {
		pn.locked = true
	}
	signedIn := credentials && !pn.authenticated && !pn.ended && completesHandshake(req, resp)
	if signedIn {
		pn.authenticated = true
		if pn.handshake != nil {
			pn.handshake.Stop()
		}
	}
	pn.midHandshake = continuesHandshake(resp)
	if s := offeredSchemes(resp.Header); len(s) > 0 {
		pn.schemes = s
	}
	pn.mu.Unlock()
	if signedIn {
		pn.pool.forget(pn.addr, false, true)
	}
	return resp, nil
}

// lostUnder is what a request whose exchange failed with err gets. A
// signed-in pin's kept-alive connection that its upstream closed under an
// idempotent request, answering nothing, is a lost pin: the client is
// told to sign in again (and its connection closes after), as when the
// connection closed while it waited, and its browser sends the request
// again with its new credentials, which an idempotent request allows
// whether it ran or not. Any other failure is the proxy's error (a 502):
// a write that may have run is not to be sent again.
func (pn *pin) lostUnder(req *http.Request, err error) error {
	if _, ok := errors.AsType[*noAnswerError](err); !ok || !idempotent(req) {
		return err
	}
	pn.mu.Lock()
	lost, schemes := pn.lost, pn.schemes
	pn.mu.Unlock()
	if !lost {
		return err
	}
	return pn.pool.refuse(refusedRestart(RefusedPinLost, schemes))
}

// idempotent reports whether req may be sent again without asking its
// client, by net/http's rule: an idempotent method, or an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xKey := req.Header["X-Idempotency-Key"]
	return key || xKey
}

// upstreamClosed hears that the binding's connection closed. If the pool
// did not close it and the binding is locked, the client connection must
// go too: now if it waits, else once its current answer is done.
func (pn *pin) upstreamClosed(uc *upstreamConn) {
	pn.mu.Lock()
	if pn.conn != uc || uc.byPin.Load() || pn.ended {
		pn.mu.Unlock()
		return
	}
	pn.conn = nil
	closeNow := false
	if pn.locked {
		pn.lost = true
		if pn.idle {
			pn.reason, closeNow = EndUpstreamClosed, true
		} else {
			pn.closeOnIdle = EndUpstreamClosed
		}
	}
	pn.mu.Unlock()
	if closeNow {
		_ = pn.client.Close()
	}
}

func (pn *pin) setIdle(idle bool) {
	pn.mu.Lock()
	pn.idle = idle
	closeNow := false
	switch timeout := pn.pool.cfg.IdleTimeout; {
	case idle && pn.closeOnIdle != "":
		pn.reason, closeNow = pn.closeOnIdle, true
	case idle && timeout > 0 && pn.timer == nil:
		pn.timer = time.AfterFunc(timeout, pn.idleExpired)
	case idle && timeout > 0:
		pn.timer.Reset(timeout)
	case !idle && pn.timer != nil:
		pn.timer.Stop()
	}
	pn.mu.Unlock()
	if closeNow {
		_ = pn.client.Close()
	}
}

// recoverTimer, deferred by the pins' timer callbacks, hands a panic and
// its stack to the observer.
func (p *Pool) recoverTimer() {
	if v := recover(); v != nil {
		stack := debug.Stack()
		p.observe(func(o Observer) { o.Panicked(v, stack) })
	}
}

func (pn *pin) idleExpired() {
	defer pn.pool.recoverTimer()
	pn.mu.Lock()
	expired := pn.idle && !pn.ended
	if expired {
		pn.reason = EndIdle
	}
	pn.mu.Unlock()
	if expired {
		_ = pn.client.Close()
	}
}

// handshakeExpired ends a pin whose handshake did not complete in time,
// with its client connection.
func (pn *pin) handshakeExpired() {
	defer pn.pool.recoverTimer()
	pn.mu.Lock()
	expired := !pn.authenticated && !pn.ended
	if expired {
		pn.reason = EndHandshakeTimeout
	}
	pn.mu.Unlock()
	if !expired {
		return
	}
	_ = pn.client.Close()
	if pn.pool.pins.CompareAndDelete(pn.client, pn) {
		pn.end(EndHandshakeTimeout, true)
	}
}

// end ends the pin once; closeUpstream closes its upstream connection
// (an upgraded one belongs to its stream).
func (pn *pin) end(reason EndReason, closeUpstream bool) {
	pn.mu.Lock()
	if pn.ended {
		pn.mu.Unlock()
		return
	}
	pn.ended = true
	if reason == EndClientClosed && pn.reason != "" {
		reason = pn.reason
	}
	conn, handshake := pn.conn, !pn.authenticated
	for _, t := range []*time.Timer{pn.timer, pn.handshake} {
		if t != nil {
			t.Stop()
		}
	}
	pn.mu.Unlock()
	pn.pool.release(pn.addr, handshake)
	if closeUpstream {
		conn.closeByPin()
	}
	pn.pool.observe(func(o Observer) { o.Ended(reason) })
}

// Refusal is an answer the pool gives itself instead of sending a request.
type Refusal struct {
	// Status of the answer.
	Status int
	// Reason, for metrics: one of the Refused… constants.
	Reason string
	// Header of the answer.
	Header http.Header
	// Message is the answer's body, for the person who reads it.
	Message string
	// Client is the client address a cap refusal counted by (see
	// clientAddr), for the log; "" for other refusals.
	Client string
	// Limit is the cap a cap refusal met; 0 for other refusals.
	Limit int
}

// Why the pool answers a request itself.
const (
	// RefusedAtCap: Max client connections were pinned for all of PinWait
	// (503, Retry-After).
	RefusedAtCap = "cap"
	// RefusedHandshakeCap: the client's address has
	// MaxHandshakesPerClient handshakes in progress (503, Retry-After).
	RefusedHandshakeCap = "handshake_cap"
	// RefusedClientCap: the client's address has MaxPerClient pins (503,
	// Retry-After).
	RefusedClientCap = "client_cap"
	// RefusedHTTP2: connection-based credentials over HTTP/2 or HTTP/3 (505).
	RefusedHTTP2 = "http2"
	// RefusedHandshakeCut: a handshake's next leg after a failover (401
	// with a fresh challenge; the client connection then closes).
	RefusedHandshakeCut = "handshake_cut"
	// RefusedPinLost: a request after the upstream closed the client's
	// authenticated connection (401 with a fresh challenge; the client
	// connection then closes).
	RefusedPinLost = "pin_lost"
	// RefusedNoClient: connection-based credentials on an HTTP/1 request
	// whose client connection is unknown (502).
	RefusedNoClient = "no_client"
)

func (r *Refusal) Error() string {
	return fmt.Sprintf("pinning: refused (%s): %s", r.Reason, r.Message)
}

// Response is the answer to req.
func (r *Refusal) Response(req *http.Request) *http.Response {
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	body := r.Message + "\n"
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status)),
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func refusedAtCap(limit int, waited time.Duration, client string) *Refusal {
	return refusedCap(RefusedAtCap, limit, client,
		fmt.Sprintf("all %d pinned upstream connections were in use for %s; try again shortly", limit, waited))
}

func refusedHandshakeCap(limit int, client string) *Refusal {
	return refusedCap(RefusedHandshakeCap, limit, client,
		fmt.Sprintf("this address already has %d sign-ins in progress, the most one address may have; try again shortly", limit))
}

func refusedClientCap(limit int, client string) *Refusal {
	return refusedCap(RefusedClientCap, limit, client,
		fmt.Sprintf("this address already has %d pinned upstream connections, the most one address may have; try again shortly", limit))
}

// refusedCap is a 503 at a cap, which a moment's wait may lift.
func refusedCap(reason string, limit int, client, msg string) *Refusal {
	return &Refusal{
		Status: http.StatusServiceUnavailable, Reason: reason,
		Header: http.Header{"Retry-After": {"1"}}, Message: msg, Client: client, Limit: limit,
	}
}

// refusedUnpinnable answers credentials that no pin can carry: over HTTP/2
// or HTTP/3, or from an unknown client connection.
func refusedUnpinnable(protoMajor int) *Refusal {
	if protoMajor == 1 {
		return &Refusal{
			Status: http.StatusBadGateway, Reason: RefusedNoClient,
			Message: "connection-based authentication (NTLM, Negotiate, Kerberos) needs a known client connection",
		}
	}
	return &Refusal{
		Status: http.StatusHTTPVersionNotSupported, Reason: RefusedHTTP2,
		Message: fmt.Sprintf("connection-based authentication (NTLM, Negotiate, Kerberos) needs HTTP/1.1, not HTTP/%d", protoMajor),
	}
}

func refusedRestart(reason string, schemes []string) *Refusal {
	if len(schemes) == 0 {
		schemes = []string{"Negotiate", "NTLM"}
	}
	msg := "the authentication handshake was cut by a failover; sign in again"
	if reason == RefusedPinLost {
		msg = "the server closed this authenticated connection; sign in again"
	}
	return &Refusal{
		Status: http.StatusUnauthorized, Reason: reason,
		Header:  http.Header{"Www-Authenticate": schemes},
		Message: msg,
	}
}
