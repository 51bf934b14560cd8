package pinning

import (
	"context"
	"net"
	"net/http"
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
