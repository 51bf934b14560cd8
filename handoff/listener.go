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
	defer func() {
		if v := recover(); v != nil && l.registry.Panicked != nil {
			l.registry.Panicked(v, debug.Stack())
		}
	}()
	for {
		conn, err := l.Listener.Accept()
		select {
		case l.accepted <- accepted{conn, err}:
		case <-l.closed:
			if conn != nil {
				// Accepted as its server stopped accepting: a successor's.
				l.open.Add(1)
				_ = l.registry.handOffOrClose(l, &Conn{Conn: conn})
			}
			return
		}
		if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
			return // closed or broken: Accept has returned the error
		}
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
		return l.wrap(a.conn), nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// wrap makes conn a Conn of l.
func (l *Listener) wrap(conn net.Conn) net.Conn {
	l.open.Add(1)
	return (&Conn{Conn: conn, ln: l}).served()
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
// listens on the same address.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.registry.remove(l)
		l.closedAt = time.Now()
		l.openAtClose = l.open.Load()
		close(l.closed)
		err = l.Listener.Close()
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

// left notes that one of l's connections is gone: handed off, or closed.
func (l *Listener) left(handedOff bool) {
	if l.isClosed() {
		if handedOff {
			l.handedOff.Add(1)
		} else {
			l.closedConns.Add(1)
			if l.registry.Closed != nil {
				l.registry.Closed()
			}
		}
		if handedOff && l.registry.HandedOff != nil {
			l.registry.HandedOff()
		}
	}
	l.open.Add(-1)
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
