package handoff

import (
	"bytes"
	"io"
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
// net/http's Shutdown marks its server as shutting down before it closes
// the listeners, and the server acts on that at once: it drops the next
// request it reads, and closes a connection after an answer instead of
// waiting for the next request. A connection its server closes so while
// the listener is still open, with nothing to tell it from one closed
// after the listener, is kept (parked, its socket open and unread) until
// the listener closes, then handed off by the same rules; if no other
// listener on the address remains to take it first, it closes. Only a
// connection with a successor on its address is kept, so outside a reload
// a server's closes go through at once.
//
// A request that a handler has seen (its body read to the end, as every
// proxied request's is, or an answer begun) is never handed off
// unanswered: the connection closes, as it would without a Listener.
//
// Nor is a connection whose server may hold bytes that Conn cannot give
// on: net/http reads ahead into its own buffer, so a request that arrived
// before the previous one's answer (the client pipelines) may sit there,
// and handing the connection on would leave its client waiting for an
// answer that never comes. Conn follows the requests' framing to know
// whether what the server read before an answer ended with the answered
// request. A connection whose answer was given before its request's end
// was read, or that announced Connection: close (the client expects the
// close and may retry what followed), closes; so does one that pipelined,
// unless its server waits for the next request with an empty buffer.
type Conn struct {
	net.Conn
	ln *Listener

	mu sync.Mutex
	// pending are bytes a predecessor's server read but never answered:
	// the next reads return them first.
	pending []byte
	state   connState
	// reading is set while a Read of readLen bytes waits on the wrapped
	// connection; readDone is closed when one interrupted for the hand-off
	// returns.
	reading  bool
	readLen  int
	readDone chan struct{}
	// unanswered are the bytes read since the last answer, up to
	// maxUnanswered (overflow: more were read, so they cannot be handed on).
	unanswered []byte
	overflow   bool
	// handlerRan is set once a handler has seen the unanswered request:
	// net/http starts its one-byte background read when a handler has
	// read the request's body to the end (or has none to read).
	handlerRan bool
	kind       connKind
	// requests follows the framing of what the server read.
	requests framing
	// answeredMidRequest is set when the last answer came before what was
	// read ended with a request: the bytes after it belong to that request.
	answeredMidRequest bool
	// pipelined is set for good when an answer came after the client had
	// sent more: the server may hold requests in its buffer.
	pipelined bool
	// toldClose is set when an answer announced the close, or the server
	// half-closed the connection (CloseWrite).
	toldClose bool
	// timedOut is set when a read of the server's timed out (its idle or
	// read timeout, not its background read's end): net/http closes the
	// connection for that reason of its own.
	timedOut bool
	// writeEnd is the end of the last write, where a Connection: close
	// split between two writes begins.
	writeEnd    [len(closeHeader) - 1]byte
	writeEndLen int
}

type connState int

const (
	stateOpen       connState = iota
	stateParked               // closed by its server before its listener: see Close
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

// closeHeader is how net/http announces that it closes a connection after
// an answer (when shutting down, or as the request or handler asked).
const closeHeader = "\r\nConnection: close\r\n"

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
	c.reading, c.readLen = true, len(p)
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
	// A deadline's timeout is how net/http ends its background read (of
	// one byte), or an idle or read timeout; any other error ends the
	// connection, which is not handed on.
	if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
		c.kind = kindOther
	} else if err != nil && len(p) > 1 {
		c.timedOut = true
	}
	return n, err
}

// sawRead follows and keeps bytes the server got. c.mu must be held.
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
	c.requests.read(b)
	if c.overflow || len(c.unanswered)+len(b) > maxUnanswered {
		c.overflow = true
		return
	}
	c.unanswered = append(c.unanswered, b...)
}

// Write writes an answer to what was read before it.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.state == stateGone || c.state == stateParked {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	c.sawWrite(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// sawWrite notes an answer. c.mu must be held.
func (c *Conn) sawWrite(p []byte) {
	c.pipelined = c.pipelined || c.requests.ahead
	c.toldClose = c.toldClose || c.announcesClose(p)
	c.answeredMidRequest = !c.requests.atBoundary()
	c.requests.answered()
	c.unanswered, c.overflow, c.handlerRan = c.unanswered[:0], false, false
	for _, prefix := range switchingProtocols {
		if bytes.HasPrefix(p, prefix) {
			c.kind = kindOther
		}
	}
}

// announcesClose reports whether p, following the last write, carries
// closeHeader, and keeps p's end for the next write.
func (c *Conn) announcesClose(p []byte) bool {
	var joined [2 * len(c.writeEnd)]byte
	n := copy(joined[:], c.writeEnd[:c.writeEndLen])
	n += copy(joined[n:], p)
	found := bytes.Contains(joined[:n], []byte(closeHeader)) || bytes.Contains(p, []byte(closeHeader))
	end := joined[:n]
	if len(p) >= len(c.writeEnd) {
		end = p
	}
	c.writeEndLen = copy(c.writeEnd[:], end[max(0, len(end)-len(c.writeEnd)):])
	return found
}

// Close hands the connection off to a successor instead, with what the
// server left unanswered, if its listener is closed and Conn's rules allow
// it; otherwise it closes. Closed by its server while its listener is
// still open but may be closing (a successor listens on its address), a
// connection the rules would hand off is parked until the listener
// closes (see Conn).
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.state != stateOpen {
		// Gone, parked, or being handed off by another Close (the old
		// server's, once its interrupted read failed).
		c.mu.Unlock()
		return nil
	}
	if c.kind == kindOther || c.toldClose || c.requests.failed || c.answeredMidRequest ||
		c.overflow || c.handlerRan && len(c.unanswered) > 0 || c.pipelined && !c.waitsOnEmptyBuffer() {
		return c.closeLocked()
	}
	// A read in progress would give the server what arrives: only a
	// connection its server no longer reads is parked.
	if closed, parked := c.ln.park(c, !c.timedOut && !c.reading); parked {
		c.state = stateParked
		c.mu.Unlock()
		return nil
	} else if !closed {
		return c.closeLocked()
	}
	return c.handOffLocked()
}

// closeLocked closes c: during a reload (its listener closed, or a
// successor listening on its address: net/http closes connections as its
// shutdown begins, before it closes the listener), lingering (see
// lingerThenClose). c.mu must be held; closeLocked releases it.
func (c *Conn) closeLocked() error {
	c.state = stateGone
	c.mu.Unlock()
	c.ln.left(false)
	if c.ln.isClosed() || c.ln.registry.hasSuccessor(c.ln) {
		return c.lingerThenClose()
	}
	return c.Conn.Close()
}

// Bounds of a lingering close: net/http's own wait before it closes a
// connection whose client may still be sending (rstAvoidanceDelay), and
// what is read meanwhile.
const (
	lingerFor   = 500 * time.Millisecond
	lingerBytes = 1 << 20
)

// closeWriter is a connection that can half-close: TCP (a FIN), TLS (its
// close_notify alert).
type closeWriter interface{ CloseWrite() error }

// lingerThenClose closes c as HAProxy and net/http close a connection
// whose client may still be sending (pipelined requests on their way as
// the server shuts down): everything written goes out, then a half-close,
// then what the client still sends is read and dropped until it closes
// its side, for at most lingerFor and lingerBytes, and only then the
// connection closes. A socket closed with bytes unread answers them with
// a reset, which can destroy answers the client has not read yet; so the
// client reads every answer, then EOF. The wait runs on its own
// goroutine, bounded, so that the server's close returns at once.
func (c *Conn) lingerThenClose() error {
	cw, ok := c.Conn.(closeWriter)
	if !ok || cw.CloseWrite() != nil {
		return c.Conn.Close()
	}
	go func() {
		defer c.Conn.Close()
		defer c.ln.registry.recoverPanic()
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerFor))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
	}()
	return nil
}

// CloseWrite half-closes the connection while it is its server's (net/http
// does before a close when its client may still be sending); it can no
// longer be handed off then.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cw, ok := c.Conn.(closeWriter)
	if c.state != stateOpen || !ok {
		return net.ErrClosed
	}
	c.toldClose = true
	return cw.CloseWrite()
}

// unpark ends a parked c's wait: it is handed off if its listener has
// closed, and closed if not (no successor is left on its address).
func (c *Conn) unpark() {
	c.mu.Lock()
	if c.state != stateParked {
		c.mu.Unlock()
		return
	}
	if !c.ln.isClosed() {
		_ = c.closeLocked()
		return
	}
	_ = c.handOffLocked()
}

// handOffLocked hands c off, its listener closed and its rules allowing
// it. c.mu must be held; handOffLocked releases it.
func (c *Conn) handOffLocked() error {
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
	next := &Conn{Conn: c.Conn, kind: kindHTTP1, pending: append([]byte(nil), c.unanswered...)}
	c.mu.Unlock()
	return c.ln.registry.handOffOrClose(c.ln, next)
}

// netHTTPReadBuffer is the size of net/http's server-side bufio.Reader.
// bufio fills its buffer with a read of all of it only when it is empty.
const netHTTPReadBuffer = 4096

// waitsOnEmptyBuffer reports whether the server waits for a request with
// nothing it read left in its buffer: all it read was answered. c.mu must
// be held.
func (c *Conn) waitsOnEmptyBuffer() bool {
	return c.reading && c.readLen == netHTTPReadBuffer && len(c.unanswered) == 0 && c.requests.atBoundary()
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
