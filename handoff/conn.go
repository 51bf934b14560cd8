package handoff

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// Conn is a connection of a Listener. It keeps the bytes its server read
// since it last answered, so that once the listener is closed (the server
// is shutting down) it can hand itself off instead of closing, with those
// bytes, whenever the server answered everything it let run:
//   - an idle connection, which Shutdown closes while the client may be
//     sending the next request: its read is interrupted and what it got
//     goes to the successor;
//   - a request Shutdown read but dropped unanswered (net/http drops a
//     request whose reading ends after Shutdown began, before any handler
//     runs): the successor reads it again;
//   - a connection closed after its last answer.
//
// A request that a handler has seen (its body read to the end, as every
// proxied request's is, or an answer begun) is never handed off
// unanswered: the connection closes, as it would without a Listener.
type Conn struct {
	net.Conn
	ln *Listener

	mu sync.Mutex
	// pending are bytes a predecessor's server read but never answered:
	// the next reads return them first.
	pending []byte
	state   connState
	// reading is set while a Read waits on the wrapped connection;
	// readDone is closed when one interrupted for the hand-off returns.
	reading  bool
	readDone chan struct{}
	// unanswered are the bytes read since the last answer, up to
	// maxUnanswered (overflow: more were read, so they cannot be handed on).
	unanswered []byte
	overflow   bool
	// held is a byte net/http's background read took while a handler ran:
	// the first of the next request, kept past the answer.
	held []byte
	// handlerRan is set once a handler has seen the unanswered request:
	// net/http starts its one-byte background read when a handler has
	// read the request's body to the end (or has none to read).
	handlerRan bool
	kind       connKind
}

type connState int

const (
	stateOpen       connState = iota
	stateHandingOff           // interrupting a read before the hand-off
	stateGone                 // handed off or closed: reads and writes fail
)

type connKind int

const (
	kindUnknown connKind = iota // nothing read yet
	kindHTTP1
	kindOther // TLS, HTTP/2's preface, an upgraded stream, or a failed read: never handed off
)

// maxUnanswered bounds the bytes kept per connection: a request larger
// than this that Shutdown dropped is not handed off.
const maxUnanswered = 64 << 10

var (
	// h2Preface starts every HTTP/2 connection; its first four bytes tell
	// it from an HTTP/1 method.
	h2Preface = []byte("PRI ")
	// tlsHandshake is the first byte of a TLS record carrying a handshake.
	tlsHandshake = byte(0x16)
	// switchingProtocols starts the answer after which a connection
	// carries another protocol (a WebSocket, say).
	switchingProtocols = [][]byte{[]byte("HTTP/1.1 101 "), []byte("HTTP/1.0 101 ")}
)

// Read reads what a predecessor's server left unanswered first.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		c.sawRead(p[:n])
		c.mu.Unlock()
		return n, nil
	}
	if c.state != stateOpen {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	if len(p) == 1 && len(c.unanswered) > 0 {
		c.handlerRan = true
	}
	c.reading = true
	c.mu.Unlock()

	n, err := c.Conn.Read(p)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	if c.state == stateHandingOff {
		// Interrupted for the hand-off: what arrived meanwhile is the
		// successor's.
		c.unanswered = append(c.unanswered, p[:n]...)
		close(c.readDone)
		return 0, net.ErrClosed
	}
	c.sawRead(p[:n])
	// A deadline's timeout is how net/http ends its background read; any
	// other error ends the connection, which is not handed on.
	if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
		c.kind = kindOther
	}
	return n, err
}

// sawRead keeps bytes the server got. c.mu must be held.
func (c *Conn) sawRead(b []byte) {
	if len(b) == 0 {
		return
	}
	if c.kind == kindUnknown {
		c.kind = kindHTTP1
		if b[0] == tlsHandshake || bytes.HasPrefix(b, h2Preface) {
			c.kind = kindOther
		}
	}
	if c.handlerRan && len(b) == 1 {
		c.held = append(c.held[:0], b[0])
		return
	}
	if len(c.held) > 0 {
		// The held byte starts the request these bytes continue.
		c.unanswered = append(c.unanswered, c.held...)
		c.held = c.held[:0]
	}
	if c.overflow || len(c.unanswered)+len(b) > maxUnanswered {
		c.overflow = true
		return
	}
	c.unanswered = append(c.unanswered, b...)
}

// Write writes an answer to what was read before it.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.state == stateGone {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	c.unanswered, c.overflow, c.handlerRan = c.unanswered[:0], false, false
	for _, prefix := range switchingProtocols {
		if bytes.HasPrefix(p, prefix) {
			c.kind = kindOther
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Close hands the connection off to a successor instead, with what the
// server left unanswered, if its listener is closed and Conn's rules allow
// it; otherwise it closes.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.state != stateOpen {
		// Gone, or being handed off by another Close (the old server's,
		// once its interrupted read failed).
		c.mu.Unlock()
		return nil
	}
	if !c.ln.isClosed() || c.kind == kindOther || c.overflow || c.handlerRan && len(c.unanswered) > 0 {
		c.state = stateGone
		c.mu.Unlock()
		return c.Conn.Close()
	}
	c.state = stateHandingOff
	if c.reading {
		// Unblock the server's read (its wait for the next request)
		// without losing what it gets: a deadline, as net/http does itself.
		c.readDone = make(chan struct{})
		done := c.readDone
		c.mu.Unlock()
		_ = c.Conn.SetReadDeadline(time.Now())
		<-done
		c.mu.Lock()
	}
	c.state = stateGone
	next := &Conn{Conn: c.Conn, kind: kindHTTP1, pending: append(append([]byte(nil), c.held...), c.unanswered...)}
	c.mu.Unlock()
	return c.ln.registry.handOffOrClose(c.ln, next)
}

// SetDeadline, SetReadDeadline and SetWriteDeadline reach the wrapped
// connection only while it is this server's: once handed off, its old
// server's deadlines (net/http sets one in the past to end a read) must not
// reach the successor's.
func (c *Conn) SetDeadline(t time.Time) error {
	return c.setDeadline(t, c.Conn.SetDeadline)
}

// SetReadDeadline: see SetDeadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(t, c.Conn.SetReadDeadline)
}

// SetWriteDeadline: see SetDeadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(t, c.Conn.SetWriteDeadline)
}

func (c *Conn) setDeadline(t time.Time, set func(time.Time) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateOpen {
		return net.ErrClosed
	}
	return set(t)
}
