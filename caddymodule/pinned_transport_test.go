package caddymodule

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/quic-go/quic-go/http3"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/ntlmclient"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// The server options of a site that does Windows SSO: HTTP/1.1 only, as the
// cluster's alpn http/1.1.
const ssoGlobal = `servers {
		protocols h1
	}`

// ssoSite proxies to the cluster's leader with the given transport lines.
func ssoSite(interval, transport string) string {
	return fmt.Sprintf(`reverse_proxy {upstreams} {
		lb_policy leader {
			interval %s
		}
		%s
	}`, interval, transport)
}

const pinned = "transport pinned"

func newBrowser(tc *testCaddy, i int) *ntlmclient.Browser {
	user := fmt.Sprintf("user%02d", i)
	return &ntlmclient.Browser{Name: "browser-" + user, User: user, Password: fakecluster.SSOPassword(user), Addr: tc.addr}
}

// ssoReport is what many browsers saw, and what the cluster recorded.
type ssoReport struct {
	problems []string
}

func (r *ssoReport) addf(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// runBrowsers has n browsers sign in at once, in lock step (every NEGOTIATE,
// then every AUTHENTICATE, so that a shared pool mixes them up), then each
// sends anonymous requests on its kept-alive connection. It reports every
// handshake that failed, every answer given as another user, and every
// client or upstream connection that served more than one of the other.
func runBrowsers(t *testing.T, tc *testCaddy, c *fakecluster.Cluster, n int) *ssoReport {
	t.Helper()
	return runBrowsersFrom(t, tc, c, n, nil)
}

// runBrowsersFrom is runBrowsers with browser i dialling with dialer(i)
// (all from one address if dialer is nil).
func runBrowsersFrom(t *testing.T, tc *testCaddy, c *fakecluster.Cluster, n int, dialer func(i int) *net.Dialer) *ssoReport {
	t.Helper()
	rep := &ssoReport{}
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		rep.addf(format, args...)
		mu.Unlock()
	}
	browsers := make([]*ntlmclient.Browser, n)
	challenges := make([]*ntlmclient.Response, n)
	step := func(f func(i int, b *ntlmclient.Browser)) {
		var wg sync.WaitGroup
		for i, b := range browsers {
			wg.Go(func() { f(i, b) })
		}
		wg.Wait()
	}
	for i := range browsers {
		browsers[i] = newBrowser(tc, i)
		if dialer != nil {
			browsers[i].Dialer = dialer(i)
		}
	}
	step(func(i int, b *ntlmclient.Browser) {
		ch, err := b.Negotiate("/sso/me")
		if err != nil {
			report("%s: negotiate: %v", b.Name, err)
			return
		}
		challenges[i] = ch
	})
	step(func(i int, b *ntlmclient.Browser) {
		if challenges[i] == nil {
			return
		}
		resp, err := b.Authenticate(challenges[i], "/sso/me")
		switch {
		case err != nil:
			report("%s: authenticate: %v", b.Name, err)
		case resp.Status != http.StatusOK:
			report("%s: authenticate answered %d", b.Name, resp.Status)
		case resp.User() != b.User:
			report("%s: signed in as %q", b.Name, resp.User())
		}
	})
	step(func(i int, b *ntlmclient.Browser) {
		for range 3 {
			resp, err := b.Do(http.MethodGet, "/api/whoami", nil)
			switch {
			case err != nil:
				report("%s: request: %v", b.Name, err)
				return
			case resp.User() != b.User:
				report("%s: answered as %q", b.Name, resp.User())
			}
		}
		if b.Dials != 1 {
			report("%s: used %d client connections", b.Name, b.Dials)
		}
	})
	for _, b := range browsers {
		b.Close()
	}
	checkOneToOne(rep, c, 1)
	return rep
}

// checkOneToOne reports every upstream connection that carried
// credentials or answered as a user and served more than one browser in
// its life, every browser served on more than perBrowser such connections
// (one per node it signed in on, after failovers), and every handshake the
// cluster refused. Connections that never carried credentials may serve
// many browsers' anonymous requests, as the stock transport shares them.
func checkOneToOne(rep *ssoReport, c *fakecluster.Cluster, perBrowser int) {
	clientsOf, secret := map[string][]string{}, map[string]bool{}
	for _, n := range c.Nodes() {
		for _, s := range n.Served() {
			if s.Client != "" && !slices.Contains(clientsOf[s.Conn], s.Client) {
				clientsOf[s.Conn] = append(clientsOf[s.Conn], s.Client)
			}
			secret[s.Conn] = secret[s.Conn] || s.Credentials || s.User != ""
		}
		for _, f := range n.SSOFaults() {
			rep.addf("%s refused an AUTHENTICATE of %s on %s: %s", n.ID(), f.Client, f.Conn, f.Reason)
		}
	}
	connsOf := map[string][]string{}
	for conn, clients := range clientsOf {
		if !secret[conn] {
			continue
		}
		if len(clients) != 1 {
			rep.addf("upstream connection %s, which carried credentials, served %d browsers", conn, len(clients))
		}
		for _, client := range clients {
			connsOf[client] = append(connsOf[client], conn)
		}
	}
	for client, conns := range connsOf {
		if len(conns) > perBrowser {
			rep.addf("%s was served on %d upstream connections that carried credentials", client, len(conns))
		}
	}
}

// Many browsers at once, each on its own kept-alive connection: every
// handshake completes, every later request keeps its identity, and client
// and upstream connections map one to one.
func TestPinnedManyBrowsers(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	rep := runBrowsers(t, tc, c, 40)
	for _, p := range rep.problems {
		t.Error(p)
	}
	poll.Until(t, 2*time.Second, "every pin to end with its browser", func() bool {
		return metricValue(tc, `caddy_ha_pinned_connections{pool="`+poolName(c)+`"}`) == 0
	})
}

// The same browsers through Caddy's stock transport are mixed up: this is
// the bug the pinned transport fixes, and it shows runBrowsers catches it.
func TestStockTransportMixesUpBrowsers(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", ""))
	rep := runBrowsers(t, tc, c, 40)
	if len(rep.problems) == 0 {
		t.Fatal("the stock transport served 40 browsers with no handshake split and no identity mixed up")
	}
	t.Logf("stock transport: %d problems, e.g. %s", len(rep.problems), rep.problems[0])
}

func poolName(c *fakecluster.Cluster) string {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr())
	}
	return strings.Join(addrs, ",")
}

// reuseAddr lets a dialer bind a local port that a connection just used.
func reuseAddr(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	return errors.Join(err, serr)
}

// A fresh anonymous client after a signed-in one gets 401, even from the
// same client port: the pin belongs to the connection, not its address.
func TestPinnedFreshClientOnOldPortIsAnonymous(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	// Alice's port is bound, not picked by connect, which may share an
	// ephemeral port among connections to other places.
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	alice := newBrowser(tc, 1)
	poll.Until(t, 2*time.Second, "a local port for alice", func() bool {
		local.Port = loopback.FreePort()
		alice.Dialer = &net.Dialer{LocalAddr: local, Control: reuseAddr, Timeout: 5 * time.Second}
		_, err := alice.Do(http.MethodGet, "/api/whoami", nil)
		return err == nil
	})
	if resp, err := alice.SignIn("/sso/me"); err != nil || resp.User() != alice.User {
		t.Fatalf("sign-in: %v %+v", err, resp)
	}
	// Reset, not FIN: the port is free at once, for the next client.
	_ = alice.Conn().(*net.TCPConn).SetLinger(0)
	alice.Close()

	anon := &ntlmclient.Browser{Name: "anonymous", Addr: tc.addr,
		Dialer: &net.Dialer{LocalAddr: local, Control: reuseAddr, Timeout: 5 * time.Second}}
	resp, err := anon.Do(http.MethodGet, "/sso/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Local != local.String() {
		t.Fatalf("the anonymous client got port %s, want alice's %s", resp.Local, local)
	}
	if resp.Status != http.StatusUnauthorized || resp.User() != "" || len(resp.Header.Values("WWW-Authenticate")) == 0 {
		t.Fatalf("anonymous client on alice's old port: %d as %q, challenges %v", resp.Status, resp.User(), resp.Header.Values("WWW-Authenticate"))
	}
	if resp, err := anon.Do(http.MethodGet, "/api/whoami", nil); err != nil || resp.User() != "" {
		t.Fatalf("anonymous request answered as %q (%v)", resp.User(), err)
	}
}

// upstreamConnOf returns the upstream connection that served an answer.
func upstreamConnOf(t *testing.T, resp *ntlmclient.Response) string {
	t.Helper()
	id := resp.Header.Get("X-Upstream-Conn")
	if id == "" {
		t.Fatalf("an answer without X-Upstream-Conn: %+v", resp)
	}
	return id
}

func isOpen(c *fakecluster.Cluster, id string) bool {
	for _, n := range c.Nodes() {
		if slices.Contains(n.OpenConns(), id) {
			return true
		}
	}
	return false
}

// A client that leaves: its upstream connection closes within a second.
// An upstream that closes a signed-in connection: the client connection
// closes too, and is never served on another upstream connection.
func TestPinnedLifetimeFollowsBothEnds(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))

	alice := newBrowser(tc, 1)
	resp, err := alice.SignIn("/sso/me")
	if err != nil || resp.User() != alice.User {
		t.Fatalf("sign-in: %v %+v", err, resp)
	}
	up := upstreamConnOf(t, resp)
	alice.Close()
	poll.Until(t, time.Second, "alice's upstream connection to close", func() bool { return !isOpen(c, up) })

	bob := newBrowser(tc, 2)
	resp, err = bob.SignIn("/sso/me")
	if err != nil || resp.User() != bob.User {
		t.Fatalf("sign-in: %v %+v", err, resp)
	}
	up = upstreamConnOf(t, resp)
	if !c.Node("node-a").CloseConn(up) {
		t.Fatalf("upstream connection %s was not open", up)
	}
	_ = bob.Conn().SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := bob.Conn().Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("bob's connection after the upstream closed his: read %d, %v; want EOF", n, err)
	}
	for _, s := range c.Node("node-a").Served() {
		if s.Client == bob.Name && s.Conn != up {
			t.Fatalf("bob was served on %s as well as %s", s.Conn, up)
		}
	}
	// The server ends the pin just after the client saw its connection close.
	poll.Until(t, time.Second, "the pin ended by the upstream to be counted", func() bool {
		return counterValue(tc, `caddy_ha_pinned_pins_ended_total{pool="`+poolName(c)+`",reason="upstream_closed"}`) == 1
	})
	// The status view counts it too.
	if p := viewOf(t, tc.adminGet("/ha/status")).PinnedPools; len(p) != 1 || p[0].Pool != poolName(c) || p[0].Ended["upstream_closed"] != 1 || p[0].Pins < 1 {
		t.Errorf("pinned pools in the status view: %+v", p)
	}
}

// leaderSeen waits until lb_policy leader routes to node.
func leaderSeen(t *testing.T, tc *testCaddy, node *fakecluster.Node) time.Time {
	t.Helper()
	poll.Until(t, 10*time.Second, "the policy to see "+node.ID()+" lead", func() bool {
		var v []healthcheck.PoolView
		_ = json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &v)
		return len(v) == 1 && v[0].Leader == node.Addr()
	})
	return time.Now()
}

// servedAfter returns the requests of the given browsers a node answered
// after t.
func servedAfter(n *fakecluster.Node, at time.Time, names map[string]bool) []fakecluster.Served {
	var out []fakecluster.Served
	for _, s := range n.Served() {
		if names[s.Client] && s.At.After(at) {
			out = append(out, s)
		}
	}
	return out
}

// After a failover, each signed-in browser's next request reaches the new
// leader on an upstream connection of its own; the browser signs in once
// more there by itself, and nothing reaches the old leader. With a drain,
// the old leader is still up and the pins leave it; without one, it
// closes their connections and the browsers reconnect.
func TestPinnedFailoverWhenIdle(t *testing.T) {
	for _, tt := range []struct {
		name   string
		drain  time.Duration
		reason string
	}{
		{"old leader draining", 3 * time.Second, "failover"},
		{"old leader gone", 0, "upstream_closed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClusterWith(t, fakecluster.Config{LeaseTTL: 2 * time.Second, RenewInterval: 100 * time.Millisecond, StopDrain: tt.drain}, 2)
			tc := startCaddy(t, c, ssoGlobal, ssoSite("200ms", pinned))
			leaderSeen(t, tc, c.Node("node-a"))
			browsers := make([]*ntlmclient.Browser, 10)
			names := map[string]bool{}
			var oldConns []string
			for i := range browsers {
				b := newBrowser(tc, i)
				browsers[i], names[b.Name] = b, true
				resp, err := b.Fetch(http.MethodGet, "/sso/me")
				if err != nil || resp.User() != b.User {
					t.Fatalf("%s: sign-in: %v %+v", b.Name, err, resp)
				}
				oldConns = append(oldConns, upstreamConnOf(t, resp))
			}
			go c.Node("node-a").Stop()
			seen := leaderSeen(t, tc, c.Node("node-b"))
			for _, b := range browsers {
				signIns := b.SignIns
				resp, err := b.Fetch(http.MethodPost, "/sso/orders")
				switch {
				case err != nil:
					t.Fatalf("%s after the failover: %v", b.Name, err)
				case resp.Status != http.StatusOK || resp.User() != b.User || resp.Header.Get("X-Node-Id") != "node-b":
					t.Fatalf("%s after the failover: %d as %q from %s", b.Name, resp.Status, resp.User(), resp.Header.Get("X-Node-Id"))
				case b.SignIns != signIns+1:
					t.Errorf("%s signed in %d more times, want 1", b.Name, b.SignIns-signIns)
				}
				b.Close()
			}
			if late := servedAfter(c.Node("node-a"), seen, names); len(late) > 0 {
				t.Errorf("the old leader served %d requests after the policy saw the new one: %+v", len(late), late[0])
			}
			checkServedOnOwnConns(t, c, 2)
			for _, id := range oldConns {
				if isOpen(c, id) {
					t.Errorf("upstream connection %s to the old leader is still open", id)
				}
			}
			if got := counterValue(tc, `caddy_ha_pinned_pins_ended_total{pool="`+poolName(c)+`",reason="`+tt.reason+`"}`); got != 10 {
				t.Errorf("pins ended (%s): %v, want 10", tt.reason, got)
			}
		})
	}
}

// A failover between a handshake's legs: the handshake is never split. The
// browser is told to start over (401 with a fresh challenge, or its
// connection closed when the old leader closed its own) and signs in on
// the new leader.
func TestPinnedFailoverMidHandshake(t *testing.T) {
	for _, drain := range []time.Duration{3 * time.Second, 0} {
		t.Run(fmt.Sprint("drain ", drain), func(t *testing.T) {
			c := newClusterWith(t, fakecluster.Config{LeaseTTL: 2 * time.Second, RenewInterval: 100 * time.Millisecond, StopDrain: drain}, 2)
			tc := startCaddy(t, c, ssoGlobal, ssoSite("200ms", pinned))
			leaderSeen(t, tc, c.Node("node-a"))
			b := newBrowser(tc, 1)
			ch, err := b.Negotiate("/sso/me")
			if err != nil || ch.Header.Get("X-Node-Id") != "node-a" {
				t.Fatalf("negotiate: %v %+v", err, ch)
			}
			go c.Node("node-a").Stop()
			seen := leaderSeen(t, tc, c.Node("node-b"))
			if drain == 0 {
				// The old leader closed its connections as it stopped.
				poll.Until(t, 2*time.Second, "the browser's connection to close", func() bool {
					return metricValue(tc, `caddy_ha_pinned_connections{pool="`+poolName(c)+`"}`) == 0
				})
			}
			resp, err := b.Authenticate(ch, "/sso/me")
			switch {
			case drain == 0 && err == nil:
				t.Fatalf("the second leg on a connection whose pin was lost: %d, want it closed", resp.Status)
			case drain > 0 && err != nil:
				t.Fatal(err)
			case drain > 0 && (resp.Status != http.StatusUnauthorized || len(resp.Header.Values("WWW-Authenticate")) == 0):
				t.Fatalf("the cut handshake's second leg: %d %v, want 401 with a fresh challenge", resp.Status, resp.Header)
			}
			resp, err = b.Fetch(http.MethodGet, "/sso/me")
			if err != nil || resp.User() != b.User || resp.Header.Get("X-Node-Id") != "node-b" {
				t.Fatalf("starting over: %v %+v", err, resp)
			}
			if b.Dials != 2 {
				t.Errorf("the browser used %d connections, want 2 (the cut one closed)", b.Dials)
			}
			if late := servedAfter(c.Node("node-a"), seen, map[string]bool{b.Name: true}); len(late) > 0 {
				t.Errorf("the old leader served %+v after the policy saw the new one", late[0])
			}
			checkServedOnOwnConns(t, c, 2) // also: no AUTHENTICATE refused anywhere
		})
	}
}

// A write refused by a node that just became a follower is replayed on the
// browser's own new upstream connection to the new leader; a request that
// arrives while no node leads waits, and its first dial to the dead node
// binds to the next.
func TestPinnedReplayAndHold(t *testing.T) {
	t.Run("replay", func(t *testing.T) {
		// Probes a minute apart, and a lease that lasts as long: Caddy
		// cannot have seen node-a's release (a probe in between, on a
		// loaded machine, sent the write to node-b at once, with nothing
		// to replay) before the write it refuses.
		c := newClusterWith(t, fakecluster.Config{LeaseTTL: time.Minute, RenewInterval: 100 * time.Millisecond, StopDrain: 3 * time.Second}, 2)
		tc := startCaddy(t, c, ssoGlobal, ssoSite("1m", pinned))
		leaderSeen(t, tc, c.Node("node-a"))
		b := newBrowser(tc, 1)
		if resp, err := b.Fetch(http.MethodGet, "/sso/me"); err != nil || resp.User() != b.User {
			t.Fatalf("sign-in: %v %+v", err, resp)
		}
		replayedMetric := `caddy_ha_leader_replayed_requests_total{pool="` + poolName(c) + `",reason="follower_refusal"}`
		replayed := counterValue(tc, replayedMetric)
		go c.Node("node-a").Stop() // a follower for 3s: it refuses writes
		poll.Until(t, 2*time.Second, "node-a to release its lease", func() bool { return c.State().Leader != "node-a" })
		resp, err := b.Fetch(http.MethodPost, "/sso/orders")
		if err != nil || resp.Status != http.StatusOK || resp.User() != b.User || resp.Header.Get("X-Node-Id") != "node-b" {
			t.Fatalf("the write: %v %+v", err, resp)
		}
		if got := counterValue(tc, replayedMetric); got != replayed+1 {
			t.Errorf("replayed requests: %v, want %v", got, replayed+1)
		}
		if ex := c.Node("node-a").Executed(); len(ex) != 0 {
			t.Errorf("the old leader executed %+v", ex)
		}
		checkServedOnOwnConns(t, c, 2)
	})
	t.Run("hold", func(t *testing.T) {
		c := newClusterWith(t, fakecluster.Config{LeaseTTL: time.Second, RenewInterval: 100 * time.Millisecond}, 2)
		tc := startCaddy(t, c, ssoGlobal, ssoSite("10s", pinned))
		leaderSeen(t, tc, c.Node("node-a"))
		c.Node("node-a").Kill(fakecluster.KillRefuse)
		b := newBrowser(tc, 1)
		resp, err := b.Fetch(http.MethodPost, "/sso/orders")
		if err != nil || resp.Status != http.StatusOK || resp.User() != b.User || resp.Header.Get("X-Node-Id") != "node-b" {
			t.Fatalf("the held write: %v %+v", err, resp)
		}
		if b.Dials != 1 {
			t.Errorf("the browser used %d connections, want 1", b.Dials)
		}
		checkServedOnOwnConns(t, c, 1)
	})
}

func checkServedOnOwnConns(t *testing.T, c *fakecluster.Cluster, perBrowser int) {
	t.Helper()
	rep := &ssoReport{}
	checkOneToOne(rep, c, perBrowser)
	for _, p := range rep.problems {
		t.Error(p)
	}
}

// At the cap a new handshake waits up to pin_wait: a pin that ends within
// it makes room; after it, the handshake is answered 503 with Retry-After
// and never sent on a shared connection.
func TestPinnedCap(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	// Long enough for a pin to end on a loaded machine while one waits.
	const wait = 4 * time.Second
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", "transport pinned {\n\t\t\tmax_pinned 2\n\t\t\tpin_wait 4s\n\t\t}"))
	var held []*ntlmclient.Browser
	for i := range 2 {
		b := newBrowser(tc, i)
		if resp, err := b.Fetch(http.MethodGet, "/sso/me"); err != nil || resp.User() != b.User {
			t.Fatalf("sign-in: %v %+v", err, resp)
		}
		held = append(held, b)
	}
	third := newBrowser(tc, 3)
	start := time.Now()
	resp, err := third.Negotiate("/sso/me")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-Upstream-Conn") != "" {
		t.Fatalf("at the cap: %d, Retry-After %q, upstream %q", resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("X-Upstream-Conn"))
	}
	if waited := time.Since(start); waited < wait {
		t.Fatalf("at the cap: refused after %s, before pin_wait %s", waited, wait)
	}
	if got := counterValue(tc, `caddy_ha_pinned_refusals_total{pool="`+poolName(c)+`",reason="cap"}`); got != 1 {
		t.Errorf("refusals at the cap: %v, want 1", got)
	}
	if len(tc.logLines("pinned transport answered a request itself")) == 0 {
		t.Error("no log line for the cap")
	}
	signedIn := make(chan error, 1)
	go func() {
		resp, err := third.Fetch(http.MethodGet, "/sso/me")
		if err == nil && resp.User() != third.User {
			err = fmt.Errorf("answered %d as %q", resp.Status, resp.User())
		}
		signedIn <- err
	}()
	select {
	case err := <-signedIn:
		t.Fatalf("a handshake at the cap did not wait: %v", err)
	case <-time.After(wait / 8):
	}
	held[0].Close()
	if err := <-signedIn; err != nil {
		t.Fatalf("a handshake waiting at the cap, after a pin ended: %v", err)
	}
}

// HTTP/2 cannot carry connection-based authentication: such credentials
// are answered 505, never sent; anonymous requests are shared, never
// pinned. caddy validate warns of the server's h2c.
func TestPinnedHTTP2(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, "servers {\n\t\tprotocols h1 h2c\n\t}", ssoSite("1s", pinned))
	if len(tc.logLines("the server also speaks h2c")) == 0 {
		t.Error("no warning that the server speaks h2c")
	}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	get := func(auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, tc.url("/sso/me"), nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("X-Client", "h2-client")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over HTTP/%d, want 2", resp.ProtoMajor)
		}
		return resp
	}
	// A NEGOTIATE message, as a browser sends it first.
	if resp := get("NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw=="); resp.StatusCode != http.StatusHTTPVersionNotSupported {
		t.Fatalf("credentials over HTTP/2: %d, want 505", resp.StatusCode)
	}
	for _, n := range c.Nodes() {
		for _, s := range n.Served() {
			if s.Client == "h2-client" {
				t.Fatalf("credentials over HTTP/2 reached %s", s.Conn)
			}
		}
	}
	first, second := get(""), get("")
	if first.StatusCode != http.StatusUnauthorized || second.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous over HTTP/2: %d, %d; want the upstream's 401", first.StatusCode, second.StatusCode)
	}
	if got := counterValue(tc, `caddy_ha_pinned_pins_total{pool="`+poolName(c)+`"}`); got != 0 {
		t.Errorf("anonymous HTTP/2 requests made %v pins, want none", got)
	}
	if got := counterValue(tc, `caddy_ha_pinned_refusals_total{pool="`+poolName(c)+`",reason="http2"}`); got != 1 {
		t.Errorf("refusals of HTTP/2 credentials: %v, want 1", got)
	}
}

// A WebSocket upgrade on a signed-in connection goes on that connection's
// own upstream connection, as the signed-in user; both close with it.
func TestPinnedWebSocket(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	b := newBrowser(tc, 1)
	resp, err := b.Fetch(http.MethodGet, "/sso/me")
	if err != nil || resp.User() != b.User {
		t.Fatalf("sign-in: %v %+v", err, resp)
	}
	up := upstreamConnOf(t, resp)
	resp, stream, err := b.Upgrade("/ws")
	if err != nil || resp.Status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %+v\n%s", err, resp, strings.Join(tc.logLines("error"), "\n"))
	}
	if resp.User() != b.User || upstreamConnOf(t, resp) != up {
		t.Fatalf("upgraded as %q on %s, want %q on %s", resp.User(), upstreamConnOf(t, resp), b.User, up)
	}
	if _, err := stream.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 5)
	if _, err := io.ReadFull(stream, echo); err != nil || string(echo) != "ping\n" {
		t.Fatalf("echo: %q, %v", echo, err)
	}
	poll.Until(t, time.Second, "the upgraded pin to be counted as ended", func() bool {
		return counterValue(tc, `caddy_ha_pinned_pins_ended_total{pool="`+poolName(c)+`",reason="upgraded"}`) == 1
	})
	b.Close()
	poll.Until(t, 2*time.Second, "the upgraded upstream connection to close", func() bool { return !isOpen(c, up) })
}

// A reload: the old config's pins end with their connections, which close
// cleanly once idle; browsers sign in again on the new config. Stopping
// Caddy closes every upstream connection.
func TestPinnedReloadAndStop(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	browsers := make([]*ntlmclient.Browser, 5)
	var ups []string
	for i := range browsers {
		b := newBrowser(tc, i)
		browsers[i] = b
		resp, err := b.Fetch(http.MethodGet, "/sso/me")
		if err != nil || resp.User() != b.User {
			t.Fatalf("sign-in: %v %+v", err, resp)
		}
		ups = append(ups, upstreamConnOf(t, resp))
	}
	tc.load(c, ssoGlobal, ssoSite("1s", "transport pinned {\n\t\t\tmax_pinned 100\n\t\t}"))
	for i, b := range browsers {
		_ = b.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := b.Conn().Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("%s's idle connection across the reload: read %d, %v; want a clean close", b.Name, n, err)
		}
		b.Close()
		poll.Until(t, 2*time.Second, "the old pin's upstream connection to close", func() bool { return !isOpen(c, ups[i]) })
	}
	ups = ups[:0]
	for _, b := range browsers {
		resp, err := b.Fetch(http.MethodGet, "/sso/me")
		if err != nil || resp.User() != b.User {
			t.Fatalf("sign-in after the reload: %v %+v", err, resp)
		}
		ups = append(ups, upstreamConnOf(t, resp))
	}
	checkServedOnOwnConns(t, c, 2)
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Second, "every upstream connection to close with Caddy", func() bool {
		return !slices.ContainsFunc(ups, func(id string) bool { return isOpen(c, id) })
	})
}

// curl --ntlm, 30 at once, each signing in and then asking anonymously on
// the same kept-alive connection: each one is answered as its own user.
func TestPinnedCurlNTLM(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	tc := startCaddy(t, c, ssoGlobal, ssoSite("1s", pinned))
	for _, err := range curlSignIns(t, tc, 30, nil) {
		t.Error(err)
	}
	checkServedOnOwnConns(t, c, 1)
}

// Bad transport pinned settings fail at adapt (with the line) or at load.
func TestPinnedConfigErrors(t *testing.T) {
	for _, tt := range []struct{ block, want string }{
		{"max_pinned 0", "max_pinned must be a whole number of at least 1"},
		{"max_pinned 5\n\t\t\tmax_pinned 6", "duplicate max_pinned option"},
		{"max_pinned_per_client 0", "max_pinned_per_client must be a whole number of at least 1"},
		{"max_handshakes_per_client 0", "max_handshakes_per_client must be a whole number of at least 1"},
		{"pin_wait 1s\n\t\t\tpin_wait 2s", "duplicate pin_wait option"},
		{"handshake_timeout 0s", "handshake_timeout must be positive"},
		{"handshake_timeout soon", "handshake_timeout: "},
		{"frobnicate 1", "unrecognized subdirective frobnicate"},
		{"dial_timeout", "wrong argument count"},
		{"network_proxy url http://127.0.0.1:3128", "network_proxy (or forward_proxy_url) cannot be used"},
		{"forward_proxy_url http://127.0.0.1:3128", "network_proxy (or forward_proxy_url) cannot be used"},
	} {
		cf := "http://127.0.0.1:1 {\n\treverse_proxy 127.0.0.1:2 {\n\t\ttransport pinned {\n\t\t\t" + tt.block + "\n\t\t}\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: error %v, want %q with its line", tt.block, err, tt.want)
		}
	}
	cf := "http://127.0.0.1:1 {\n\treverse_proxy h2c://127.0.0.1:2 {\n\t\ttransport pinned\n\t}\n}\n"
	if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil); err == nil || !strings.Contains(err.Error(), "h2c upstreams") {
		t.Errorf("h2c upstream: %v", err)
	}
	for _, tt := range []struct{ transport, want string }{
		{`{"protocol":"pinned","versions":["1.1","2"]}`, "versions must be 1.1"},
		{`{"protocol":"pinned","keep_alive":{"enabled":false}}`, "keep_alive must not be off"},
		{`{"protocol":"pinned","max_pinned":-1}`, "max_pinned must not be negative"},
		{`{"protocol":"pinned","max_pinned_per_client":-1}`, "max_pinned_per_client must not be negative"},
		{`{"protocol":"pinned","max_handshakes_per_client":-1}`, "max_handshakes_per_client must not be negative"},
		{`{"protocol":"pinned","pin_wait":-1}`, "pin_wait must not be negative"},
		{`{"protocol":"pinned","handshake_timeout":-1}`, "handshake_timeout must not be negative"},
	} {
		cfg := `{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":[{"dial":"127.0.0.1:2"}],"transport":` + tt.transport + `}]}]}}}}}`
		if err := caddy.Validate(mustConfig(t, cfg)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.transport, err, tt.want)
		}
	}
}

// HTTP/3 cannot carry connection-based authentication either: credentials
// over it are answered 505 and sent nowhere.
func TestPinnedHTTP3(t *testing.T) {
	c := newCluster(t, 2, 5*time.Second, time.Second)
	var addr string
	onFreePorts(t, func() error {
		addr = loopback.FreeAddr()
		cf := fmt.Sprintf(`{
	admin %s
	persist_config off
	local_certs
	skip_install_trust
	servers {
		protocols h1 h3
	}
}
https://%s {
	tls internal
	%s
}
`, loopback.FreeAddr(), addr, strings.ReplaceAll(ssoSite("1s", pinned), "{upstreams}", c.Nodes()[0].Addr()+" "+c.Nodes()[1].Addr()))
		cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
		if err != nil {
			t.Fatal(err)
		}
		return caddy.Load(cfg, true)
	})
	t.Cleanup(func() { caddy.Stop() })
	tr := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"}}
	defer tr.Close()
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/sso/me", nil)
	req.Header.Set("Authorization", "NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw==")
	req.Header.Set("X-Client", "h3-client")
	var resp *http.Response
	poll.Until(t, 10*time.Second, "an HTTP/3 answer", func() bool {
		var err error
		resp, err = tr.RoundTrip(req)
		return err == nil
	})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 3 || resp.StatusCode != http.StatusHTTPVersionNotSupported {
		t.Fatalf("credentials over HTTP/%d: %d, want 505 over HTTP/3", resp.ProtoMajor, resp.StatusCode)
	}
	for _, n := range c.Nodes() {
		for _, s := range n.Served() {
			if s.Client == "h3-client" {
				t.Fatalf("credentials over HTTP/3 reached %s", s.Conn)
			}
		}
	}
}

// A request on a pin that is still being answered when a reload cleans up
// the old config is answered by the backend, not cut: Caddy cleans up a
// config while its server still answers its last requests (before, the
// pool closed every pin then and such requests got 502).
func TestPinnedRequestInFlightAcrossAReload(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Write([]byte("answered"))
	}))
	defer backend.Close()
	site := func(tag string) string {
		return "reverse_proxy " + backend.Listener.Addr().String() + " {\n\t\theader_down X-Config " + tag + "\n\t\ttransport pinned\n\t}"
	}
	tc := startCaddy(t, nil, "", site("old"))
	got := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, tc.url("/"), nil)
		req.Header.Set("Authorization", "NTLM TlRMTVNTUAABAAAA") // pins the connection
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "answered" {
				err = fmt.Errorf("status %d, body %q", resp.StatusCode, body)
			}
		}
		got <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the backend")
	}
	tc.load(nil, "", site("new")) // returns once the old config is cleaned up
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("the request in flight across the reload: %v", err)
	}
}
