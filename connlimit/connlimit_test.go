package connlimit

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// fakeListener hands out the connections put in conns, counting the
// Accepts that reached it.
type fakeListener struct {
	conns    chan net.Conn
	accepts  atomic.Int32
	closed   chan struct{}
	closeOne sync.Once
}

func newFake() *fakeListener {
	return &fakeListener{conns: make(chan net.Conn, 16), closed: make(chan struct{})}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.accepts.Add(1)
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}

func (f *fakeListener) Close() error {
	f.closeOne.Do(func() { close(f.closed) })
	return nil
}

func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// pipe puts a new connection in f's queue.
func (f *fakeListener) pipe(t testing.TB) {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	f.conns <- server
}

// acceptLoop accepts from ln until it fails, sending each connection on
// the channel it returns, closed once Accept failed.
func acceptLoop(ln net.Listener) (<-chan net.Conn, <-chan error) {
	conns, errc := make(chan net.Conn, 16), make(chan error, 1)
	go func() {
		defer close(conns)
		for {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			conns <- c
		}
	}()
	return conns, errc
}

func recv(t *testing.T, conns <-chan net.Conn, what string) net.Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

// With max 2, the third Accept waits without asking the listener for a
// connection (the kernel's backlog keeps it) until one of the two closes.
func TestTheConnectionAfterMaxWaitsForOneToClose(t *testing.T) {
	f := newFake()
	l := New(2)
	conns, _ := acceptLoop(l.Wrap(f))
	defer f.Close()
	for range 3 {
		f.pipe(t)
	}
	a, b := recv(t, conns, "the first"), recv(t, conns, "the second")
	poll.Until(t, 5*time.Second, "the third Accept to wait", func() bool { return l.Waiting() == 1 })
	if n := f.accepts.Load(); n != 2 {
		t.Fatalf("the wrapped listener was asked for %d connections, want 2 (the third stays in the backlog)", n)
	}
	if l.Open() != 2 {
		t.Fatalf("open %d, want 2", l.Open())
	}
	a.Close()
	a.Close() // a second Close gives back nothing more
	c := recv(t, conns, "the third, once one closed")
	if l.Open() != 2 || l.Waiting() != 1 {
		t.Fatalf("open %d, waiting %d, want 2 and 1 (the fourth Accept)", l.Open(), l.Waiting())
	}
	b.Close()
	c.Close()
	poll.Until(t, 5*time.Second, "every place free", func() bool { return l.Open() == 0 })
}

// The same over real TCP: the third client connects (the kernel accepts
// into its backlog) but is not served until one of the first two leaves.
func TestTCPClientsPastMaxWaitInTheBacklog(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(2)
	ln := l.Wrap(raw)
	defer ln.Close()
	served := make(chan string, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					served <- string(buf)
					c.Write(buf)
				}
			}()
		}
	}()
	var clients []net.Conn
	for _, name := range []string{"a", "b", "c"} {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(name)); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	got := map[string]bool{}
	for range 2 {
		got[<-served] = true
	}
	if !got["a"] || !got["b"] {
		t.Fatalf("served %v first, want a and b", got)
	}
	poll.Until(t, 5*time.Second, "the third to wait", func() bool { return l.Waiting() == 1 })
	select {
	case s := <-served:
		t.Fatalf("%s served while two connections are open", s)
	default:
	}
	clients[0].Close()
	select {
	case s := <-served:
		if s != "c" {
			t.Fatalf("served %s, want c", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third client is not served once the first left")
	}
}

// Listeners of one limit share it; one waiting for a client holds no
// place, so its neighbour may use them all.
func TestListenersShareALimitAndAnIdleOneHoldsNothing(t *testing.T) {
	busy, idle := newFake(), newFake()
	l := New(2)
	busyConns, _ := acceptLoop(l.Wrap(busy))
	idleConns, _ := acceptLoop(l.Wrap(idle))
	defer busy.Close()
	defer idle.Close()
	poll.Until(t, 5*time.Second, "the idle listener to wait for a client", func() bool { return idle.accepts.Load() == 1 })
	busy.pipe(t)
	busy.pipe(t)
	a, b := recv(t, busyConns, "the first"), recv(t, busyConns, "the second")
	idle.pipe(t)
	// The idle listener's Accept got a client while both places are
	// taken: it holds it until one frees (and the busy one's next Accept
	// waits too).
	poll.Until(t, 5*time.Second, "the idle listener's client to wait", func() bool { return l.Waiting() == 2 })
	select {
	case <-idleConns:
		t.Fatal("a third connection accepted past max 2")
	default:
	}
	b.Close()
	c := recv(t, idleConns, "the other listener's connection")
	a.Close()
	c.Close()
}

// A frontend's limit inside the global one, as the translation of
// HAProxy's maxconn chains them: a connection that a frontend's listener
// accepted while the frontend is full waits for its place without holding
// a global one, so another frontend still gets the global places free.
func TestChainedLimitsHoldNoGlobalPlaceForAFullFrontend(t *testing.T) {
	global, web := New(3), New(2)
	f1, f2, f3 := newFake(), newFake(), newFake()
	web1, _ := acceptLoop(global.Wrap(web.Wrap(f1)))
	web2, _ := acceptLoop(global.Wrap(web.Wrap(f2)))
	api, _ := acceptLoop(global.Wrap(New(50).Wrap(f3)))
	defer f1.Close()
	defer f2.Close()
	defer f3.Close()
	poll.Until(t, 5*time.Second, "every listener to wait for a client", func() bool {
		return f1.accepts.Load() == 1 && f2.accepts.Load() == 1 && f3.accepts.Load() == 1
	})
	f1.pipe(t)
	f1.pipe(t)
	a, b := recv(t, web1, "web's first"), recv(t, web1, "web's second")
	f2.pipe(t) // web's other listener was already waiting for it: it holds it
	poll.Until(t, 5*time.Second, "web's third to wait for web's place", func() bool { return web.Waiting() == 2 })
	if global.Open() != 2 {
		t.Fatalf("global open %d, want 2: the held connection takes no global place", global.Open())
	}
	f3.pipe(t)
	api1 := recv(t, api, "api's first, with a global place still free")
	f3.pipe(t)
	poll.Until(t, 5*time.Second, "api's second to wait for a global place", func() bool { return global.Waiting() >= 1 })
	a.Close()
	var next net.Conn
	select {
	case next = <-web2:
	case next = <-api:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing accepted once a connection closed")
	}
	b.Close()
	select {
	case <-web2:
	case <-api:
	case <-time.After(5 * time.Second):
		t.Fatal("the other waiting connection is not accepted once another closed")
	}
	if global.Open() != 3 || web.Open() > 2 {
		t.Fatalf("global open %d, web open %d", global.Open(), web.Open())
	}
	next.Close()
	api1.Close()
}

// Closing the listener ends an Accept that waits for a place, with an
// error that names net.ErrClosed; no goroutine is left behind.
func TestCloseEndsAWaitingAccept(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFake()
	l := New(1)
	ln := l.Wrap(f)
	conns, errc := acceptLoop(ln)
	f.pipe(t)
	held := recv(t, conns, "the first")
	poll.Until(t, 5*time.Second, "the second Accept to wait", func() bool { return l.Waiting() == 1 })
	ln.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	if l.Waiting() != 0 {
		t.Fatalf("waiting %d after Close", l.Waiting())
	}
	held.Close()
	if l.Open() != 0 {
		t.Fatalf("open %d", l.Open())
	}
	poll.Until(t, 5*time.Second, "the accept loop's goroutine to end", func() bool { return runtime.NumGoroutine() <= before })
}

// A connection that a listener accepted while its neighbour took the last
// place waits for a place in hand; closing the listener closes it.
func TestCloseDropsAConnectionHeldForAPlace(t *testing.T) {
	busy, idle := newFake(), newFake()
	l := New(1)
	busyConns, _ := acceptLoop(l.Wrap(busy))
	defer busy.Close()
	idleLn := l.Wrap(idle)
	_, errc := acceptLoop(idleLn)
	poll.Until(t, 5*time.Second, "the idle listener to wait for a client", func() bool { return idle.accepts.Load() == 1 })
	busy.pipe(t)
	defer recv(t, busyConns, "the busy listener's connection").Close()
	server, client := net.Pipe()
	defer client.Close()
	idle.conns <- server
	// The busy listener's next Accept waits, and so does the idle one's
	// connection.
	poll.Until(t, 5*time.Second, "the accepted connection to wait for a place", func() bool { return l.Waiting() == 2 })
	idleLn.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept: %v, want net.ErrClosed", err)
	}
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the held connection was not closed: %v", err)
	}
	if l.Open() != 1 || l.Waiting() != 1 {
		t.Fatalf("open %d, waiting %d, want 1 and 1 (the busy listener's Accept)", l.Open(), l.Waiting())
	}
}

// After TLS the wrapper keeps the connection's ConnectionState, which
// Caddy takes a request's TLS state from.
func TestTLSConnectionKeepsItsState(t *testing.T) {
	f := newFake()
	server, client := net.Pipe()
	defer client.Close()
	f.conns <- tls.Server(server, &tls.Config{})
	c, err := New(1).Wrap(f).Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(connectionStater); !ok {
		t.Fatalf("%T has no ConnectionState", c)
	}
	plain := newFake()
	plain.pipe(t)
	c2, err := New(1).Wrap(plain).Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(connectionStater); ok {
		t.Fatalf("a plain connection claims a TLS state")
	}
}

func TestGroups(t *testing.T) {
	var g Groups
	old, reload := new(int), new(int) // two configurations
	a, err := g.Use("fe", 10, old)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := g.Use("fe", 10, old); b != a {
		t.Fatal("one configuration's listeners of a group got two limits")
	}
	if _, err := g.Use("fe", 20, old); err == nil {
		t.Fatal("one group with two maxima in one configuration accepted")
	}
	if b, _ := g.Use("fe", 10, reload); b != a {
		t.Fatal("a reload with the same max does not share the old connections' count")
	}
	g.Release("fe", a, old)
	g.Release("fe", a, old)
	g.Release("fe", a, reload)
	if c, _ := g.Use("fe", 10, reload); c == a {
		t.Fatal("a group no one used is still remembered")
	}
	d, _ := g.Use("other", 5, old)
	e, err := g.Use("other", 7, reload)
	if err != nil || e == d || e.Max() != 7 {
		t.Fatalf("a reload with another max: %v, %v", e, err)
	}
	g.Release("other", d, old) // the replaced one: nothing to undo
	if f, _ := g.Use("other", 7, new(int)); f != e {
		t.Fatal("releasing the replaced limit forgot the current one")
	}
	if _, err := g.Use("x", 0, old); err == nil {
		t.Fatal("max 0 accepted")
	}
}

// Accept and Close of one connection through the wrapper.
func BenchmarkAcceptClose(b *testing.B) {
	c := nopConn{}
	ln := New(1).Wrap(&sameConnListener{c})
	b.ReportAllocs()
	for b.Loop() {
		conn, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		conn.Close()
	}
}

// Listeners of one limit (two per CPU) accepting and closing in
// parallel, more of them than the limit's two places.
func BenchmarkAcceptCloseContended(b *testing.B) {
	l := New(2)
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		ln := l.Wrap(&sameConnListener{nopConn{}})
		for pb.Next() {
			conn, err := ln.Accept()
			if err != nil {
				b.Error(err)
				return
			}
			conn.Close()
		}
	})
}

type sameConnListener struct{ c net.Conn }

func (s *sameConnListener) Accept() (net.Conn, error) { return s.c, nil }
func (s *sameConnListener) Close() error              { return nil }
func (s *sameConnListener) Addr() net.Addr            { return &net.TCPAddr{} }

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
