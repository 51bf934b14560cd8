// Package connlimit bounds how many connections listeners have open at
// once, as HAProxy's maxconn does: while the limit is reached, a wrapped
// listener does not accept, so new connections wait in the kernel's
// listen backlog, and the next is accepted once an open one closes.
//
// A Limit is shared by every listener it wraps (HAProxy's frontend limit
// holds across the frontend's binds, the global one across every
// frontend); Groups shares Limits by name across configurations.
package connlimit

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// Limit counts the open connections of the listeners it wraps, at most
// Max at once.
type Limit struct {
	max int

	mu      sync.Mutex
	open    int
	waiting int           // Accepts waiting for a connection to close
	freed   chan struct{} // closed when a connection closes, if wanted
	wanted  bool          // someone waits on freed
}

// New is a limit of max open connections; max must be at least 1.
func New(max int) *Limit {
	if max < 1 {
		panic("connlimit: max must be at least 1")
	}
	return &Limit{max: max, freed: make(chan struct{})}
}

// Max is the most connections open at once.
func (l *Limit) Max() int { return l.max }

// Open is how many connections are open now.
func (l *Limit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Waiting is how many Accepts wait, now, for a connection to close.
func (l *Limit) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// wait returns once fewer than max connections are open, taking one of
// the free places if take is set; it returns net.ErrClosed once done is
// closed.
func (l *Limit) wait(take bool, done <-chan struct{}) error {
	l.mu.Lock()
	counted := false
	for l.open >= l.max {
		if !counted {
			l.waiting++
			counted = true
		}
		l.wanted = true
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			l.mu.Lock()
			l.waiting--
			l.mu.Unlock()
			return net.ErrClosed
		}
		l.mu.Lock()
	}
	if counted {
		l.waiting--
	}
	if take {
		l.open++
	}
	l.mu.Unlock()
	return nil
}

// release gives a connection's place back and wakes those who wait.
func (l *Limit) release() {
	l.mu.Lock()
	l.open--
	if l.wanted {
		close(l.freed)
		l.freed = make(chan struct{})
		l.wanted = false
	}
	l.mu.Unlock()
}

// Wrap returns ln with its connections counted against l. Its Accept
// waits, without accepting, while l's connections are all open: the
// next connection stays in the kernel's backlog, as in HAProxy. Several
// listeners may share l; none holds a place while it waits for a client,
// so an idle listener takes nothing from a busy one. Each accepted
// connection gives its place back once, on its first Close. Closing the
// listener ends an Accept that waits.
func (l *Limit) Wrap(ln net.Listener) net.Listener {
	return &listener{Listener: ln, limit: l, done: make(chan struct{})}
}

type listener struct {
	net.Listener
	limit     *Limit
	done      chan struct{}
	closeOnce sync.Once
}

// Accept waits for a free place, accepts, and takes the place. Two
// listeners of one limit may both see the last place free: the one that
// accepts second holds its connection (one per listener at most) until
// another closes, so the limit is never exceeded.
func (ln *listener) Accept() (net.Conn, error) {
	if err := ln.limit.wait(false, ln.done); err != nil {
		return nil, ln.closedErr()
	}
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := ln.limit.wait(true, ln.done); err != nil {
		c.Close()
		return nil, ln.closedErr()
	}
	lc := &conn{Conn: c, limit: ln.limit}
	if _, ok := c.(connectionStater); ok {
		// After TLS (*tls.Conn): the server takes the request's TLS state
		// from ConnectionState.
		return stateConn{lc}, nil
	}
	return lc, nil
}

func (ln *listener) closedErr() error {
	return &net.OpError{Op: "accept", Net: ln.Addr().Network(), Addr: ln.Addr(), Err: net.ErrClosed}
}

// Close closes the listener and ends an Accept that waits for a place.
func (ln *listener) Close() error {
	ln.closeOnce.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

// conn gives its place back on its first Close.
type conn struct {
	net.Conn
	limit  *Limit
	closed atomic.Bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.limit.release()
	}
	return err
}

// NetConn is the connection accepted.
func (c *conn) NetConn() net.Conn { return c.Conn }

type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// stateConn is a conn over a TLS connection.
type stateConn struct{ *conn }

// ConnectionState is the TLS connection's state.
func (c stateConn) ConnectionState() tls.ConnectionState {
	return c.Conn.(connectionStater).ConnectionState()
}
