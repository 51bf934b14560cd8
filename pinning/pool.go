package pinning

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	// Panicked: a timer callback panicked (and was recovered).
	Panicked(v any, stack []byte)
}

// Config sets a pool's bounds.
type Config struct {
	// Max is the most client connections pinned at once. Beyond it a
	// client connection's request is refused (503, RefusedAtCap); it is
	// never sent on a shared connection.
	Max int
	// IdleTimeout closes a pinned client connection (and its upstream
	// connection) that waited this long for its next request, as HAProxy's
	// timeout http-keep-alive does. 0: never.
	IdleTimeout time.Duration
	// Observer, if set, hears of pins and refusals.
	Observer Observer
}

// Pool holds the pins of one upstream set: at most one upstream
// connection per client connection, never shared.
type Pool struct {
	template *http.Transport
	oneOff   *http.Transport // for requests that cannot be pinned
	cfg      Config

	pins   sync.Map // net.Conn (the client's) → *pin
	count  atomic.Int64
	closed atomic.Bool
}

// ErrPoolClosed is returned by RoundTrip after Close.
var ErrPoolClosed = errors.New("pinning: pool closed")

// errPinLost refuses a second upstream connection for a locked pin.
var errPinLost = errors.New("pinning: the upstream closed this client's authenticated connection; a pinned client never gets another")

// New returns a pool whose pins each use a clone of template, limited to
// one kept-alive HTTP/1.1 connection that never times out on its own: the
// pin's client connection decides its life.
func New(template *http.Transport, cfg Config) *Pool {
	oneOff := template.Clone()
	oneOff.DisableKeepAlives = true
	return &Pool{template: template, oneOff: oneOff, cfg: cfg}
}

// Len returns how many client connections are pinned.
func (p *Pool) Len() int { return int(p.count.Load()) }

// RoundTrip sends req, which arrived on client connection client (nil if
// unknown), on that connection's pin: its own upstream connection to
// req.URL.Host. Requests the pool answers itself (see Refusal) come back
// as a *Refusal error. Requests over HTTP/2 or HTTP/3 cannot carry
// connection-based authentication: with such credentials they are refused
// (505); without, each goes on a connection of its own that closes after
// the answer.
func (p *Pool) RoundTrip(client net.Conn, req *http.Request) (*http.Response, error) {
	if p.closed.Load() {
		return nil, ErrPoolClosed
	}
	if client == nil || req.ProtoMajor != 1 {
		if HasConnectionAuth(req.Header, "Authorization") {
			return nil, p.refuse(refusedUnpinnable(req.ProtoMajor))
		}
		return p.oneOff.RoundTrip(req)
	}
	pn, err := p.pinOf(client)
	if err != nil {
		return nil, err
	}
	return pn.roundTrip(req)
}

func (p *Pool) pinOf(client net.Conn) (*pin, error) {
	if v, ok := p.pins.Load(client); ok {
		return v.(*pin), nil
	}
	if p.count.Add(1) > int64(p.cfg.Max) {
		p.count.Add(-1)
		return nil, p.refuse(refusedAtCap(p.cfg.Max))
	}
	pn := p.newPin(client)
	if v, loaded := p.pins.LoadOrStore(client, pn); loaded {
		p.count.Add(-1)
		return v.(*pin), nil
	}
	p.observe(func(o Observer) { o.Pinned() })
	if p.closed.Load() { // Close ran meanwhile and did not see this pin
		p.pins.Delete(client)
		pn.end(EndPoolClosed, true)
		return nil, ErrPoolClosed
	}
	return pn, nil
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

// Close ends every pin, closing its client and upstream connections.
// Upgraded connections belong to their stream and are left to it.
func (p *Pool) Close() {
	p.closed.Store(true)
	p.pins.Range(func(k, v any) bool {
		p.pins.Delete(k)
		pn := v.(*pin)
		pn.end(EndPoolClosed, true)
		_ = pn.client.Close()
		return true
	})
	p.oneOff.CloseIdleConnections()
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
	rt     *http.Transport

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
	idle         bool
	closeOnIdle  EndReason // set: close the client connection once it waits
	reason       EndReason // why the pool closed the client connection
	timer        *time.Timer
	ended        bool
}

func (p *Pool) newPin(client net.Conn) *pin {
	pn := &pin{pool: p, client: client}
	rt := p.template.Clone()
	rt.DisableKeepAlives = false
	rt.MaxIdleConns, rt.MaxIdleConnsPerHost = 1, 1
	rt.IdleConnTimeout = 0
	rt.ForceAttemptHTTP2 = false
	rt.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	dial := p.template.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	rt.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return pn.dial(ctx, dial, network, addr)
	}
	if dialTLS := p.template.DialTLSContext; dialTLS != nil {
		rt.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return pn.dial(ctx, dialTLS, network, addr)
		}
	}
	pn.rt = rt
	return pn
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dial makes the binding's connection. A locked binding already had one:
// it gets no other.
func (pn *pin) dial(ctx context.Context, dial dialFunc, network, addr string) (net.Conn, error) {
	pn.mu.Lock()
	locked, ended := pn.locked, pn.ended
	pn.mu.Unlock()
	if locked || ended {
		return nil, errPinLost
	}
	c, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	uc := &upstreamConn{Conn: c, pin: pn}
	pn.mu.Lock()
	if pn.ended {
		pn.mu.Unlock()
		_ = c.Close()
		return nil, errPinLost
	}
	pn.conn = uc
	pn.mu.Unlock()
	return uc, nil
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

	resp, err := pn.rt.RoundTrip(sameConnection(req))
	if err != nil {
		return nil, err
	}
	pn.mu.Lock()
	if HasConnectionAuth(req.Header, "Authorization") || HasConnectionAuth(resp.Header, "WWW-Authenticate") {
		pn.locked = true
	}
	pn.midHandshake = continuesHandshake(resp)
	if s := offeredSchemes(resp.Header); len(s) > 0 {
		pn.schemes = s
	}
	pn.mu.Unlock()
	return resp, nil
}

// sameConnection returns req such that the pin's transport sends it on the
// pin's connection. net/http keeps WebSocket upgrades in a pool of their
// own (Request.requiresHTTP1: Upgrade equal to "websocket"), which would
// dial a second connection; a trailing space, which the request writer
// trims, keeps an upgrade in the pin's one pool. Pins speak only HTTP/1.1,
// so nothing else depends on it.
func sameConnection(req *http.Request) *http.Request {
	if up := req.Header.Get("Upgrade"); up == "" || !strings.EqualFold(up, "websocket") {
		return req
	}
	req = req.Clone(req.Context())
	req.Header.Set("Upgrade", req.Header.Get("Upgrade")+" ")
	return req
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

func (pn *pin) idleExpired() {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			pn.pool.observe(func(o Observer) { o.Panicked(v, stack) })
		}
	}()
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
	conn := pn.conn
	if pn.timer != nil {
		pn.timer.Stop()
	}
	pn.mu.Unlock()
	pn.pool.count.Add(-1)
	if closeUpstream {
		conn.closeByPin()
		pn.rt.CloseIdleConnections()
	}
	pn.pool.observe(func(o Observer) { o.Ended(reason) })
}

// upstreamConn is a pin's upstream connection: it tells the pin when it
// closes, and whether the pin closed it.
type upstreamConn struct {
	net.Conn
	pin   *pin
	byPin atomic.Bool
	once  sync.Once
}

func (c *upstreamConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.pin.upstreamClosed(c) })
	return err
}

// closeByPin closes the connection (if any) on the pin's own decision.
func (c *upstreamConn) closeByPin() {
	if c != nil {
		c.byPin.Store(true)
		_ = c.Close()
	}
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
}

// Why the pool answers a request itself.
const (
	// RefusedAtCap: Max client connections are pinned (503, Retry-After).
	RefusedAtCap = "cap"
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

func refusedAtCap(limit int) *Refusal {
	return &Refusal{
		Status: http.StatusServiceUnavailable, Reason: RefusedAtCap,
		Header:  http.Header{"Retry-After": {"1"}},
		Message: fmt.Sprintf("all %d pinned upstream connections are in use; try again shortly", limit),
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
