package pinning

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lateWriter is a connection whose writes return late: their bytes are on
// the wire at once, but the writer hears it done only after delay, as when
// a loaded machine leaves the writing goroutine without a CPU.
type lateWriter struct {
	net.Conn
	delay time.Duration
}

func (c *lateWriter) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	time.Sleep(c.delay) // the fault itself: a writer that runs late
	return n, err
}

func lateWriterTransport(delay time.Duration) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lateWriter{Conn: c, delay: delay}, nil
	}}
}

// A pin's connection is kept however late its writer reports a request
// written. net/http's Transport closes a kept-alive connection whose write
// is not reported done 50 ms after its answer was read; for a pin that
// signed a user out (pin_lost) while both ends kept the connection.
func TestPinKeepsItsConnectionWhenWritesReportLate(t *testing.T) {
	u := newUpstream(t)
	p := New(lateWriterTransport(100*time.Millisecond), Config{Max: 10})
	t.Cleanup(p.Close)
	c := newClient(t)
	negotiate := http.Header{"Authorization": {"NTLM TlRMTVNTUAABAAAA"}}
	challenge, err := send(t, p, c, u.addr(), "/challenge", negotiate)
	if err != nil {
		t.Fatal(err)
	}
	up := challenge.Header.Get("X-Conn")
	for _, path := range []string{"/", "/page", "/"} {
		resp, err := send(t, p, c, u.addr(), path, nil)
		if err != nil {
			t.Fatalf("GET %s after a late write: %v", path, err)
		}
		if got := resp.Header.Get("X-Conn"); got != up {
			t.Fatalf("GET %s went on upstream connection %s, not the pin's %s", path, got, up)
		}
	}
	if u.isClosed(up) || c.isClosed() {
		t.Fatal("the pin's connection closed though neither end closed it")
	}
}

// A pin to an https upstream does TLS itself with the template's settings
// (net/http's Transport did it before), and keeps that connection too.
func TestPinSpeaksTLSToHTTPSUpstreams(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Conn", r.RemoteAddr)
		if r.Header.Get("Authorization") != "" {
			w.Header().Set("WWW-Authenticate", "NTLM TlRMTVNTUAACAAAA")
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	template := srv.Client().Transport.(*http.Transport).Clone()
	p := New(template, Config{Max: 10})
	t.Cleanup(p.Close)
	c := newClient(t)
	var conns []string
	for _, h := range []http.Header{{"Authorization": {"NTLM TlRMTVNTUAABAAAA"}}, nil, nil} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		req.Header = h.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		p.ConnState(c.conn, http.StateActive)
		resp, err := p.RoundTrip(c.conn, req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		p.ConnState(c.conn, http.StateIdle)
		if resp.TLS == nil {
			t.Fatal("an answer from an https upstream came without TLS")
		}
		conns = append(conns, resp.Header.Get("X-Conn"))
	}
	if conns[0] != conns[1] || conns[1] != conns[2] {
		t.Fatalf("the pin's requests went on upstream connections %v, want one", conns)
	}
}

// A request body is written while the answer is read, and the connection
// carries the next request once both are done.
func TestPinSendsRequestBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Conn", r.RemoteAddr)
		w.Header().Set("X-Read", strconv.FormatInt(n, 10))
		w.Header().Set("WWW-Authenticate", "NTLM TlRMTVNTUAACAAAA")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	p := New(&http.Transport{}, Config{Max: 10})
	t.Cleanup(p.Close)
	c := newClient(t)
	const size = 1 << 20
	var first string
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(strings.Repeat("x", size)))
		req.Header.Set("Authorization", "NTLM TlRMTVNTUAABAAAA")
		p.ConnState(c.conn, http.StateActive)
		resp, err := p.RoundTrip(c.conn, req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		p.ConnState(c.conn, http.StateIdle)
		if got := resp.Header.Get("X-Read"); got != strconv.Itoa(size) {
			t.Fatalf("the upstream read %s bytes of %d", got, size)
		}
		if i == 0 {
			first = resp.Header.Get("X-Conn")
		} else if got := resp.Header.Get("X-Conn"); got != first {
			t.Fatalf("request %d went on upstream connection %s, not the pin's %s", i, got, first)
		}
	}
}

// An answer whose body is closed before its end, or whose request is
// cancelled mid-answer, leaves bytes on the connection that belong to no
// request: the connection closes, never carrying another answer, and a
// locked pin is lost.
func TestPinClosesAConnectionCutMidAnswer(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Conn", r.RemoteAddr)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	}))
	closed := make(chan string, 4)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- c.RemoteAddr().String()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	for _, cut := range []string{"body closed", "cancelled"} {
		t.Run(cut, func(t *testing.T) {
			p := New(&http.Transport{}, Config{Max: 10})
			t.Cleanup(p.Close)
			c := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
			req.Header = negotiate.Clone()
			p.ConnState(c.conn, http.StateActive)
			resp, err := p.RoundTrip(c.conn, req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			if cut == "cancelled" {
				cancel()
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
			select {
			case got := <-closed:
				if got != resp.Header.Get("X-Conn") {
					t.Fatalf("upstream connection %s closed, not the pin's %s", got, resp.Header.Get("X-Conn"))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the connection cut mid-answer stayed open")
			}
			p.ConnState(c.conn, http.StateIdle)
			if _, err := send(t, p, c, srv.Listener.Addr().String(), "/", nil); !isRefusal(err, http.StatusUnauthorized) {
				t.Fatalf("the next request of a pin whose connection was cut: %v, want the pin_lost refusal", err)
			}
		})
	}
}
