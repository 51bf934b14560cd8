package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// checkEvents records a ServerChecker's events.
type checkEvents struct {
	mu      sync.Mutex
	checks  []checkEvent
	panics  []string
	checked func(addr string) // called first, if set (to make it panic)
}

type checkEvent struct {
	addr        string
	passed      bool
	status      int
	up, changed bool
	err         error
}

func (e *checkEvents) Checked(addr string, r CheckResult, up, changed bool) {
	if e.checked != nil {
		e.checked(addr)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checks = append(e.checks, checkEvent{addr, r.Err == nil, r.Status, up, changed, r.Err})
}

func (e *checkEvents) Panicked(addr string, v any, stack []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.panics = append(e.panics, fmt.Sprint(v))
}

func (e *checkEvents) all() []checkEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.checks)
}

func startChecker(t *testing.T, addrs []string, check ServerCheck, obs ServerObserver) *ServerChecker {
	t.Helper()
	c, err := NewServerChecker(addrs, check, nil, obs)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(c.Close)
	return c
}

// checkOnce runs one check of addr with check, its defaults filled in.
func checkOnce(t *testing.T, addr string, check ServerCheck) CheckResult {
	t.Helper()
	c, err := NewServerChecker([]string{addr}, check, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.checkOnce(context.Background(), addr)
}

func TestServerCheckHealthCountsAsHAProxy(t *testing.T) {
	c := ServerCheck{Fall: 3, Rise: 2}.WithDefaults()
	up := func(h int) bool { return h >= c.Rise }
	// HAProxy starts a server at health rise: up, and down at the first
	// failure.
	if h := c.next(c.Rise, false); up(h) || h != 0 {
		t.Fatalf("a server at its start, after one failure: health %d, want 0 (down)", h)
	}
	if h := c.next(c.Rise, true); h != 4 {
		t.Fatalf("a server at its start, after one pass: health %d, want 4 (fully up)", h)
	}
	// Fully up: fall failures in a row to go down; a pass between them
	// starts the count again.
	h := 4
	for i, passed := range []bool{false, false, true, false, false} {
		if h = c.next(h, passed); !up(h) {
			t.Fatalf("down after check %d of a fully up server with failures false,false,true,false,false", i+1)
		}
	}
	if h = c.next(h, false); up(h) || h != 0 {
		t.Fatalf("after the third failure in a row: health %d, want 0 (down)", h)
	}
	// Down: rise passes in a row to come up; a failure between them
	// starts the count again.
	for i, passed := range []bool{true, false, true} {
		if h = c.next(h, passed); up(h) {
			t.Fatalf("up after check %d of a down server with passes true,false,true", i+1)
		}
	}
	if h = c.next(h, true); h != 4 {
		t.Fatalf("after the second pass in a row: health %d, want 4 (fully up)", h)
	}
	// fall 1 and rise 1: every check decides.
	one := ServerCheck{Fall: 1, Rise: 1}.WithDefaults()
	if one.next(1, false) != 0 || one.next(0, true) != 1 {
		t.Fatal("fall 1 rise 1: a check does not decide")
	}
	// fastinter while transitional or unchecked, downinter while fully
	// down, inter while fully up; each inter when not set.
	c.FastInterval, c.DownInterval = time.Millisecond, time.Minute
	for health, want := range map[int]time.Duration{0: time.Minute, 1: time.Millisecond, 2: time.Millisecond, 3: time.Millisecond, 4: c.Interval} {
		if got := c.interval(health); got != want {
			t.Errorf("interval at health %d: %v, want %v", health, got, want)
		}
	}
	c.FastInterval, c.DownInterval = 0, 0
	for health := range 5 {
		if got := c.interval(health); got != c.Interval {
			t.Errorf("interval at health %d without fast_interval and down_interval: %v, want inter", health, got)
		}
	}
}

func TestServerCheckDefaultsAreHAProxys(t *testing.T) {
	c := ServerCheck{HTTP: &HTTPCheck{}}.WithDefaults()
	if c.Interval != 2*time.Second || c.Timeout != 2*time.Second || c.Fall != 3 || c.Rise != 2 ||
		c.HTTP.Method != "OPTIONS" || c.HTTP.URI != "/" || c.HTTP.ExpectStatus != 0 {
		t.Fatalf("defaults %+v %+v, want inter 2s, timeout inter, fall 3, rise 2, OPTIONS /, 2xx or 3xx", c, *c.HTTP)
	}
	if c := (ServerCheck{Interval: 300 * time.Millisecond}).WithDefaults(); c.Timeout != 300*time.Millisecond {
		t.Fatalf("timeout %v with interval 300ms, want the interval", c.Timeout)
	}
}

func TestServerCheckValidate(t *testing.T) {
	for _, tc := range []struct {
		check   ServerCheck
		setting string
	}{
		{ServerCheck{Interval: -1}, "interval"},
		{ServerCheck{Timeout: -1}, "timeout"},
		{ServerCheck{ConnectTimeout: -1}, "connect_timeout"},
		{ServerCheck{FastInterval: -1}, "fast_interval"},
		{ServerCheck{DownInterval: -1}, "down_interval"},
		{ServerCheck{Fall: -1}, "fall"},
		{ServerCheck{Rise: -2}, "rise"},
		{ServerCheck{HTTP: &HTTPCheck{Method: "GE T"}}, "method"},
		{ServerCheck{HTTP: &HTTPCheck{URI: "health"}}, "uri"},
		{ServerCheck{HTTP: &HTTPCheck{URI: "/a b"}}, "uri"},
		{ServerCheck{HTTP: &HTTPCheck{Host: "a\r\nX: y"}}, "host"},
		{ServerCheck{HTTP: &HTTPCheck{ExpectStatus: 99}}, "expect_status"},
		{ServerCheck{HTTP: &HTTPCheck{ExpectStatus: 600}}, "expect_status"},
	} {
		var bad *SettingError
		if err := tc.check.Validate(); !errors.As(err, &bad) || bad.Setting != tc.setting {
			t.Errorf("%+v: %v, want a problem with %s", tc.check, err, tc.setting)
		}
	}
	if err := (ServerCheck{HTTP: &HTTPCheck{Method: "GET", URI: "*", ExpectStatus: 204}}).Validate(); err != nil {
		t.Errorf("a valid check refused: %v", err)
	}
}

func TestHTTPCheckPassesOn2xxAnd3xx(t *testing.T) {
	for _, tc := range []struct {
		status, expect int
		pass           bool
	}{
		{200, 0, true}, {204, 0, true}, {301, 0, true}, {302, 0, true}, {304, 0, true},
		{101, 0, false}, {400, 0, false}, {404, 0, false}, {500, 0, false}, {503, 0, false},
		{200, 200, true}, {301, 200, false}, {503, 503, true}, {204, 200, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.status == 101 { // a 101 needs an Upgrade
				w.Header().Set("Upgrade", "x")
				w.Header().Set("Connection", "Upgrade")
			}
			w.WriteHeader(tc.status)
		}))
		r := checkOnce(t, srv.Listener.Addr().String(), ServerCheck{HTTP: &HTTPCheck{ExpectStatus: tc.expect}, Timeout: 5 * time.Second})
		srv.Close()
		if (r.Err == nil) != tc.pass || r.Status != tc.status {
			t.Errorf("status %d, expect_status %d: passed=%v (%v), status %d; want passed=%v", tc.status, tc.expect, r.Err == nil, r.Err, r.Status, tc.pass)
		}
	}
}

func TestHTTPCheckRequest(t *testing.T) {
	seen := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.RequestURI + " " + r.Host + " close=" + fmt.Sprint(r.Close)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, tc := range []struct {
		http HTTPCheck
		want string
	}{
		{HTTPCheck{}, "OPTIONS / " + addr + " close=true"},
		{HTTPCheck{Method: "GET", URI: "/health?deep=1", Host: "app.internal"}, "GET /health?deep=1 app.internal close=true"},
	} {
		if r := checkOnce(t, addr, ServerCheck{HTTP: &tc.http, Timeout: 5 * time.Second}); r.Err != nil {
			t.Fatalf("%+v: %v", tc.http, r.Err)
		}
		if got := <-seen; got != tc.want {
			t.Errorf("%+v: the server saw %q, want %q", tc.http, got, tc.want)
		}
	}
}

func TestConnectCheckFailsOnRefusalAndPassesOnAnyListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// A connect check needs no answer: the listener accepts nothing.
	if r := checkOnce(t, addr, ServerCheck{Timeout: 5 * time.Second}); r.Err != nil {
		t.Fatalf("connect check of a listener: %v", r.Err)
	}
	// An HTTP check of a listener that is no HTTP server fails.
	if r := checkOnce(t, addr, ServerCheck{HTTP: &HTTPCheck{}, Timeout: 100 * time.Millisecond}); r.Err == nil {
		t.Fatal("an HTTP check of a silent listener passed")
	}
	ln.Close()
	for _, check := range []ServerCheck{{Timeout: 5 * time.Second}, {HTTP: &HTTPCheck{}, Timeout: 5 * time.Second}} {
		r := checkOnce(t, addr, check)
		if !errors.Is(r.Err, syscall.ECONNREFUSED) {
			t.Errorf("check (http %v) of a closed port: %v, want connection refused", check.HTTP != nil, r.Err)
		}
	}
}

func TestHTTPCheckTimesOut(t *testing.T) {
	silent := make(chan net.Conn, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			silent <- c // held open, never answered
		}
	}()
	defer func() {
		for len(silent) > 0 {
			(<-silent).Close()
		}
	}()
	addr := ln.Addr().String()
	// Without connect_timeout, timeout bounds the whole check.
	r := checkOnce(t, addr, ServerCheck{HTTP: &HTTPCheck{}, Timeout: 150 * time.Millisecond})
	if r.Err == nil || r.Duration < 150*time.Millisecond || r.Duration > 2*time.Second {
		t.Fatalf("a silent server: err %v after %v, want a timeout after 150ms", r.Err, r.Duration)
	}
	// With it, timeout counts from the connection, as HAProxy's timeout
	// check does.
	r = checkOnce(t, addr, ServerCheck{HTTP: &HTTPCheck{}, ConnectTimeout: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	if r.Err == nil || r.Duration < 200*time.Millisecond || r.Duration > 2*time.Second {
		t.Fatalf("a silent server, connect_timeout 50ms, timeout 200ms: err %v after %v, want a timeout after 200ms", r.Err, r.Duration)
	}
}

// toggledServer is an HTTP server at a fixed address that can be stopped
// and started again.
type toggledServer struct {
	t    *testing.T
	addr string
	srv  *http.Server
}

func newToggledServer(t *testing.T) *toggledServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &toggledServer{t: t, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *toggledServer) serve(ln net.Listener) {
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go s.srv.Serve(ln)
}

func (s *toggledServer) stop() { s.srv.Close() }

func (s *toggledServer) start() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(ln)
}

// checksOf returns the events of addr.
func checksOf(events []checkEvent, addr string) []checkEvent {
	var of []checkEvent
	for _, e := range events {
		if e.addr == addr {
			of = append(of, e)
		}
	}
	return of
}

func TestServerGoesDownAfterFallAndComesBackAfterRise(t *testing.T) {
	for _, kind := range []string{"tcp", "http"} {
		t.Run(kind, func(t *testing.T) {
			a, b := newToggledServer(t), newToggledServer(t)
			check := ServerCheck{Interval: 10 * time.Millisecond, Timeout: time.Second, Fall: 3, Rise: 2}
			if kind == "http" {
				check.HTTP = &HTTPCheck{URI: "/health"}
			}
			events := &checkEvents{}
			c := startChecker(t, []string{a.addr, b.addr}, check, events)
			if up := c.Up(); !slices.Equal(up, []string{a.addr, b.addr}) || c.Usable() != 2 {
				t.Fatalf("up before any check: %v, usable %d, want both (HAProxy starts a server up)", up, c.Usable())
			}
			poll.Until(t, 5*time.Second, "a pass of each server", func() bool {
				return len(checksOf(events.all(), a.addr)) > 0 && len(checksOf(events.all(), b.addr)) > 0
			})

			a.stop()
			poll.Until(t, 5*time.Second, "a down", func() bool { return !slices.Contains(c.Up(), a.addr) })
			if up := c.Up(); !slices.Equal(up, []string{b.addr}) || c.Usable() != 1 {
				t.Fatalf("up with a stopped: %v, usable %d", up, c.Usable())
			}
			went := downAfter(t, checksOf(events.all(), a.addr))
			if went != 3 {
				t.Fatalf("a went down at its failed check %d, want 3 (fall)", went)
			}

			a.start()
			poll.Until(t, 5*time.Second, "a up again", func() bool { return slices.Contains(c.Up(), a.addr) })
			if up := c.Up(); !slices.Equal(up, []string{a.addr, b.addr}) || c.Usable() != 2 {
				t.Fatalf("up after a came back: %v, usable %d, want the configured order", up, c.Usable())
			}
			if came := upAfter(t, checksOf(events.all(), a.addr)); came != 2 {
				t.Fatalf("a came up at its passed check %d, want 2 (rise)", came)
			}
		})
	}
}

// downAfter returns how many failed checks in a row, after the last pass,
// took the server down.
func downAfter(t *testing.T, checks []checkEvent) int {
	t.Helper()
	fails := 0
	for _, e := range checks {
		if e.passed {
			fails = 0
			continue
		}
		fails++
		if e.changed && !e.up {
			return fails
		}
	}
	t.Fatalf("no check took the server down: %+v", checks)
	return 0
}

// upAfter returns how many passed checks in a row, after the last
// failure, brought the server up.
func upAfter(t *testing.T, checks []checkEvent) int {
	t.Helper()
	passes := 0
	for _, e := range checks {
		if !e.passed {
			passes = 0
			continue
		}
		passes++
		if e.changed && e.up {
			return passes
		}
	}
	t.Fatalf("no check brought the server up: %+v", checks)
	return 0
}

func TestServerDownAtStartGoesDownAtTheFirstFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	events := &checkEvents{}
	c := startChecker(t, []string{dead}, ServerCheck{Interval: time.Hour, Fall: 3}, events)
	poll.Until(t, 5*time.Second, "the first check", func() bool { return len(events.all()) == 1 })
	if e := events.all()[0]; e.passed || !e.changed || e.up || len(c.Up()) != 0 {
		t.Fatalf("first check of a dead server: %+v, up %v; want down at once, as HAProxy", e, c.Up())
	}
}

func TestServerCheckerStartsAtTheHealthGiven(t *testing.T) {
	c, err := NewServerChecker([]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, ServerCheck{},
		func(addr string) (int, bool) {
			switch addr {
			case "127.0.0.1:1":
				return 0, true // down
			case "127.0.0.1:2":
				return 99, true // out of range: the start
			}
			return 0, false
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if up := c.Up(); !slices.Equal(up, []string{"127.0.0.1:2", "127.0.0.1:3"}) || c.Usable() != 2 {
		t.Fatalf("up %v, usable %d, want the two started at rise", up, c.Usable())
	}
	if h, _ := c.Health("127.0.0.1:3"); h != DefaultCheckRise {
		t.Fatalf("health %d, want rise", h)
	}
}

func TestServerCheckerCloseStopsEveryLoop(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var accepted atomic.Int32
	go func() {
		var held []net.Conn // never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			accepted.Add(1)
		}
	}()
	before := runtime.NumGoroutine()
	c, err := NewServerChecker([]string{silent.Addr().String(), silent.Addr().String()},
		ServerCheck{HTTP: &HTTPCheck{}, Interval: time.Millisecond, Timeout: time.Hour}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	poll.Until(t, 5*time.Second, "both checks waiting for their answers", func() bool { return accepted.Load() == 2 })
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v with checks waiting an hour for an answer", took)
	}
	poll.Until(t, 5*time.Second, "the goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
}

func TestServerCheckPanicIsReportedAndCheckingGoesOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var once sync.Once
	events := &checkEvents{}
	events.checked = func(string) { once.Do(func() { panic("observer broke") }) }
	startChecker(t, []string{ln.Addr().String()}, ServerCheck{Interval: 5 * time.Millisecond}, events)
	poll.Until(t, 5*time.Second, "checks after the panic", func() bool { return len(events.all()) >= 2 })
	events.mu.Lock()
	defer events.mu.Unlock()
	if len(events.panics) != 1 || !strings.Contains(events.panics[0], "observer broke") {
		t.Fatalf("panics reported: %q", events.panics)
	}
}

// fullListener returns the address of a socket whose accept queue is full
// (listen backlog 0, never accepted), where a new connection hangs: the
// kernel drops its SYNs.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // this one hung: the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel kept accepting connections into a backlog of 0")
	return ""
}

func TestConnectCheckTimesOut(t *testing.T) {
	addr := fullListener(t)
	for _, tc := range []struct {
		name  string
		check ServerCheck
		bound time.Duration
	}{
		{"timeout bounds the connection", ServerCheck{Timeout: 150 * time.Millisecond}, 150 * time.Millisecond},
		{"connect_timeout bounds it alone", ServerCheck{ConnectTimeout: 100 * time.Millisecond, Timeout: time.Minute}, 100 * time.Millisecond},
	} {
		r := checkOnce(t, addr, tc.check)
		if r.Err == nil || r.Duration < tc.bound || r.Duration > tc.bound+2*time.Second {
			t.Errorf("%s: err %v after %v, want a timeout after %v", tc.name, r.Err, r.Duration, tc.bound)
		}
	}
}
