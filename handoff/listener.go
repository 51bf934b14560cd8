package handoff

import (
	"crypto/tls"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener whose connections can be handed off to a
// successor on the same address once it is closed.
type Listener struct {
	net.Listener
	registry *Registry
	key      string
	accepted chan accepted // from acceptLoop
	handed   chan *Conn    // from closing predecessors
	closed   chan struct{}
	once     sync.Once

	// mu orders Close against the connections' parking and leaving, so
	// that each of them is either before the close (not counted in its
	// report) or after it.
	mu sync.Mutex
	// parked are the connections its server closed while l was open and
	// a successor listened on its address: they wait for l's close.
	parked map[*Conn]struct{}

	// open counts the connections that are l's: accepted by its server,
	// or handed to it.
	open                   atomic.Int64
	handedOff, closedConns atomic.Int64
	closedAt               time.Time // set once, before closed is
	openAtClose            int64
	drainedOnce            sync.Once
}

type accepted struct {
	conn net.Conn
	err  error
}

// acceptLoop accepts from the wrapped listener until it fails for good or
// l is closed, so that Accept can also wait for handed-off connections.
func (l *Listener) acceptLoop() {
	defer l.registry.recoverPanic()
	for {
		conn, err := l.Listener.Accept()
		select {
		case l.accepted <- accepted{conn, err}:
		case <-l.closed:
			if conn != nil {
				// Accepted as its server stopped accepting: a successor's.
				l.passOn(conn)
			}
			return
		}
		if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
			return // closed or broken: Accept has returned the error
		}
	}
}

// recoverPanic, deferred by the goroutines of r's listeners and
// connections, tells r of a panic.
func (r *Registry) recoverPanic() {
	if v := recover(); v != nil && r.Panicked != nil {
		r.Panicked(v, debug.Stack())
	}
}

// Accept returns the next connection: a new one, or one a predecessor
// handed off. A connection over TLS (from a tls.Listener under l) comes
// with its session: it tells the server its ConnectionState.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.handed:
		return c.served(), nil
	case a := <-l.accepted:
		if a.err != nil {
			return nil, a.err
		}
		return l.wrap(a.conn)
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// wrap makes conn a Conn of l, unless l has closed meanwhile: then it is
// a successor's.
func (l *Listener) wrap(conn net.Conn) (net.Conn, error) {
	l.mu.Lock()
	if l.isClosed() {
		l.mu.Unlock()
		l.passOn(conn)
		return nil, net.ErrClosed
	}
	l.open.Add(1)
	l.mu.Unlock()
	return (&Conn{Conn: conn, ln: l}).served(), nil
}

// passOn gives a new connection that l's socket accepted after l closed
// (a socket shared with its successor) to that successor, or closes it.
// It was never its server's: neither handed off nor closed in l's count.
func (l *Listener) passOn(conn net.Conn) {
	_, _ = l.registry.giveOn(l, &Conn{Conn: conn})
}

// connectionStater is what a TLS connection tells of its session.
type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// tlsConn is a Conn over a TLS connection (the wrapper placed after TLS):
// it carries the plaintext, and tells the server of the session as the
// *tls.Conn it wraps would. The session lives in that *tls.Conn, which
// moves with the Conn, so it can be handed off like a plain one. Caddy
// serves such connections (its listener wrappers may return them) and
// takes the request's TLS state from ConnectionState; a server that needs
// a *tls.Conn itself (plain net/http's HTTP/2) does not.
type tlsConn struct{ *Conn }

// ConnectionState returns the wrapped TLS connection's state.
func (c tlsConn) ConnectionState() tls.ConnectionState {
	return c.Conn.Conn.(connectionStater).ConnectionState()
}

// served returns c as its server is to see it: with its TLS state, if it
// carries TLS.
func (c *Conn) served() net.Conn {
	if _, ok := c.Conn.(connectionStater); ok {
		return tlsConn{c}
	}
	return c
}

// Close closes the wrapped listener. From then on, each of l's connections
// that its server closes while idle is handed off to a successor, if one
// listens on the same address; so are those its server closed just before,
// as its shutdown began (see Conn).
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.registry.remove(l)
		l.mu.Lock()
		l.closedAt = time.Now()
		l.openAtClose = l.open.Load()
		close(l.closed)
		parked := l.parked
		l.parked = nil
		l.mu.Unlock()
		err = l.Listener.Close()
		// Closed by the server as its shutdown began: handed off now.
		for c := range parked {
			c.unpark()
		}
		// Handed to l but never accepted: on to another successor.
		for {
			select {
			case c := <-l.handed:
				_ = l.registry.handOffOrClose(l, c)
			default:
				l.reportIfDrained()
				return
			}
		}
	})
	return err
}

// park keeps c, which its server closes while l may be open, until l
// closes, if mayPark and another listener on l's address could take it
// then. It reports whether l was closed already (c is to be handed off
// now) and whether c is parked; neither, c is to close. c.mu is held.
func (l *Listener) park(c *Conn, mayPark bool) (closed, parked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed() {
		return true, false
	}
	if !mayPark || !l.registry.hasSuccessor(l) {
		return false, false
	}
	if l.parked == nil {
		l.parked = map[*Conn]struct{}{}
	}
	l.parked[c] = struct{}{}
	return false, true
}

// unparkUnlessSuccessor closes l's parked connections if l is open and no
// other listener remains on its address to take them once it closes.
func (l *Listener) unparkUnlessSuccessor() {
	l.mu.Lock()
	if l.isClosed() || len(l.parked) == 0 || l.registry.hasSuccessor(l) {
		l.mu.Unlock()
		return
	}
	parked := l.parked
	l.parked = nil
	l.mu.Unlock()
	for c := range parked {
		c.unpark()
	}
}

// left notes that one of l's connections is gone: handed off, or closed.
func (l *Listener) left(handedOff bool) {
	l.mu.Lock()
	closed := l.isClosed()
	if closed {
		if handedOff {
			l.handedOff.Add(1)
		} else {
			l.closedConns.Add(1)
		}
	}
	l.open.Add(-1)
	l.mu.Unlock()
	if closed {
		if !handedOff && l.registry.Closed != nil {
			l.registry.Closed()
		}
		if handedOff && l.registry.HandedOff != nil {
			l.registry.HandedOff()
		}
	}
	l.reportIfDrained()
}

// reportIfDrained tells the registry, once, that l is closed and has no
// connection left. Once l is closed no connection joins it (it is out of
// the registry), so its count only falls.
func (l *Listener) reportIfDrained() {
	if !l.isClosed() || l.open.Load() > 0 {
		return
	}
	l.drainedOnce.Do(func() {
		if l.registry.Drained != nil {
			l.registry.Drained(Drain{Addr: l.Addr(), OpenAtClose: l.openAtClose,
				HandedOff: l.handedOff.Load(), Closed: l.closedConns.Load(), Took: time.Since(l.closedAt)})
		}
	})
}

func (l *Listener) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}
