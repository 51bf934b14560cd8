package caddymodule

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/ntlmclient"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/tools"
	"github.com/caddy-ha/caddy-ha/status"
)

// The attacks of issue 19.1 on transport pinned: anonymous clients must
// not exhaust the pins Windows SSO needs.

// dialFrom dials from a loopback address of its own, as a client on another
// machine would (every 127.0.0.0/8 address is loopback).
func dialFrom(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// attack is many clients of one address at once until stopped.
type attack struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	answers  int
	problems []string
	held     map[net.Conn]bool // stalled handshakes' connections, closed by end
}

func newAttack(t *testing.T) *attack {
	a := &attack{stop: make(chan struct{}), held: map[net.Conn]bool{}}
	t.Cleanup(a.end)
	return a
}

func (a *attack) report(format string, args ...any) {
	a.mu.Lock()
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
	a.mu.Unlock()
}

// end stops every client and waits for them (once).
func (a *attack) end() {
	a.mu.Lock()
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	for c := range a.held {
		c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// hold keeps c until the proxy closes it, or the attack ends.
func (a *attack) hold(c net.Conn) {
	a.mu.Lock()
	select {
	case <-a.stop:
		c.Close()
	default:
		a.held[c] = true
	}
	a.mu.Unlock()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Read(make([]byte, 1))
	a.mu.Lock()
	delete(a.held, c)
	select {
	case <-a.stop:
	default:
		if !errors.Is(err, io.EOF) {
			a.problems = append(a.problems, fmt.Sprintf("a stalled handshake's connection: %v, want it closed", err))
		}
	}
	a.mu.Unlock()
}

// idle keeps n kept-alive anonymous connections from ip, each sending a
// request every interval, as the attack of the issue did (4096 of them,
// one request each 50 s); it returns once each had its first answer.
// Every answer must be the upstream's, anonymous.
func (a *attack) idle(tc *testCaddy, ip string, n int, interval time.Duration) {
	var first sync.WaitGroup
	for i := range n {
		first.Add(1)
		a.wg.Go(func() {
			b := &ntlmclient.Browser{Name: fmt.Sprintf("idle-%d", i), Addr: tc.addr, Dialer: dialFrom(ip)}
			defer b.Close()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for sent := 0; ; sent++ {
				resp, err := b.Do(http.MethodGet, "/api/whoami", nil)
				switch {
				case err != nil:
					a.report("%s: %v", b.Name, err)
				case resp.Status != http.StatusOK || resp.User() != "":
					a.report("%s: answered %d as %q: %s", b.Name, resp.Status, resp.User(), resp.Body)
				default:
					a.mu.Lock()
					a.answers++
					a.mu.Unlock()
				}
				if sent == 0 {
					first.Done()
				}
				select {
				case <-a.stop:
					if b.Dials != 1 {
						a.report("%s: used %d connections", b.Name, b.Dials)
					}
					return
				case <-tick.C:
				}
			}
		})
	}
	first.Wait()
}

// stalled keeps n clients from ip beginning a handshake (a NEGOTIATE, which
// needs no credentials) and never finishing it: each waits until its
// connection is closed, then begins again.
func (a *attack) stalled(tc *testCaddy, ip string, n int) {
	for i := range n {
		a.wg.Go(func() {
			b := &ntlmclient.Browser{Addr: tc.addr, Dialer: dialFrom(ip)}
			defer b.Close()
			for try := 0; ; try++ {
				b.Name = fmt.Sprintf("stalled-%d-%d", i, try) // a client per connection
				if resp, err := b.Negotiate("/sso/me"); err == nil && resp.Status == http.StatusUnauthorized {
					a.hold(b.Conn())
				}
				b.Close()
				select {
				case <-a.stop:
					return
				case <-time.After(20 * time.Millisecond): // a new try, not a wait for a condition
				}
			}
		})
	}
}

// curlSignIns has n curl --ntlm clients (each from an address of its own
// if ip is not nil) sign in and then ask anonymously on the same kept-alive
// connection: each must be answered as its own user both times.
func curlSignIns(t *testing.T, tc *testCaddy, n int, ip func(i int) string) []error {
	curl := tools.Must(t, "curl")
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			user := fmt.Sprintf("curl%02d", i)
			args := []string{"--max-time", "20", "-H", "X-Client: " + user, "-D", "-", "-o", "/dev/null", tc.url("/sso/me"),
				"-D", "-", "-o", "/dev/null", tc.url("/api/whoami")}
			if ip != nil {
				args = append(args, "--interface", ip(i))
			}
			if err := curlSignIn(curl, user, args...); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// curlSignIn runs curl --ntlm as user with args, whose URLs ask, on one
// kept-alive connection, a path that signs in and then one that does not:
// both must be answered as user.
func curlSignIn(curl, user string, args ...string) error {
	out, err := exec.Command(curl, append([]string{"-sS", "--ntlm", "-u", user + ":" + fakecluster.SSOPassword(user)}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", user, err, out)
	}
	var users []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "X-Authenticated-User") {
			users = append(users, strings.TrimSpace(v))
		}
	}
	if !slices.Equal(users, []string{user, user}) {
		return fmt.Errorf("%s was answered as %v:\n%s", user, users, out)
	}
	return nil
}

// The attack of issue 19.1, scaled down: from one address, many more idle
// anonymous connections than there are pins, each sending a request now
// and then, and clients that begin handshakes and never finish them (more
// than the default max_handshakes_per_client). Then 40 browsers (30
// go-ntlmssp, 10 curl --ntlm) sign in at once, each from an address of its
// own: every one succeeds, and no upstream connection that carried
// credentials serves anyone else. Run with the defaults, and with a small
// max_pinned beside a small per-address cap.
func TestPinnedAnonymousAttackLocksNoUserOut(t *testing.T) {
	for _, tt := range []struct {
		name      string
		transport string
		stalled   int
		cap       float64 // the attacker's most pins
	}{
		{"defaults", "transport pinned {\n\t\t\thandshake_timeout 5s\n\t\t}", 80, 64},
		{"small", `transport pinned {
			max_pinned 48
			max_handshakes_per_client 4
			handshake_timeout 5s
			pin_wait 5s
		}`, 12, 4},
	} {
		t.Run(tt.name, func(t *testing.T) { attackLocksNoUserOut(t, tt.transport, tt.stalled, tt.cap) })
	}
}

func attackLocksNoUserOut(t *testing.T, transport string, stalled int, cap float64) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", transport))
	const attacker = "127.0.0.2"
	a := newAttack(t)
	a.idle(tc, attacker, 150, time.Second)
	a.stalled(tc, attacker, stalled)
	pool := poolName(c)
	pinnedNow := func() float64 { return metricValue(tc, `caddy_ha_pinned_connections{pool="`+pool+`"}`) }
	poll.Until(t, 10*time.Second, "the stalled handshakes to fill the address's handshake cap", func() bool { return pinnedNow() >= cap })
	if got := pinnedNow(); got > cap {
		t.Errorf("the attacker holds %v pins, more than its %v", got, cap)
	}

	var curlErrs []error
	var wg sync.WaitGroup
	wg.Go(func() {
		curlErrs = curlSignIns(t, tc, 10, func(i int) string { return fmt.Sprintf("127.0.1.%d", 10+i) })
	})
	rep := runBrowsersFrom(t, tc, c, 30, func(i int) *net.Dialer { return dialFrom(fmt.Sprintf("127.0.2.%d", 10+i)) })
	wg.Wait()
	for _, p := range rep.problems {
		t.Error(p)
	}
	for _, err := range curlErrs {
		t.Error(err)
	}
	poll.Until(t, 10*time.Second, "a stalled handshake to be cut", func() bool {
		return counterValue(tc, `caddy_ha_pinned_pins_ended_total{pool="`+pool+`",reason="handshake_timeout"}`) > 0
	})
	a.end()
	for _, p := range a.problems {
		t.Error("attacker: " + p)
	}
	if a.answers < 150 {
		t.Errorf("the idle connections got %d answers, want at least one each", a.answers)
	}
	// The whole record, the attacker's included: anonymous requests never
	// went on a connection that carried credentials.
	rep = &ssoReport{}
	checkOneToOne(rep, c, 1)
	for _, p := range rep.problems {
		t.Error(p)
	}
}

// A handshake begun and never completed holds its pin for
// handshake_timeout only: then the client connection is closed and its
// upstream connection too. A completed handshake keeps its connection.
func TestPinnedHandshakeTimeout(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	// Long enough for alice's two legs on a loaded machine.
	const timeout = time.Second
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", "transport pinned {\n\t\t\thandshake_timeout 1s\n\t\t}"))
	alice := newBrowser(tc, 1)
	if resp, err := alice.SignIn("/sso/me"); err != nil || resp.User() != alice.User {
		t.Fatalf("sign-in: %v %+v", err, resp)
	}
	mallory := &ntlmclient.Browser{Name: "mallory", Addr: tc.addr}
	start := time.Now()
	ch, err := mallory.Negotiate("/sso/me")
	if err != nil || ch.Status != http.StatusUnauthorized {
		t.Fatalf("negotiate: %v %+v", err, ch)
	}
	up := upstreamConnOf(t, ch)
	_ = mallory.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := mallory.Conn().Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a stalled handshake's connection: read %d, %v; want EOF", n, err)
	}
	if cut := time.Since(start); cut < timeout {
		t.Fatalf("the stalled handshake was cut after %s, before its %s", cut, timeout)
	}
	poll.Until(t, 2*time.Second, "its upstream connection to close", func() bool { return !isOpen(c, up) })
	pool := poolName(c)
	poll.Until(t, 2*time.Second, "the pin to end", func() bool {
		return counterValue(tc, `caddy_ha_pinned_pins_ended_total{pool="`+pool+`",reason="handshake_timeout"}`) == 1 &&
			metricValue(tc, `caddy_ha_pinned_connections{pool="`+pool+`"}`) == 1
	})
	if resp, err := alice.Do(http.MethodGet, "/api/whoami", nil); err != nil || resp.User() != alice.User || alice.Dials != 1 {
		t.Fatalf("alice after the timeout: %v %+v, %d connections", err, resp, alice.Dials)
	}
}

// Issue 26.1: a flood of handshakes begun and never finished from one
// address, with the defaults (but a short handshake_timeout and pin_wait),
// fills its max_handshakes_per_client; a real user of that same address (a
// terminal server's) waits pin_wait, is answered 503 with Retry-After: 1,
// and is signed in once the flood's handshakes time out: its request
// waiting then gets a freed place. The refusal is logged once, naming the
// address and the cap, counted, and shown on the status page.
func TestPinnedUserBehindAHandshakeFloodSignsInAfterItsTimeout(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	const timeout = 3 * time.Second
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", "transport pinned {\n\t\t\thandshake_timeout 3s\n\t\t\tpin_wait 1s\n\t\t}"))
	const shared = "127.0.0.5"
	a := newAttack(t)
	start := time.Now()
	for i := range defaultMaxHandshakesPerClient {
		b := &ntlmclient.Browser{Name: fmt.Sprint("flood-", i), Addr: tc.addr, Dialer: dialFrom(shared)}
		if resp, err := b.Negotiate("/sso/me"); err != nil || resp.Status != http.StatusUnauthorized {
			t.Fatalf("flood handshake %d: %v %+v", i, err, resp)
		}
		a.wg.Go(func() { a.hold(b.Conn()) })
	}
	user := newBrowser(tc, 1)
	user.Dialer = dialFrom(shared)
	defer user.Close()
	refusals := 0
	var signedIn time.Duration
	for deadline := time.Now().Add(4 * timeout); ; {
		resp, err := user.Negotiate("/sso/me")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status == http.StatusUnauthorized {
			if resp, err := user.Authenticate(resp, "/sso/me"); err != nil || resp.User() != user.User {
				t.Fatalf("the user's sign-in after the flood: %v %+v", err, resp)
			}
			signedIn = time.Since(start)
			break
		}
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("the user during the flood: %d %q, want 503 with Retry-After: 1", resp.Status, resp.Body)
		}
		refusals++
		if time.Now().After(deadline) {
			t.Fatalf("the user was still refused %s after the flood began", time.Since(start))
		}
		user.Close()
		time.Sleep(time.Second) // the Retry-After a browser honours
	}
	t.Logf("a user behind a flood of %d handshakes from its own address signed in %s after the flood began (handshake_timeout %s, pin_wait 1s), refused %d times before",
		defaultMaxHandshakesPerClient, signedIn.Round(time.Millisecond), timeout, refusals)
	if refusals == 0 {
		t.Fatal("the user was never refused: the flood did not fill the address's handshakes")
	}
	if signedIn < timeout {
		t.Fatalf("signed in %s after the flood began, before its handshakes' %s", signedIn, timeout)
	}
	pool := poolName(c)
	if got := counterValue(tc, `caddy_ha_pinned_refusals_total{pool="`+pool+`",reason="handshake_cap"}`); got != float64(refusals) {
		t.Errorf("handshake_cap refusals: %v, want %d", got, refusals)
	}
	logged := 0
	for _, l := range tc.logLines(`"reason":"handshake_cap"`) {
		logged++
		if !strings.Contains(l, `"client":"`+shared+`"`) || !strings.Contains(l, `"cap":"max_handshakes_per_client"`) ||
			!strings.Contains(l, fmt.Sprintf(`"limit":%d`, defaultMaxHandshakesPerClient)) {
			t.Errorf("the refusal's log line names no address or cap: %s", l)
		}
	}
	if logged != 1 {
		t.Errorf("%d log lines of the refusals, want one (they came within %s)", logged, refusalLogInterval)
	}
	var hit *status.CapRefusal
	for _, p := range viewOf(t, tc.adminGet("/ha/status")).PinnedPools {
		for _, c := range p.AtCap {
			if c.Cap == "max_handshakes_per_client" {
				hit = &c
			}
		}
	}
	if hit == nil || hit.Client != shared || hit.Limit != defaultMaxHandshakesPerClient || hit.Refusals != float64(refusals) {
		t.Errorf("the status view's refusal at the cap: %+v, want %s at %d, %d refusals", hit, shared, defaultMaxHandshakesPerClient, refusals)
	}
	a.end()
}

// One address holds at most max_pinned_per_client pins, signed in or not;
// beyond them its handshake is answered 503 at once, and other addresses
// sign in.
func TestPinnedPerClientCap(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", "transport pinned {\n\t\t\tmax_pinned_per_client 2\n\t\t}"))
	for i := range 2 {
		b := newBrowser(tc, i)
		b.Dialer = dialFrom("127.0.0.3")
		if resp, err := b.Fetch(http.MethodGet, "/sso/me"); err != nil || resp.User() != b.User {
			t.Fatalf("sign-in: %v %+v", err, resp)
		}
		defer b.Close()
	}
	third := newBrowser(tc, 3)
	third.Dialer = dialFrom("127.0.0.3")
	resp, err := third.Negotiate("/sso/me")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-Upstream-Conn") != "" {
		t.Fatalf("a third pin of one address: %d, Retry-After %q, upstream %q", resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("X-Upstream-Conn"))
	}
	if got := counterValue(tc, `caddy_ha_pinned_refusals_total{pool="`+poolName(c)+`",reason="client_cap"}`); got != 1 {
		t.Errorf("refusals at the per-client cap: %v, want 1", got)
	}
	other := newBrowser(tc, 4)
	other.Dialer = dialFrom("127.0.0.4")
	if resp, err := other.Fetch(http.MethodGet, "/sso/me"); err != nil || resp.User() != other.User {
		t.Fatalf("another address: %v %+v", err, resp)
	}
}

// Idle anonymous client connections hold no pin: their cost is the HTTP
// server's, not a pin's. docs/pinned.md quotes the figures this logs.
func TestPinnedIdleAnonymousConnectionsCost(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	const n = 400
	get := []byte("GET /api/whoami HTTP/1.1\r\nHost: " + tc.addr + "\r\n\r\n")
	request := func(conn net.Conn) {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(get); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Upstream-Conn") == "" {
			t.Fatalf("anonymous request: %d, upstream %q", resp.StatusCode, resp.Header.Get("X-Upstream-Conn"))
		}
	}
	// One connection first, so that the shared upstream connections and
	// the server's pools exist before the baseline.
	warm, err := net.Dial("tcp", tc.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	request(warm)
	measure := func() (bytes uint64, goroutines int) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse, runtime.NumGoroutine()
	}
	bytesBefore, goroutinesBefore := measure()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		conn, err := net.Dial("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		request(conn)
	}
	bytesAfter, goroutinesAfter := measure()
	perConn := float64(int64(bytesAfter)-int64(bytesBefore)) / n
	goroutinesPerConn := float64(goroutinesAfter-goroutinesBefore) / n
	t.Logf("%d idle anonymous client connections: %.1f KB and %.2f goroutines each (live heap and stacks after GC, the client's side included)",
		n, perConn/1024, goroutinesPerConn)
	if got := metricValue(tc, `caddy_ha_pinned_connections{pool="`+poolName(c)+`"}`); got > 0 {
		t.Errorf("%v idle anonymous connections are pinned", got)
	}
	// A pin would add its transport's read and write loops and the
	// upstream's goroutine and buffers for its connection (67 KB and 4
	// goroutines each, measured before pins went only to credentials).
	if goroutinesPerConn > 1.5 || perConn > 48<<10 {
		t.Errorf("an idle anonymous client connection costs %.1f KB and %.2f goroutines, want at most 48 KB and 1.5", perConn/1024, goroutinesPerConn)
	}
}
