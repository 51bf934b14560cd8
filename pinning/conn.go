package pinning

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// A pin drives its upstream connection itself, one exchange at a time,
// with net/http's own request writer and response reader. An
// http.Transport would close a kept-alive connection on judgements of its
// own: it drops one whose request write it has not heard finish within
// 50 ms of reading the answer (maxWriteWaitBeforeConnReuse), which on a
// loaded machine, with the writing goroutine waiting for a CPU, closed
// authenticated connections that both ends kept and signed users out
// (pin_lost), or cut a handshake between its legs. Here a pin's
// connection closes only when the pin closes it (its client went, or an
// exchange was cut short, which leaves it unusable) or the upstream does.

// Bounds of an exchange.
const (
	// defaultMaxHeaderBytes bounds an answer's header when the template
	// sets no MaxResponseHeaderBytes, as net/http does.
	defaultMaxHeaderBytes = 10 << 20
	// maxInformational bounds the 1xx answers before the final one, as
	// net/http does.
	maxInformational = 5
	// requestWriteWait is how long an answer that ended before its
	// request's body was all written waits for that write: an upstream
	// that answered and does not read the rest leaves the connection
	// unusable, and it closes.
	requestWriteWait = 10 * time.Second
)

var errHeaderTooLarge = errors.New("pinning: the upstream's answer header is too large")

// upstreamConn is a pin's upstream connection: it tells the pin when it
// closes, and whether the pin closed it.
type upstreamConn struct {
	net.Conn
	pin *pin
	br  *bufio.Reader
	bw  *bufio.Writer
	// readLimit is what is left of the header bound while a header is
	// read; br reads through it.
	readLimit atomic.Int64
	// watching is closed when the idle watch (see watch) has stopped;
	// nil while an exchange runs.
	watching chan struct{}
	resuming atomic.Bool // the next exchange stops the watch
	byPin    atomic.Bool
	once     sync.Once
	// answered counts the answers read on the connection: one that has
	// answered before is a kept-alive one, which its upstream may close
	// under the next request.
	answered int
}

// noAnswerError is a kept-alive connection's failure to answer a request
// of which not a byte of answer came: its upstream closed or reset it
// under the request, as a server closing its idle connections (a planned
// stop) does when the request arrives as it closes.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string { return e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

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

// headerLimited is what br reads the connection through.
type headerLimited struct{ c *upstreamConn }

func (r headerLimited) Read(p []byte) (int, error) {
	left := r.c.readLimit.Load()
	if left <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.c.Conn.Read(p)
	r.c.readLimit.Add(-int64(n))
	return n, err
}

// connection returns the pin's connection to req's node, dialled if it has
// none. A locked pin already had one: it gets no other.
func (pn *pin) connection(req *http.Request) (*upstreamConn, error) {
	pn.mu.Lock()
	uc, locked, ended := pn.conn, pn.locked, pn.ended
	pn.mu.Unlock()
	if uc != nil {
		if uc.resume() == nil {
			return uc, nil
		}
		// The upstream closed it while it waited, and the idle watch
		// tells so only now: as if it had told before this request.
		_ = uc.Close()
		pn.mu.Lock()
		lost, schemes := pn.lost, pn.schemes
		if lost {
			pn.closeOnIdle = EndUpstreamClosed
		}
		locked, ended = pn.locked, pn.ended
		pn.mu.Unlock()
		if lost {
			return nil, pn.pool.refuse(refusedRestart(RefusedPinLost, schemes))
		}
		// Not signed in: a fresh connection serves as well.
	}
	if locked || ended {
		return nil, errPinLost
	}
	c, err := pn.dial(req)
	if err != nil {
		return nil, err
	}
	t := pn.pool.template
	uc = &upstreamConn{Conn: c, pin: pn}
	uc.br = bufio.NewReaderSize(headerLimited{uc}, max(t.ReadBufferSize, 4<<10))
	uc.bw = bufio.NewWriterSize(uc.Conn, max(t.WriteBufferSize, 4<<10))
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

// dial connects to req's node with the template's dialers and TLS
// settings, speaking HTTP/1.1 only.
func (pn *pin) dial(req *http.Request) (net.Conn, error) {
	t, ctx := pn.pool.template, req.Context()
	host, port := req.URL.Hostname(), req.URL.Port()
	tlsOn := req.URL.Scheme == "https"
	if port == "" {
		port = "80"
		if tlsOn {
			port = "443"
		}
	}
	addr := net.JoinHostPort(host, port)
	if tlsOn && t.DialTLSContext != nil {
		return t.DialTLSContext(ctx, "tcp", addr)
	}
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil || !tlsOn {
		return c, err
	}
	cfg := &tls.Config{}
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = nil // HTTP/1.1, as net/http offers it
	if d := t.TLSHandshakeTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// exchange sends req on the pin's connection and returns its answer. The
// connection carries the next request once the answer's body was read to
// its end and req was all written; an exchange cut short (cancelled, a
// body closed early, an error) closes it.
func (pn *pin) exchange(req *http.Request) (*http.Response, error) {
	uc, err := pn.connection(req)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	// A request cancelled mid-exchange (its client went, or the proxy
	// gave up waiting) leaves the connection unusable.
	stop := context.AfterFunc(req.Context(), func() { _ = uc.Close() })
	resp, written, err := uc.send(req)
	if err != nil {
		stop()
		_ = uc.Close()
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The stream owns the connection now (the pin ends with
		// EndUpgraded); it reads what br holds first.
		stop()
		resp.Body = &upgradedBody{Reader: io.MultiReader(uc.br, uc.Conn), Conn: uc.Conn}
		return resp, nil
	}
	body := &answerBody{rc: resp.Body, uc: uc, req: req, resp: resp, written: written, stop: stop}
	if resp.Body == http.NoBody {
		body.finish()
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// send writes req and reads its final answer's header. A request with a
// body is written while the answer is read (an upstream may answer before
// reading it all); written then tells when it is done.
func (uc *upstreamConn) send(req *http.Request) (*http.Response, <-chan error, error) {
	written := make(chan error, 1)
	if req.Body == nil || req.Body == http.NoBody {
		if err := uc.write(req); err != nil {
			return nil, nil, err
		}
		written <- nil
	} else {
		uc.goRecovered(func() { written <- uc.write(req) })
	}
	t := uc.pin.pool.template
	if d := t.ResponseHeaderTimeout; d > 0 {
		_ = uc.Conn.SetReadDeadline(time.Now().Add(d))
		defer func() { _ = uc.Conn.SetReadDeadline(time.Time{}) }()
	}
	limit := t.MaxResponseHeaderBytes
	if limit <= 0 {
		limit = defaultMaxHeaderBytes
	}
	defer uc.readLimit.Store(math.MaxInt64) // no bound on bodies
	for i := range maxInformational + 1 {
		uc.readLimit.Store(limit)
		resp, err := http.ReadResponse(uc.br, req)
		if err != nil {
			if i == 0 && uc.answered > 0 && uc.readLimit.Load() == limit && uc.br.Buffered() == 0 {
				err = &noAnswerError{err}
			}
			return nil, nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			uc.answered++
			if tc, ok := uc.Conn.(*tls.Conn); ok {
				state := tc.ConnectionState()
				resp.TLS = &state
			}
			return resp, written, nil
		}
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, nil, err
			}
		}
	}
	return nil, nil, fmt.Errorf("pinning: more than %d informational answers", maxInformational)
}

// write writes req (and closes its body, as Request.Write does).
func (uc *upstreamConn) write(req *http.Request) error {
	err := req.Write(uc.bw)
	if err == nil {
		err = uc.bw.Flush()
	}
	return err
}

// watch reads the idle connection until the next exchange stops it: an
// upstream that closes it, or speaks out of turn (a 408 before closing),
// is heard at once, so that a locked pin's client goes while it waits.
func (uc *upstreamConn) watch() {
	done := make(chan struct{})
	uc.watching = done
	uc.goRecovered(func() {
		defer close(done)
		_, err := uc.br.Peek(1)
		if uc.resuming.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			return // stopped by the next exchange: the connection is fine
		}
		_ = uc.Close()
	})
}

// goRecovered runs fn in a goroutine of its own; a panic in it goes to the
// pool's observer with its stack. The connection's closing ends fn.
func (uc *upstreamConn) goRecovered(fn func()) {
	report := func(v any, stack []byte) {
		uc.pin.pool.observe(func(o Observer) { o.Panicked(v, stack) })
	}
	go recovered.Call(report, fn)
}

// resume stops the idle watch before an exchange, and tells whether the
// connection is still usable.
func (uc *upstreamConn) resume() error {
	if uc.watching == nil {
		return errors.New("pinning: an exchange began before the last one ended")
	}
	uc.resuming.Store(true)
	// A past deadline stops the watch's read. Some connections set a
	// deadline of their own before each read (reverse_proxy's read_timeout
	// wrapper does): one set just before the watch began reading is
	// overwritten, so it is set again until the watch has stopped.
	stopped := false
	for range resumeTries {
		_ = uc.Conn.SetReadDeadline(time.Unix(1, 0))
		select {
		case <-uc.watching:
			stopped = true
		case <-time.After(resumeRetry):
		}
		if stopped {
			break
		}
	}
	if !stopped {
		_ = uc.Conn.Close() // ends the watch
		<-uc.watching
	}
	uc.watching = nil
	uc.resuming.Store(false)
	if !stopped {
		return errors.New("pinning: the idle connection's watch did not stop")
	}
	return uc.Conn.SetReadDeadline(time.Time{})
}

// resumeTries and resumeRetry bound how long resume sets the past deadline
// again for a watch that read on: a second is far more than a goroutine
// needs to reach its read.
const (
	resumeTries = 100
	resumeRetry = 10 * time.Millisecond
)

// answerBody is an answer's body: once read to its end, with its request
// all written, the exchange is done and the connection waits for the next.
type answerBody struct {
	rc      io.ReadCloser
	uc      *upstreamConn
	req     *http.Request
	resp    *http.Response
	written <-chan error
	stop    func() bool // of the cancellation hook

	mu   sync.Mutex
	done bool // finished or abandoned
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish()
	case err != nil:
		b.abandon()
	}
	return n, err
}

// Close ends the exchange; before the body's end, the rest of the answer
// is unread and the connection can carry nothing more.
func (b *answerBody) Close() error {
	b.abandon()
	return b.rc.Close()
}

// finish ends an exchange whose answer was read to its end.
func (b *answerBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	b.stop()
	wait := time.NewTimer(requestWriteWait)
	defer wait.Stop()
	select {
	case err := <-b.written:
		if err == nil && !b.resp.Close && !b.req.Close {
			b.uc.watch()
			return
		}
	case <-wait.C:
	}
	_ = b.uc.Close()
}

// abandon ends an exchange cut short: the connection closes.
func (b *answerBody) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	b.stop()
	_ = b.uc.Close()
}

// upgradedBody is a 101 answer's body: the stream, as net/http hands one
// over (Caddy needs an io.ReadWriteCloser).
type upgradedBody struct {
	io.Reader
	net.Conn
}

func (b *upgradedBody) Read(p []byte) (int, error) { return b.Reader.Read(p) }
