package httpcheck

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Only a reset while dialling is one at connect: a reset later, on a
// connection the client could write to, is not.
func TestResetAtConnect(t *testing.T) {
	reset := os.NewSyscallError("connect", syscall.ECONNRESET)
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: reset}}, true},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}, false},
		{&url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, false},
		{errors.New("connection reset by peer"), false},
	} {
		if got := ResetAtConnect(tt.err); got != tt.want {
			t.Errorf("ResetAtConnect(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	_, connErr := http.Get(refused)

	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	_, timeoutErr := (&http.Client{Timeout: 20 * time.Millisecond}).Get(hung.URL)

	for _, c := range []struct {
		status int
		err    error
		want   string
	}{
		{503, nil, "503"},
		{0, connErr, "conn"},
		{0, timeoutErr, "timeout"},
		{0, errors.New("EOF"), "conn"},
	} {
		if got := ErrorKind(c.status, c.err); got != c.want {
			t.Errorf("ErrorKind(%d, %v) = %q, want %q", c.status, c.err, got, c.want)
		}
	}
}

func TestWaitOK(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := WaitOK(srv.URL, 10*time.Second, time.Second, nil); err != nil || asked.Load() != 3 {
		t.Fatalf("WaitOK = %v after %d requests, want nil after the third", err, asked.Load())
	}

	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer never.Close()
	if err := WaitOK(never.URL, 200*time.Millisecond, time.Second, nil); err == nil || !strings.Contains(err.Error(), "status 502") {
		t.Errorf("WaitOK on a 502 = %v, want a timeout naming status 502", err)
	}
	gone := errors.New("the server exited")
	if err := WaitOK(never.URL, 10*time.Second, time.Second, func() error { return gone }); !errors.Is(err, gone) {
		t.Errorf("WaitOK with stop failing = %v, want stop's error", err)
	}
}
