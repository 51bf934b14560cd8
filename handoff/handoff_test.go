package handoff

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// sharedListener hands one socket to several servers in turn, as Caddy's
// listener pool does across a reload: closing one server's view wakes its
// Accept with a past deadline and leaves the socket open.
type sharedListener struct {
	*net.TCPListener
	closed atomic.Bool
}

func (l *sharedListener) Accept() (net.Conn, error) {
	for {
		if l.closed.Load() {
			return nil, net.ErrClosed
		}
		c, err := l.TCPListener.Accept()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if l.closed.Load() {
				return nil, net.ErrClosed
			}
			_ = l.TCPListener.SetDeadline(time.Time{})
			continue
		}
		return c, err
	}
}

func (l *sharedListener) Close() error {
	l.closed.Store(true)
	return l.TCPListener.SetDeadline(time.Now().Add(-time.Minute))
}

// server serves the socket through r with a handler that names its
// generation.
func server(t *testing.T, r *Registry, sock *net.TCPListener, gen string) *http.Server {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("X-Generation", gen)
		_, _ = io.WriteString(w, gen)
	})}
	ln := r.Wrap(&sharedListener{TCPListener: sock})
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return srv
}

// POSTs on 32 kept-alive connections while the server is replaced five
// times: no client error, and the new servers answer on connections the
// old ones accepted.
func TestReplacedServerHandsOffItsIdleConnections(t *testing.T) {
	sock, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	var handedOff atomic.Int64
	r := NewRegistry()
	r.HandedOff = func() { handedOff.Add(1) }
	var (
		drainsMu sync.Mutex
		drains   []Drain
	)
	r.Drained = func(d Drain) {
		drainsMu.Lock()
		drains = append(drains, d)
		drainsMu.Unlock()
	}
	current := server(t, r, sock, "0")

	url := "http://" + sock.Addr().String() + "/orders"
	tr := &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var (
		requests atomic.Int64
		mu       sync.Mutex
		failures []error
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	defer halt() // also when a wait below fails the test: no client outlives it
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(url, "application/json", strings.NewReader(`{"n":1}`))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
				requests.Add(1)
			}
		}()
	}
	for gen := range 5 {
		n := requests.Load()
		poll.Until(t, 5*time.Second, "requests flowing", func() bool { return requests.Load() > n+200 })
		next := server(t, r, sock, string(rune('1'+gen)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := current.Shutdown(ctx); err != nil {
			t.Errorf("shutdown %d: %v", gen, err)
		}
		cancel()
		current = next
	}
	n := requests.Load()
	poll.Until(t, 5*time.Second, "requests after the last replacement", func() bool { return requests.Load() > n+200 })
	halt()
	for _, err := range failures {
		t.Errorf("client error: %v", err)
	}
	if handedOff.Load() == 0 {
		t.Error("no connection was handed off")
	}
	t.Logf("%d requests, %d connections handed off", requests.Load(), handedOff.Load())
	// Each replaced server's listener reports, once its connections are
	// gone, what became of them: the reload's log line.
	poll.Until(t, 5*time.Second, "a drain report per replaced server", func() bool {
		drainsMu.Lock()
		defer drainsMu.Unlock()
		return len(drains) == 5
	})
	var reported int64
	for _, d := range drains {
		t.Logf("drain of %v: %d open at close, %d handed off, %d closed, in %v", d.Addr, d.OpenAtClose, d.HandedOff, d.Closed, d.Took)
		if d.HandedOff == 0 || d.HandedOff+d.Closed < d.OpenAtClose || d.Addr.String() != sock.Addr().String() {
			t.Errorf("drain report %+v: want connections handed off, and every connection open at the close accounted for", d)
		}
		reported += d.HandedOff
	}
	if reported != handedOff.Load() {
		t.Errorf("drain reports count %d connections handed off, the registry %d", reported, handedOff.Load())
	}
}

// readWatcher records the size of the read waiting on its connection.
type readWatcher struct {
	net.Conn
	waiting *atomic.Int64
}

func (c readWatcher) Read(p []byte) (int, error) {
	c.waiting.Store(int64(len(p)))
	defer c.waiting.Store(0)
	return c.Conn.Read(p)
}

type watchingListener struct {
	net.Listener
	waiting *atomic.Int64
}

func (l watchingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return readWatcher{c, l.waiting}, nil
}

// waitsOnEmptyBuffer's coupling: net/http's server waits for a request
// with a read of its whole buffer when the buffer is empty, and of less
// when it holds the start of the next request.
func TestNetHTTPWaitsWithAReadOfItsWholeBuffer(t *testing.T) {
	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var waiting atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(watchingListener{sock, &waiting}) //nolint:errcheck
	defer srv.Close()
	conn, err := net.Dial("tcp", sock.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	for _, tt := range []struct {
		send     string
		buffered int
	}{{get, 0}, {get + "GE", 2}} {
		if _, err := conn.Write([]byte(tt.send)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := int64(netHTTPReadBuffer - tt.buffered)
		poll.Until(t, 5*time.Second, fmt.Sprintf("net/http to wait with a read of %d bytes, %d buffered (netHTTPReadBuffer must follow net/http)", want, tt.buffered),
			func() bool { return waiting.Load() == want })
	}
}

// A kept-alive TLS connection, idle when its server is replaced, is
// answered by the successor on the same TCP connection and in the same TLS
// session: one handshake in all, on one local port.
func TestReplacedServerHandsOffATLSSession(t *testing.T) {
	sock, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cert := httptest.NewTLSServer(nil) // for its certificate
	defer cert.Close()
	cfg := cert.TLS.Clone()
	r := NewRegistry()
	serve := func(gen string) *http.Server {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(w, gen)
		})}
		go srv.Serve(r.Wrap(tls.NewListener(&sharedListener{TCPListener: sock}, cfg))) //nolint:errcheck
		t.Cleanup(func() { srv.Close() })
		return srv
	}
	old := serve("old")

	var handshakes, dials atomic.Int64
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func() (string, string) {
		t.Helper()
		var local string
		trace := &httptrace.ClientTrace{
			ConnectStart:      func(string, string) { dials.Add(1) },
			TLSHandshakeStart: func() { handshakes.Add(1) },
			GotConn:           func(info httptrace.GotConnInfo) { local = info.Conn.LocalAddr().String() },
		}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			http.MethodPost, "https://"+sock.Addr().String()+"/", strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), local
	}
	gen, before := get()
	if gen != "old" {
		t.Fatalf("answered by %q", gen)
	}
	serve("new")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	gen, after := get()
	if gen != "new" || after != before {
		t.Errorf("after the replacement: answered by %q on %s, want the new server on %s", gen, after, before)
	}
	if handshakes.Load() != 1 || dials.Load() != 1 {
		t.Errorf("%d dials and %d TLS handshakes, want one of each: the session did not move", dials.Load(), handshakes.Load())
	}
}

// gatedListener holds its server's Shutdown between its start and the
// close of its listener, where net/http has already begun to drop
// requests and to close connections after their answer: closing says that
// Shutdown has begun (it sets the server's shutting-down flag before it
// closes the listeners), release lets the close go on.
type gatedListener struct {
	net.Listener
	closing, release chan struct{}
}

func (l gatedListener) Close() error {
	close(l.closing)
	<-l.release
	return l.Listener.Close()
}

// net/http's Shutdown marks its server as shutting down before it closes
// the listeners, and the server's connections act on it at once: an idle
// connection's next request is read and dropped unanswered, and a
// connection whose answer ends then is closed after it without
// Connection: close. Both are closed while their Listener is still open:
// they are handed off once it closes, as if they had been closed after it.
func TestConnClosedAsShutdownBeginsIsHandedOff(t *testing.T) {
	sock, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	r := NewRegistry()
	var handedOff atomic.Int64
	r.HandedOff = func() { handedOff.Add(1) }
	gate := gatedListener{r.Wrap(&sharedListener{TCPListener: sock}), make(chan struct{}), make(chan struct{})}
	var conns sync.Map // client address: the old server's *Conn
	inHandler, finish := make(chan struct{}), make(chan struct{})
	old := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(w, "0")
			if req.URL.Path == "/slow" {
				w.(http.Flusher).Flush() // the answer's head, before Shutdown
				close(inHandler)
				<-finish
			}
		}),
		ConnState: func(c net.Conn, _ http.ConnState) { conns.Store(c.RemoteAddr().String(), c) },
	}
	go old.Serve(gate) //nolint:errcheck
	defer old.Close()

	const post = "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", sock.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	answer := func(br *bufio.Reader) (string, error) {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.Close {
			return string(b), errors.New("answered with Connection: close")
		}
		return string(b), err
	}
	serverConn := func(c net.Conn) *Conn {
		v, _ := conns.Load(c.LocalAddr().String())
		return v.(*Conn)
	}
	// idle: answered, its server waiting for its next request.
	idle, idleBr := dial()
	if _, err := io.WriteString(idle, post); err != nil {
		t.Fatal(err)
	}
	if gen, err := answer(idleBr); gen != "0" || err != nil {
		t.Fatalf("first answer %q, %v", gen, err)
	}
	poll.Until(t, 5*time.Second, "the old server to wait for the idle connection's next request", func() bool {
		c := serverConn(idle)
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reading
	})
	// busy: its answer's head is out, its handler runs on.
	busy, busyBr := dial()
	if _, err := io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-inHandler

	successor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(w, "1")
	})}
	go successor.Serve(r.Wrap(&sharedListener{TCPListener: sock})) //nolint:errcheck
	defer successor.Close()
	shutdown := make(chan error, 1)
	go func() { shutdown <- old.Shutdown(context.Background()) }()
	<-gate.closing // shutting down, its Listener still open

	// The idle connection's next request, which the old server reads and
	// drops; the busy connection's answer ends, and its server closes it.
	if _, err := io.WriteString(idle, post); err != nil {
		t.Fatal(err)
	}
	close(finish)
	if gen, err := answer(busyBr); gen != "0" || err != nil {
		t.Fatalf("the busy connection's answer %q, %v", gen, err)
	}
	for _, c := range []net.Conn{idle, busy} {
		poll.Until(t, 5*time.Second, "the old server to close its connection", func() bool {
			sc := serverConn(c)
			sc.mu.Lock()
			defer sc.mu.Unlock()
			return sc.state != stateOpen
		})
	}
	close(gate.release)
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
	if gen, err := answer(idleBr); gen != "1" || err != nil {
		t.Errorf("the request the old server dropped: answered %q, %v; want the successor's answer on the same connection", gen, err)
	}
	if _, err := io.WriteString(busy, post); err != nil {
		t.Fatal(err)
	}
	if gen, err := answer(busyBr); gen != "1" || err != nil {
		t.Errorf("the next request after the old server's last answer: answered %q, %v; want the successor's answer on the same connection", gen, err)
	}
	if handedOff.Load() != 2 {
		t.Errorf("%d connections handed off, want 2", handedOff.Load())
	}
}
