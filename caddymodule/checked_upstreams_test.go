package caddymodule

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/hadiff"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// dynamic checked's Caddyfile: every option, and what is refused with its
// line.
func TestCheckedUpstreamsCaddyfile(t *testing.T) {
	adapt := func(block string) (string, error) {
		caddyfile := "http://127.0.0.1:1 {\n\treverse_proxy {\n\t\tdynamic checked " + block + "\n\t}\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		return string(out), err
	}
	got, err := adapt(`{
			servers 127.0.0.1:2 [::1]:3 localhost:4
			check http
			method GET
			uri /health?deep=1
			host app.internal
			expect_status 204
			interval 1s
			fast_interval 100ms
			down_interval 5s
			timeout 700ms
			connect_timeout 300ms
			fall 4
			rise 1
		}`)
	if want := `"dynamic_upstreams":{"check":"http","connect_timeout":300000000,"down_interval":5000000000,"expect_status":204,"fall":4,"fast_interval":100000000,"host":"app.internal","interval":1000000000,"method":"GET","rise":1,"servers":["127.0.0.1:2","[::1]:3","localhost:4"],"source":"checked","timeout":700000000,"uri":"/health?deep=1"}`; err != nil ||
		!strings.Contains(got, want) {
		t.Errorf("adapted to %s (%v), want %s", got, err, want)
	}
	got, err = adapt(`{
			resolve app:8000 5
			resolve _api._tcp.service.consul 10
			resolvers 127.0.0.11:53 10.0.0.2:5353
			refresh 30s
			resolve_timeout 2s
			prefer_ipv4
			allow_dup_ip
		}`)
	if want := `"dynamic_upstreams":{"allow_dup_ip":true,"prefer_ipv4":true,"refresh":30000000000,"resolve":[{"name":"app","port":"8000","slots":5},{"name":"_api._tcp.service.consul","slots":10}],"resolve_timeout":2000000000,"resolvers":["127.0.0.11:53","10.0.0.2:5353"],"source":"checked"}`; err != nil ||
		!strings.Contains(got, want) {
		t.Errorf("adapted to %s (%v), want %s", got, err, want)
	}
	got, err = adapt(`{
			servers 127.0.0.1:2
			check http
			expect ! rstring "state: (DOWN|MAINT)"
			disable_on_404
		}`)
	if want := `"dynamic_upstreams":{"check":"http","disable_on_404":true,"expect":{"match":"rstring","negate":true,"pattern":"state: (DOWN|MAINT)"},"servers":["127.0.0.1:2"],"source":"checked"}`; err != nil ||
		!strings.Contains(got, want) {
		t.Errorf("adapted to %s (%v), want %s", got, err, want)
	}
	got, err = adapt(`{
			servers 127.0.0.1:2
			check http
			tls
			tls_server_name app.internal
			tls_trust_pool file /etc/ssl/app-ca.pem
			tls_insecure_skip_verify
		}`)
	if want := `"dynamic_upstreams":{"check":"http","servers":["127.0.0.1:2"],"source":"checked","tls":{"ca":{"pem_files":["/etc/ssl/app-ca.pem"],"provider":"file"},"insecure_skip_verify":true,"server_name":"app.internal"}}`; err != nil ||
		!strings.Contains(got, want) {
		t.Errorf("adapted to %s (%v), want %s", got, err, want)
	}
	for _, tt := range []struct{ block, want string }{
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\texpect string\n\t\t}", "expect takes [!] status|rstatus|string|rstring <pattern>, at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\texpect status 2xx\n\t\t}", `dynamic checked: expect status "2xx": want codes`},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\texpect_status 200\n\t\t\texpect string up\n\t\t}", "dynamic checked: expect replaces expect_status: set one"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tdisable_on_404\n\t\t}", "dynamic checked: disable_on_404 is a setting of check http, not of check tcp"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tresolve app:80\n\t\t}", "dynamic checked: resolve takes the place of servers: write one of them, at Caddyfile:5"},
		{"{\n\t\t\tresolve app\n\t\t}", `dynamic checked: resolve app needs a port (1 to 65535), not ""`},
		{"{\n\t\t\tresolve _a._tcp.app:80\n\t\t}", "is an SRV name, whose records give the port"},
		{"{\n\t\t\tresolve app:80 0\n\t\t}", "resolve: slots must be a whole number from 1, got 0"},
		{"{\n\t\t\tresolve app:80\n\t\t\tresolvers 127.0.0.11\n\t\t}", `resolvers "127.0.0.11" is not a DNS server's host:port`},
		{"{\n\t\t\tcheck tcp\n\t\t}", "dynamic checked: servers names no server, at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2 127.0.0.1:2\n\t\t}", "servers names 127.0.0.1:2 twice, at Caddyfile:4"},
		{"{\n\t\t\tservers http://127.0.0.1:2\n\t\t}", `servers "http://127.0.0.1:2" is not a server's host:port`},
		{"{\n\t\t\tservers 127.0.0.1\n\t\t}", `servers "127.0.0.1" is not a server's host:port`},
		{"{\n\t\t\tservers 127.0.0.1:2-3\n\t\t}", `servers "127.0.0.1:2-3" is not a server's host:port`},
		{"{\n\t\t\tservers unix//run/app.sock\n\t\t}", `servers "unix//run/app.sock" is not a server's host:port`},
		{"{\n\t\t\tservers {http.request.host}:80\n\t\t}", `is not a server's host:port`},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck udp\n\t\t}", `dynamic checked: check must be tcp, http or none, not "udp", at Caddyfile:5`},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\turi /health\n\t\t}", "dynamic checked: uri is a setting of check http, not of check tcp, at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\turi health\n\t\t}", `dynamic checked: uri "health" must start with / (or be *), at Caddyfile:6`},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\tmethod \"GE T\"\n\t\t}", `method "GE T" is not an HTTP method, at Caddyfile:6`},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\texpect_status 2xx\n\t\t}", "expect_status must be an HTTP status, got 2xx, at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck http\n\t\t\texpect_status 600\n\t\t}", "expect_status 600 is not an HTTP status (100 to 599), at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tfall 0\n\t\t}", "fall must be a whole number of at least 1, got 0, at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tinterval -1s\n\t\t}", "interval must be positive, got -1s, at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\trise 1\n\t\t\trise 2\n\t\t}", "duplicate rise option, at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tinter 1s\n\t\t}", "unrecognized dynamic checked option 'inter', at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\ttls_server_name app.internal\n\t\t}", "tls_server_name is a setting of the checks' tls: write tls before it, at Caddyfile:5"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\ttls\n\t\t\ttls_insecure_skip_verify yes\n\t\t}", "tls_insecure_skip_verify: too many arguments, at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\tcheck none\n\t\t\ttls\n\t\t}", "dynamic checked: tls is a setting of check tcp or http, not of check none (no server is checked), at Caddyfile:6"},
		{"{\n\t\t\tservers 127.0.0.1:2\n\t\t\ttls\n\t\t\ttls_trust_pool nosuch\n\t\t}", "tls.ca_pool.source.nosuch"},
		{"127.0.0.1:2", "wrong argument count"},
	} {
		if _, err := adapt(tt.block); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}
}

// checkedBackend is an HTTP server at a fixed address that answers with
// X-Server: its name, answers its checks (OPTIONS, HAProxy's default)
// with checkStatus and checkBody and counts them, and can be stopped and
// started again; with tls, over TLS.
type checkedBackend struct {
	t           *testing.T
	name, addr  string
	tls         *tls.Config
	checkStatus atomic.Int32
	checkBody   atomic.Pointer[string]
	mu          sync.Mutex
	checks      []int // the statuses its checks were answered
	srv         *http.Server
}

func newCheckedBackend(t *testing.T, name string) *checkedBackend {
	return newTLSCheckedBackend(t, name, nil)
}

// newTLSCheckedBackend is a checkedBackend that serves over TLS with
// config, if not nil.
func newTLSCheckedBackend(t *testing.T, name string, config *tls.Config) *checkedBackend {
	b := &checkedBackend{t: t, name: name, addr: loopback.FreeAddr(), tls: config}
	b.checkStatus.Store(http.StatusOK)
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *checkedBackend) start() {
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			status := int(b.checkStatus.Load())
			b.mu.Lock()
			b.checks = append(b.checks, status)
			b.mu.Unlock()
			w.WriteHeader(status)
			if body := b.checkBody.Load(); body != nil {
				w.Write([]byte(*body)) //nolint:errcheck // the check's to read
			}
			return
		}
		w.Header().Set("X-Server", b.name)
	})}
	if b.tls != nil {
		ln = tls.NewListener(ln, b.tls)
		b.srv.ErrorLog = log.New(io.Discard, "", 0) // the handshakes a test makes fail
	}
	go b.srv.Serve(ln) //nolint:errcheck // until stop
}

func (b *checkedBackend) stop() { b.srv.Close() }

// checksSince counts the checks answered with status since the check
// numbered from.
func (b *checkedBackend) checksSince(from int, status int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.checks[min(from, len(b.checks)):] {
		if s == status {
			n++
		}
	}
	return n
}

func (b *checkedBackend) checkCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.checks)
}

// dynamic checked in a real Caddy in front of real backends: a server
// whose HTTP check fails still gets requests after fall-1 failed checks,
// none after fall; back after rise passed checks, not before; a stopped
// server (connect check) leaves and comes back; with none up, 503, or
// with lb_try_duration the first server to come up; health_uri beside it
// refused.
func TestCheckedUpstreamsThroughCaddy(t *testing.T) {
	a, b := newCheckedBackend(t, "a"), newCheckedBackend(t, "b")
	site := func(check string) string {
		return fmt.Sprintf(`reverse_proxy {
		dynamic checked {
			servers %s %s
			%s
			interval 300ms
			fall 3
			rise 2
		}
		lb_policy round_robin
	}`, a.addr, b.addr, check)
	}
	tc := startCaddy(t, nil, "", site("check http"))
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	waitForTurns(t, "both up", ask, "a", "b")

	// Each step waits for b's n-th check of a kind, then asks while its
	// next is at least a 300ms interval away.
	servesB := func() bool {
		for range 4 {
			if ask() == "b" {
				return true
			}
		}
		return false
	}
	from := b.checkCount()
	b.checkStatus.Store(http.StatusServiceUnavailable)
	for n := 1; n <= 2; n++ {
		poll.Until(t, 10*time.Second, fmt.Sprintf("b's failed check %d", n), func() bool { return b.checksSince(from, 503) >= n })
		if !servesB() {
			t.Fatalf("b got no request after %d failed checks, fall 3", n)
		}
	}
	poll.Until(t, 10*time.Second, "b's failed check 3", func() bool { return b.checksSince(from, 503) >= 3 })
	waitForTurns(t, "b down", ask, "a")

	from = b.checkCount()
	b.checkStatus.Store(http.StatusFound) // a 3xx passes
	poll.Until(t, 10*time.Second, "b's passed check 1", func() bool { return b.checksSince(from, 302) >= 1 })
	if servesB() {
		t.Fatal("b got a request after 1 passed check, rise 2")
	}
	poll.Until(t, 10*time.Second, "b's passed check 2", func() bool { return b.checksSince(from, 302) >= 2 })
	waitForTurns(t, "b up again", ask, "a", "b")

	b.checkStatus.Store(http.StatusNotFound) // a 4xx fails
	waitForTurns(t, "b answering its checks 404", ask, "a")
	b.checkStatus.Store(http.StatusOK)

	// The connect check: a stopped server leaves, and comes back when it
	// listens again.
	tc.load(nil, "", site("check tcp"))
	waitForTurns(t, "both up, connect check", ask, "a", "b")
	b.stop()
	waitForTurns(t, "b stopped", ask, "a")
	b.start()
	waitForTurns(t, "b started again", ask, "a", "b")

	// None up: 503 (HAProxy's answer), and back.
	a.stop()
	b.stop()
	poll.Until(t, 10*time.Second, "503 with no server up", func() bool { return ask() == "status 503" })
	if len(tc.logLines("no server is up")) == 0 {
		t.Error("no server up was not logged")
	}
	// With lb_try_duration, a request waits for a server to come up: a
	// needs rise (2) passed checks, 300ms apart, after it listens again.
	tc.load(nil, "", strings.Replace(site("check tcp"), "lb_policy round_robin", "lb_policy round_robin\n\t\tlb_try_duration 3s", 1))
	if got := ask(); got != "status 503" {
		t.Fatalf("a reload with no server up: %s, want 503 (the servers stay down)", got)
	}
	answered := make(chan string, 1)
	go func() { answered <- ask() }()
	a.start()
	if got := <-answered; got != "a" {
		t.Fatalf("a request while no server was up, with lb_try_duration: %s, want a once it came up", got)
	}

	err := tc.tryLoad(nil, "", fmt.Sprintf("reverse_proxy {\n\t\tdynamic checked {\n\t\t\tservers %s\n\t\t}\n\t\thealth_uri /health\n\t}", a.addr))
	if err == nil || !strings.Contains(err.Error(), "dynamic checked: the reverse_proxy's active health checks (health_uri, health_port, …) never run on dynamic upstreams") {
		t.Fatalf("health_uri beside dynamic checked: %v", err)
	}
}

// dynamic checked's tls in a real Caddy in front of backends that speak
// TLS alone: the checks verify them with the trust pool and the server
// name, and a failing check over TLS takes a server out; a plain check,
// or one that verifies with another CA, finds them all down (503), one
// that skips verification finds them up; a trust pool file that does not
// exist, a handshake_timeout, fail at load time.
func TestCheckedUpstreamsOverTLS(t *testing.T) {
	serving, caFile, otherFile := appInternalTLS(t)
	a, b := newTLSCheckedBackend(t, "a", serving), newTLSCheckedBackend(t, "b", serving)
	site := func(checkTLS string) string {
		return fmt.Sprintf(`reverse_proxy {
		dynamic checked {
			servers %s %s
			check http
			%s
			interval 100ms
			fall 1
			rise 1
		}
		transport http {
			tls
			tls_server_name app.internal
			tls_trust_pool file %s
		}
		lb_policy round_robin
	}`, a.addr, b.addr, checkTLS, caFile)
	}
	verified := "tls\n\t\t\ttls_server_name app.internal\n\t\t\ttls_trust_pool file " + caFile
	tc := startCaddy(t, nil, "", site(verified))
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	waitForTurns(t, "both up, checked over TLS", ask, "a", "b")
	b.checkStatus.Store(http.StatusServiceUnavailable)
	waitForTurns(t, "b's checks answered 503", ask, "a")
	b.checkStatus.Store(http.StatusOK)
	waitForTurns(t, "b's checks answered 200 again", ask, "a", "b")

	for _, tt := range []struct{ name, checkTLS, want string }{
		{"plain checks", "", "status 503"},
		{"another CA", "tls\n\t\t\ttls_server_name app.internal\n\t\t\ttls_trust_pool file " + otherFile, "status 503"},
		{"another name", "tls\n\t\t\ttls_server_name other.internal\n\t\t\ttls_trust_pool file " + caFile, "status 503"},
		{"verification skipped", "tls\n\t\t\ttls_insecure_skip_verify\n\t\t\ttls_trust_pool file " + otherFile, ""},
	} {
		tc.load(nil, "", site(tt.checkTLS))
		if tt.want == "" {
			waitForTurns(t, tt.name, ask, "a", "b")
			continue
		}
		poll.Until(t, 10*time.Second, tt.name+": every server down", func() bool { return ask() == tt.want })
	}
	if len(tc.logLines("certificate signed by unknown authority")) == 0 {
		t.Error("no check failure logged its certificate error")
	}

	missing := "tls\n\t\t\ttls_trust_pool file " + filepath.Join(t.TempDir(), "missing.pem")
	if err := tc.tryLoad(nil, "", site(missing)); err == nil || !strings.Contains(err.Error(), "dynamic checked: tls cannot be loaded") || !strings.Contains(err.Error(), "missing.pem: no such file") {
		t.Errorf("a trust pool file that does not exist: %v", err)
	}
	for field, tls := range map[string]*reverseproxy.TLSConfig{
		"handshake_timeout: the check's timeout bounds its handshake": {HandshakeTimeout: caddy.Duration(time.Second)},
		"except_ports: every server's check speaks TLS alike":         {ExceptPorts: []string{"443"}},
	} {
		u := &CheckedUpstreams{Servers: []string{a.addr}, TLS: tls}
		if err := u.Validate(); err == nil || err.Error() != "dynamic checked: tls "+field {
			t.Errorf("tls %+v: %v, want dynamic checked: tls %s", tls, err, field)
		}
	}
}

// A reload keeps each server's state: a server down (its check times
// out, so that starting it up would send requests to it for a whole
// timeout) gets no request right after the reload; the old config's
// checks stop.
func TestCheckedUpstreamsReloadKeepsServerState(t *testing.T) {
	a := newCheckedBackend(t, "a")
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts in the kernel, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	site := func(header string) string {
		return fmt.Sprintf(`header X-Config %s
	reverse_proxy {
		dynamic checked {
			servers %s %s
			check http
			interval 100ms
			timeout 300ms
			fall 1
		}
	}`, header, silent.Addr(), a.addr)
	}
	tc := startCaddy(t, nil, "", site("one"))
	client := &http.Client{Timeout: 2 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	poll.Until(t, 10*time.Second, "the silent server down", func() bool { return len(tc.logLines("server is down")) == 1 })
	waitForTurns(t, "the silent server down", ask, "a")

	tc.load(nil, "", site("two"))
	for i := range 10 {
		if got := ask(); got != "a" {
			t.Fatalf("request %d after the reload: %s, want a (the silent server stays down)", i, got)
		}
	}
	if n := countCheckers(); n != 1 {
		t.Fatalf("%d checkers after the reload, want the new config's alone", n)
	}
	tc.load(nil, "", "respond ok")
	if n := countCheckers(); n != 0 {
		t.Fatalf("%d checkers after a config without dynamic checked", n)
	}
}

func countCheckers() int {
	n := 0
	checkers.Range(func(any, any) bool { n++; return true })
	return n
}

// lb_policy backup with dynamic checked: a backup that is down is absent
// from the pool, which is no misnamed backup to warn of; a backup that is
// not one of the servers fails at load time.
func TestCheckedUpstreamsWithBackupPolicy(t *testing.T) {
	a, spare := newCheckedBackend(t, "a"), newCheckedBackend(t, "spare")
	site := func(backup string) string {
		return fmt.Sprintf(`reverse_proxy {
		dynamic checked {
			servers %s %s
			interval 50ms
			fall 1
			rise 1
		}
		lb_policy backup {
			backups %s
		}
	}`, spare.addr, a.addr, backup)
	}
	tc := startCaddy(t, nil, "", site(spare.addr))
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	waitForTurns(t, "the primary up", ask, "a")
	spare.stop()
	poll.Until(t, 10*time.Second, "the backup down", func() bool { return len(tc.logLines("server is down")) == 1 })
	waitForTurns(t, "the backup down", ask, "a")
	a.stop()
	spare.start()
	waitForTurns(t, "the primary down, the backup up", ask, "spare")
	if lines := tc.logLines("backups that are not upstreams"); len(lines) > 0 {
		t.Fatalf("a backup that was down was logged as no upstream: %s", lines)
	}

	if err := tc.tryLoad(nil, "", site("127.0.0.1:1")); err == nil || !strings.Contains(err.Error(), "lb_policy backup: backups 127.0.0.1:1 is not one of dynamic checked's servers") {
		t.Fatalf("a backup not among the servers: %v", err)
	}
}

// HAProxy and caddy-ha with the same server checks, each in front of its
// own two backends a and b, b's checks answered the same: a connect check
// keeps a stopped server out until it listens again; option httpchk
// without http-check expect passes 2xx and 3xx and fails 4xx and 5xx; a
// server dead at start goes down at its first failed check. The Caddy
// side is what docs/haproxy.md gives the adapter to write.
func TestHAProxyDifferentialServerChecks(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		pair := startCheckPair(t, "", "200ms", "a", "b")
		pair.turns("both up", "a", "b")
		pair.each(func(p *checkProxy) { p.b.stop() })
		pair.turns("b stopped", "a")
		pair.each(func(p *checkProxy) { p.b.start() })
		pair.turns("b listening again", "a", "b")
	})
	t.Run("http", func(t *testing.T) {
		pair := startCheckPair(t, "    option httpchk\n", "200ms", "a", "b")
		pair.turns("both up", "a", "b")
		for _, step := range []checkStep{
			{http.StatusFound, "", []string{"a", "b"}},
			{http.StatusNoContent, "", []string{"a", "b"}},
			{http.StatusNotFound, "", []string{"a"}},
			{http.StatusOK, "", []string{"a", "b"}},
			{http.StatusInternalServerError, "", []string{"a"}},
			{http.StatusMovedPermanently, "", []string{"a", "b"}},
		} {
			pair.answerChecks(step)
		}
	})
	// b first, so that HAProxy checks it at once too (it spreads its first
	// checks over inter, in the servers' order); with inter 30s, only
	// going down at the first failure (not after fall 3) takes b out
	// within waitForTurns' 15s.
	t.Run("dead at start", func(t *testing.T) {
		pair := startCheckPair(t, "", "30s", "b", "a")
		pair.turns("b dead at start", "a")
	})
}

// HAProxy and caddy-ha checking servers that speak TLS alone (ssl, which
// implies HAProxy's check-ssl): option httpchk's check over TLS, with
// verify none or verified by a ca-file and a name, takes b out when it
// answers 503 and back at 200, and a stopped b out; a TCP check with ssl
// completes a handshake, so a ca-file of another CA takes every server
// out of both (503).
func TestHAProxyDifferentialServerChecksOverTLS(t *testing.T) {
	serving, caFile, otherFile := appInternalTLS(t)
	verified := func(caFile string) string {
		return " ssl ca-file " + caFile + " verifyhost app.internal check-sni app.internal sni str(app.internal)"
	}
	for _, tt := range []struct{ name, serverOptions string }{
		{"http, verify none", " ssl verify none"},
		{"http, verified", verified(caFile)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pair := startTLSCheckPair(t, "    option httpchk\n", "200ms", tt.serverOptions, serving, "a", "b")
			pair.turns("both up", "a", "b")
			for _, step := range []checkStep{
				{http.StatusServiceUnavailable, "", []string{"a"}},
				{http.StatusOK, "", []string{"a", "b"}},
			} {
				pair.answerChecks(step)
			}
			pair.each(func(p *checkProxy) { p.b.stop() })
			pair.turns("b stopped", "a")
		})
	}
	t.Run("tcp, verified", func(t *testing.T) {
		pair := startTLSCheckPair(t, "", "200ms", verified(caFile), serving, "a", "b")
		pair.turns("both up", "a", "b")
		pair.each(func(p *checkProxy) { p.b.stop() })
		pair.turns("b stopped", "a")
	})
	t.Run("tcp, another CA", func(t *testing.T) {
		pair := startTLSCheckPair(t, "", "200ms", verified(otherFile), serving, "a", "b")
		pair.turns("no server verified", "status 503")
	})
}

// HAProxy's http-check expect rules other than one status, and
// disable-on-404, as dynamic checked's expect and disable_on_404: b's
// check answers, with and without the string, a status in and out of the
// list, a 404 to b up and to b down, leave both proxies sending to the
// same servers.
func TestHAProxyDifferentialCheckExpect(t *testing.T) {
	for _, tt := range []struct {
		name, check string
		steps       []checkStep
	}{
		{"expect string", "    http-check expect string installed\n", []checkStep{
			{http.StatusOK, `{"installed":true}`, []string{"a", "b"}},
			{http.StatusOK, `{"maintenance":true}`, []string{"a"}},
			{http.StatusServiceUnavailable, `{"installed":true}`, []string{"a", "b"}}, // the status is not looked at
			{http.StatusOK, "", []string{"a"}},
		}},
		{"expect ! string", "    http-check expect ! string maintenance\n", []checkStep{
			{http.StatusOK, "maintenance", []string{"a"}},
			{http.StatusInternalServerError, "ok", []string{"a", "b"}},
			{http.StatusOK, "", []string{"a"}}, // no body: HAProxy fails a body match, negated too
		}},
		{"expect ! rstatus", "    http-check expect ! rstatus ^5\n", []checkStep{
			{http.StatusServiceUnavailable, "", []string{"a"}},
			{http.StatusNotFound, "", []string{"a", "b"}},
		}},
		{"expect status list", "    http-check expect status 200,301-302\n", []checkStep{
			{http.StatusFound, "", []string{"a", "b"}},
			{http.StatusSeeOther, "", []string{"a"}},
			{http.StatusMovedPermanently, "", []string{"a", "b"}},
		}},
		{"disable-on-404", "    http-check disable-on-404\n    http-check expect status 200\n", []checkStep{
			{http.StatusNotFound, "", []string{"a"}}, // drained, at once
			{http.StatusOK, "", []string{"a", "b"}},
			{http.StatusInternalServerError, "", []string{"a"}}, // down
			{http.StatusNotFound, "", []string{"a"}},            // a 404 does not bring a down server up
			{http.StatusOK, "", []string{"a", "b"}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pair := startCheckPair(t, "    option httpchk\n"+tt.check, "200ms", "a", "b")
			body := `{"installed":true} ok`
			pair.each(func(p *checkProxy) { p.a.checkBody.Store(&body) })
			pair.answerChecks(checkStep{http.StatusOK, body, []string{"a", "b"}})
			for _, step := range tt.steps {
				pair.answerChecks(step)
			}
		})
	}
}

// checkStep is how b answers its checks, and the servers both proxies
// then send to in turns.
type checkStep struct {
	status int
	body   string
	want   []string
}

// answerChecks has b answer its checks as step says and, once fall (3)
// checks were answered so (a failing answer has taken b down by then, a
// passing one has not), waits until both proxies send to step.want.
func (pair *checkPair) answerChecks(step checkStep) {
	pair.t.Helper()
	from := map[*checkProxy]int{}
	pair.each(func(p *checkProxy) {
		from[p] = p.b.checkCount()
		p.b.checkBody.Store(&step.body)
		p.b.checkStatus.Store(int32(step.status))
	})
	pair.each(func(p *checkProxy) {
		poll.Until(pair.t, 10*time.Second, fmt.Sprintf("3 checks of %s's b answered %d", p.name, step.status), func() bool {
			return p.b.checksSince(from[p], step.status) >= 3
		})
	})
	pair.turns(fmt.Sprintf("b's checks answered %d %q", step.status, step.body), step.want...)
}

// checkPair is HAProxy and caddy-ha, each with its backends a and b.
type checkPair struct {
	t       *testing.T
	proxies []*checkProxy
}

type checkProxy struct {
	name, addr string
	a, b       *checkedBackend
}

// startCheckPair starts the backends, and both proxies with the same
// checks (checkLines, the backend's option httpchk and http-check lines:
// none is a TCP check) every inter, of the servers named in order:
// HAProxy with a configuration, caddy-ha with the haproxy adapter's
// translation of it (dynamic checked); b is stopped first if it is named
// first.
func startCheckPair(t *testing.T, checkLines, inter string, order ...string) *checkPair {
	return startTLSCheckPair(t, checkLines, inter, "", nil, order...)
}

// startTLSCheckPair is startCheckPair with backends that serve over TLS
// with serving (if not nil), and serverOptions on each server line.
func startTLSCheckPair(t *testing.T, checkLines, inter, serverOptions string, serving *tls.Config, order ...string) *checkPair {
	pair := &checkPair{t: t, proxies: []*checkProxy{{name: "haproxy"}, {name: "caddy-ha"}}}
	pair.each(func(p *checkProxy) {
		p.a, p.b = newTLSCheckedBackend(t, "a", serving), newTLSCheckedBackend(t, "b", serving)
		if order[0] == "b" {
			p.b.stop()
		}
	})
	hap, ch := pair.proxies[0], pair.proxies[1]
	serverLines := func(p *checkProxy) (lines string) {
		for _, name := range order {
			addr := map[string]string{"a": p.a.addr, "b": p.b.addr}[name]
			lines += fmt.Sprintf("    server %s %s check%s\n", name, addr, serverOptions)
		}
		return lines
	}
	// The same HAProxy configuration, each proxy with its own backends:
	// HAProxy runs it, caddy-ha its adaptation (dynamic checked).
	configFor := func(p *checkProxy) string {
		lines := serverLines(p)
		p.addr = loopback.FreeAddr()
		return fmt.Sprintf(`defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s

frontend web
    bind %s
    default_backend app

backend app
    balance roundrobin
%s    default-server inter %s fall 3 rise 2
%s`, p.addr, checkLines, inter, lines)
	}
	startHAProxy(t, configFor(hap), hap.addr)
	runHAProxyConfig(t, configFor(ch))
	return pair
}

func (pair *checkPair) each(f func(p *checkProxy)) {
	for _, p := range pair.proxies {
		f(p)
	}
}

// turns waits until each proxy sends to want in turns (waitForTurns).
func (pair *checkPair) turns(what string, want ...string) {
	pair.t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	pair.each(func(p *checkProxy) {
		waitForTurns(pair.t, p.name+" with "+what, func() string { return serverOf(client, "http://"+p.addr+"/") }, want...)
	})
}

// dynamic checked's resolve in a real Caddy, through a DNS server on
// loopback: an SRV name's records are the servers (their ports the
// records'), at most the slots; a change of the records is followed at
// the next refresh; a host name's A record takes the port written; the
// first resolution is done before the first request.
func TestCheckedUpstreamsResolve(t *testing.T) {
	a, b, c := newCheckedBackend(t, "a"), newCheckedBackend(t, "b"), newCheckedBackend(t, "c")
	ns, err := hadiff.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	target := func(be *checkedBackend) hadiff.SRVTarget {
		_, port, _ := net.SplitHostPort(be.addr)
		p, _ := strconv.Atoi(port)
		return hadiff.SRVTarget{Host: be.name + ".node.test", Port: uint16(p)}
	}
	ns.SetSRV("_app._tcp.service.test", target(a), target(b))
	_, cPort, _ := net.SplitHostPort(c.addr)
	ns.SetA("single.test", net.IPv4(127, 0, 0, 1))
	site := fmt.Sprintf(`reverse_proxy {
		dynamic checked {
			resolve _app._tcp.service.test 2
			resolvers %s
			refresh 200ms
			allow_dup_ip
			check tcp
			interval 100ms
		}
		lb_policy round_robin
	}`, ns.Addr)
	tc := startCaddy(t, nil, "", site)
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	if got := ask(); got != "a" && got != "b" {
		t.Fatalf("the first request: %s, want a or b (resolved before it)", got)
	}
	waitForTurns(t, "the records", ask, "a", "b")
	ns.SetSRV("_app._tcp.service.test", target(c), target(b))
	waitForTurns(t, "the records changed", ask, "c", "b")
	// More records than slots: b and c keep theirs.
	before := ns.Queries("_app._tcp.service.test")
	ns.SetSRV("_app._tcp.service.test", target(a), target(c), target(b))
	poll.Until(t, 10*time.Second, "two refreshes", func() bool { return ns.Queries("_app._tcp.service.test") >= before+2 })
	waitForTurns(t, "three records, two slots", ask, "c", "b")

	// Without allow_dup_ip, one server of the records' one IP.
	tc.load(nil, "", strings.Replace(site, "allow_dup_ip", "", 1))
	if got := split(6, ask); len(got) != 1 {
		t.Errorf("without allow_dup_ip: %v, want one server", got)
	}

	tc.load(nil, "", fmt.Sprintf("reverse_proxy {\n\t\tdynamic checked {\n\t\t\tresolve single.test:%s\n\t\t\tresolvers %s\n\t\t}\n\t}", cPort, ns.Addr))
	waitForTurns(t, "an A record with the port written", ask, "c")

	// check none: every address is a server, a stopped one too (HAProxy's
	// server without check).
	b.stop()
	ns.SetSRV("_app._tcp.service.test", target(c), target(b))
	tc.load(nil, "", strings.Replace(strings.Replace(site, "check tcp", "check none", 1), "resolve _app._tcp.service.test 2", "resolve _app._tcp.service.test 3", 1))
	waitForTurns(t, "check none", ask, "c", "status 502")
}

// appInternalTLS is a server's TLS with a certificate for app.internal,
// the file of the CA that issued it, and the file of another CA.
func appInternalTLS(t *testing.T) (serving *tls.Config, caFile, otherFile string) {
	t.Helper()
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := ca.Issue("app.internal")
	if err != nil {
		t.Fatal(err)
	}
	other, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, otherFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other.pem")
	for file, pem := range map[string][]byte{caFile: ca.PEM, otherFile: other.PEM} {
		if err := os.WriteFile(file, pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	serving = &tls.Config{Certificates: []tls.Certificate{cert}}
	return serving, caFile, otherFile
}
