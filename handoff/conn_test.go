package handoff

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// listenerPair returns a closed Listener (its server shutting down) and an
// open one on the same address, its successor, both of a new Registry.
func listenerPair(t *testing.T) (closing, successor *Listener, sock net.Listener) {
	t.Helper()
	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	r := NewRegistry()
	closing, successor = r.Wrap(nopClose{sock}), r.Wrap(nopClose{sock})
	t.Cleanup(func() { successor.Close() })
	closing.Close()
	return closing, successor, sock
}

// nopClose leaves the shared socket open when one Listener closes.
type nopClose struct{ net.Listener }

func (nopClose) Close() error { return nil }

// conn returns a Conn of ln on one end of a pipe, and the client's end.
func conn(ln *Listener) (*Conn, net.Conn) {
	server, client := net.Pipe()
	return &Conn{Conn: server, ln: ln}, client
}

// closedByPeer reports whether the client's end sees its connection closed.
func closedByPeer(t *testing.T, client net.Conn) bool {
	t.Helper()
	_ = client.SetReadDeadline(time.Now().Add(time.Second))
	_, err := client.Read(make([]byte, 1))
	return err == io.EOF || err == io.ErrClosedPipe
}

// serve plays a server that reads request (if any) and may answer.
func serve(t *testing.T, c *Conn, client net.Conn, request string, answer string) {
	t.Helper()
	if request != "" {
		go func() { _, _ = client.Write([]byte(request)) }()
		if _, err := io.ReadFull(c, make([]byte, len(request))); err != nil {
			t.Fatal(err)
		}
	}
	if answer != "" {
		go func() { _, _ = io.ReadFull(client, make([]byte, len(answer))) }()
		if _, err := c.Write([]byte(answer)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForRequest plays a server that waits for the next request with a
// read of n bytes, and returns once that read waits.
func waitForRequest(t *testing.T, c *Conn, n int) {
	t.Helper()
	go func() { _, _ = c.Read(make([]byte, n)) }()
	poll.Until(t, time.Second, "the read to start", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reading
	})
}

func TestConnHandedOffOnlyWhenNothingIsLost(t *testing.T) {
	const (
		request = "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
		ok      = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	)
	for _, tt := range []struct {
		name     string
		play     func(t *testing.T, c *Conn, client net.Conn)
		handOver bool
		// successorReads is what the successor must read first.
		successorReads string
	}{
		{"answered, then idle", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, ok)
		}, true, ""},
		{"read and dropped before any handler ran", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, "")
		}, true, request},
		{"pipelined after the last answer, all dropped", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, ok)
			serve(t, c, client, request+request, "")
		}, true, request + request},
		// net/http's buffer holds the second request: it cannot move.
		{"pipelined before the answer", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request+request, ok)
		}, false, ""},
		// net/http fills its whole buffer only when it is empty.
		{"pipelined, then waiting with its buffer empty", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request+request, ok)
			serve(t, c, client, "", ok)
			waitForRequest(t, c, netHTTPReadBuffer)
		}, true, ""},
		{"pipelined, then waiting with bytes in its buffer", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request+request, ok)
			waitForRequest(t, c, netHTTPReadBuffer-len(request))
		}, false, ""},
		{"pipelined once, then not", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request+request, ok)
			serve(t, c, client, "", ok)
			serve(t, c, client, request, ok)
		}, false, ""},
		{"answered before the request's body was read", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, strings.TrimSuffix(request, "{}"), "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\n\r\n")
			serve(t, c, client, "{}", "")
		}, false, ""},
		{"answer announced Connection: close", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		}, false, ""},
		{"Connection: close split between two writes", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, "HTTP/1.1 200 OK\r\nConnec")
			serve(t, c, client, "", "tion: close\r\nContent-Length: 0\r\n\r\n")
		}, false, ""},
		{"HTTP/1.0", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, "GET / HTTP/1.0\r\n\r\n", "HTTP/1.0 200 OK\r\n\r\n")
		}, false, ""},
		{"seen by a handler, unanswered", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, "")
			// net/http's background read: a handler has read the body.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			_, _ = c.Read(make([]byte, 1))
			_ = c.SetReadDeadline(time.Time{})
		}, false, ""},
		{"switched to another protocol", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\n\r\n")
		}, false, ""},
		{"TLS on the wire", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, "\x16\x03\x01\x00\x05hello", "")
		}, false, ""},
		{"HTTP/2's preface", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "")
		}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			closing, successor, _ := listenerPair(t)
			var closed int
			closing.registry.Closed = func() { closed++ }
			c, client := conn(closing)
			defer client.Close()
			tt.play(t, c, client)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tt.handOver]; closed != want {
				t.Errorf("counted %d closed instead of handed off, want %d", closed, want)
			}
			select {
			case next := <-successor.handed:
				if !tt.handOver {
					t.Fatal("handed off")
				}
				// The successor reads first what the old server left unanswered.
				if tt.successorReads != "" {
					buf := make([]byte, len(tt.successorReads))
					if _, err := io.ReadFull(next, buf); err != nil || string(buf) != tt.successorReads {
						t.Fatalf("successor read %q, %v", buf, err)
					}
				}
				next.Conn.Close()
			default:
				if tt.handOver {
					t.Fatal("not handed off")
				}
				if !closedByPeer(t, client) {
					t.Fatal("neither handed off nor closed")
				}
			}
		})
	}
}

// An idle connection's pending read is interrupted, and what it got goes
// to the successor.
func TestConnIdleReadInterrupted(t *testing.T) {
	closing, successor, _ := listenerPair(t)
	c, client := conn(closing)
	defer client.Close()
	readErr := make(chan error)
	go func() {
		_, err := c.Read(make([]byte, 4096)) // the server waiting for the next request
		readErr <- err
	}()
	poll.Until(t, time.Second, "the read to start", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reading
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != net.ErrClosed {
		t.Fatalf("the old server's read: %v, want net.ErrClosed", err)
	}
	next := <-successor.handed
	go func() { _, _ = client.Write([]byte("GET / HTTP/1.1\r\n")) }()
	buf := make([]byte, 16)
	if _, err := io.ReadFull(next, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("successor read %q, %v", buf, err)
	}
}

// Without a successor, or before the listener closes, Close closes.
func TestConnClosesWithoutSuccessor(t *testing.T) {
	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	r := NewRegistry()
	var closed int
	r.Closed = func() { closed++ }
	open := r.Wrap(nopClose{sock})
	c, client := conn(open)
	c.Close()
	if !closedByPeer(t, client) {
		t.Fatal("an open listener's connection was not closed")
	}
	if closed != 0 {
		t.Errorf("a connection closed outside a reload counted as closed instead of handed off")
	}
	open.Close()
	c, client = conn(open)
	c.Close()
	if !closedByPeer(t, client) {
		t.Fatal("a connection without a successor was not closed")
	}
	if closed != 1 {
		t.Errorf("counted %d closed instead of handed off, want 1", closed)
	}
}

// A TLS connection reaches the server as a Conn that carries its
// plaintext and tells its session, as the *tls.Conn it wraps would.
func TestTLSConnComesWithItsSession(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	defer srv.Close()
	cfg := srv.TLS
	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	ln := NewRegistry().Wrap(tls.NewListener(sock, cfg))
	defer ln.Close()
	const request = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	go func() {
		c, err := tls.Dial("tcp", sock.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			_, _ = io.WriteString(c, request)
			_, _ = c.Read(make([]byte, 1)) // until the server closes
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*tls.Conn); ok {
		t.Fatal("accepted the *tls.Conn itself: it could not be handed off")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(request))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != request {
		t.Fatalf("read %q, %v; want the plaintext %q", got, err, request)
	}
	st, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		t.Fatalf("accepted %T, which tells no TLS state", c)
	}
	if !st.ConnectionState().HandshakeComplete {
		t.Error("ConnectionState is not the session's: no handshake complete")
	}
}

// A connection its server closes while its listener is open, but with a
// successor on the address (net/http closes connections as its Shutdown
// begins, before it closes the listener), waits for the listener: handed
// off once it closes, closed if the successor goes first. One that timed
// out, or without a successor, closes at once.
func TestConnClosedBeforeItsListener(t *testing.T) {
	const (
		request = "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
		ok      = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	)
	pair := func(t *testing.T) (old, successor *Listener, closed *atomic.Int64) {
		sock, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sock.Close() })
		r := NewRegistry()
		closed = new(atomic.Int64)
		r.Closed = func() { closed.Add(1) }
		old, successor = r.Wrap(nopClose{sock}), r.Wrap(nopClose{sock})
		t.Cleanup(func() { old.Close(); successor.Close() })
		return old, successor, closed
	}
	state := func(c *Conn) connState {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.state
	}
	for _, tt := range []struct {
		name string
		play func(t *testing.T, c *Conn, client net.Conn)
		// successorReads is what the successor must read first.
		successorReads string
	}{
		{"closed after its answer", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, ok)
		}, ""},
		{"request read and dropped", func(t *testing.T, c *Conn, client net.Conn) {
			serve(t, c, client, request, ok)
			serve(t, c, client, request, "")
		}, request},
	} {
		t.Run(tt.name+", then the listener closes", func(t *testing.T) {
			old, successor, closed := pair(t)
			c, client := conn(old)
			defer client.Close()
			tt.play(t, c, client)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if s := state(c); s != stateParked {
				t.Fatalf("closed with its listener open: state %d, want parked", s)
			}
			if len(successor.handed) != 0 {
				t.Fatal("handed off before its listener closed")
			}
			old.Close()
			next := <-successor.handed
			defer next.Conn.Close()
			if tt.successorReads != "" {
				buf := make([]byte, len(tt.successorReads))
				if _, err := io.ReadFull(next, buf); err != nil || string(buf) != tt.successorReads {
					t.Fatalf("successor read %q, %v", buf, err)
				}
			}
			if closed.Load() != 0 {
				t.Errorf("%d counted closed", closed.Load())
			}
		})
		t.Run(tt.name+", then the successor goes", func(t *testing.T) {
			old, successor, _ := pair(t)
			c, client := conn(old)
			defer client.Close()
			tt.play(t, c, client)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			successor.Close()
			if !closedByPeer(t, client) || state(c) != stateGone {
				t.Fatal("a parked connection whose successor went is not closed")
			}
		})
	}
	t.Run("timed out", func(t *testing.T) {
		old, successor, _ := pair(t)
		c, client := conn(old)
		defer client.Close()
		serve(t, c, client, request, ok)
		// net/http's idle timeout ends its wait for the next request.
		_ = c.SetReadDeadline(time.Now())
		if _, err := c.Read(make([]byte, netHTTPReadBuffer)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a timeout", err)
		}
		c.Close()
		if !closedByPeer(t, client) || len(successor.handed) != 0 {
			t.Fatal("a connection closed for its idle timeout was not closed at once")
		}
	})
	t.Run("no successor", func(t *testing.T) {
		old, successor, _ := pair(t)
		successor.Close()
		c, client := conn(old)
		defer client.Close()
		serve(t, c, client, request, ok)
		c.Close()
		if !closedByPeer(t, client) {
			t.Fatal("a connection without a successor was not closed at once")
		}
	})
}

// chanListener accepts the connections sent on it until its socket, shared
// with others, closes; its own Close leaves the socket open, as a listener
// whose past deadline its successor cleared before its Accept saw it.
type chanListener struct {
	net.Listener // the shared socket, for its address
	conns        chan net.Conn
}

func (l chanListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

func (chanListener) Close() error { return nil }

// A new connection that a closed listener's socket accepts after its
// close (the socket shared with its successor) goes to the successor, and
// counts neither as handed off nor as closed: its drain report, given
// already, and the registry's counts agree.
func TestConnAcceptedAfterItsListenerClosedIsTheSuccessors(t *testing.T) {
	sock, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	r := NewRegistry()
	var handedOff, closed atomic.Int64
	r.HandedOff = func() { handedOff.Add(1) }
	r.Closed = func() { closed.Add(1) }
	drains := make(chan Drain, 1)
	r.Drained = func(d Drain) { drains <- d }
	oldConns := make(chan net.Conn)
	defer close(oldConns)
	old := r.Wrap(chanListener{sock, oldConns})
	successor := r.Wrap(nopClose{sock})
	defer successor.Close()
	old.Close()
	if d := <-drains; d.OpenAtClose != 0 || d.HandedOff != 0 || d.Closed != 0 {
		t.Fatalf("drain report %+v, want no connection", d)
	}
	server, client := net.Pipe()
	defer client.Close()
	oldConns <- server // accepted by the old listener's accept loop
	next := <-successor.handed
	defer next.Conn.Close()
	if next.Conn != server {
		t.Fatal("the successor got another connection")
	}
	if handedOff.Load() != 0 || closed.Load() != 0 {
		t.Errorf("counted %d handed off and %d closed after a drain report of none", handedOff.Load(), closed.Load())
	}
}
