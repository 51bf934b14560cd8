package caddymodule

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// A bad max_connections is refused when the Caddyfile is adapted, with
// its line.
func TestMaxConnectionsRefusesBadSettings(t *testing.T) {
	for wrapper, want := range map[string]string{
		"max_connections":                              "wrong argument count",
		"max_connections 0":                            "max must be a whole number of at least 1, got 0, at Caddyfile:4",
		"max_connections x":                            "max must be a whole number of at least 1, got x",
		"max_connections 2 3":                          "max_connections: too many arguments",
		"max_connections 2 {\n\t\t\t\tsize 3\n\t\t\t}": "unrecognized max_connections option 'size'",
		"max_connections 2 {\n\t\t\t\tgroup\n\t\t\t}":  "wrong argument count",
	} {
		cfg := "{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\t" + wrapper + "\n\t\t}\n\t}\n}\nhttp://127.0.0.1:1 {\n\trespond ok\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", wrapper, err, want)
		}
	}
}

// Wrappers of one group in one configuration must agree on max: Caddy
// does not start otherwise.
func TestMaxConnectionsGroupOfTwoMaximaIsRefused(t *testing.T) {
	a, b := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := `{"admin":{"disabled":true,"config":{"persist":false}},"apps":{"http":{"servers":{
		"a":{"listen":["` + a + `"],"listener_wrappers":[{"wrapper":"max_connections","max":2,"group":"g"}]},
		"b":{"listen":["` + b + `"],"listener_wrappers":[{"wrapper":"max_connections","max":3,"group":"g"}]}}}}}`
	err := caddy.Load([]byte(cfg), true)
	if err == nil {
		caddy.Stop()
		t.Fatal("loaded")
	}
	// Caddy provisions the servers in no fixed order: either one is the other.
	if !regexp.MustCompile(`max_connections: group "g" has max (2|3) in another listener wrapper of this configuration, not (2|3)`).MatchString(err.Error()) {
		t.Fatalf("%v", err)
	}
}

// A reload that keeps a group's max keeps its count: a connection the old
// configuration still serves holds the new one's only place until it
// closes. Without a group the new configuration counts afresh.
func TestMaxConnectionsGroupCountsAcrossAReload(t *testing.T) {
	for _, tt := range []struct {
		group string
		held  bool
	}{{"g", true}, {"", false}} {
		t.Run("group "+tt.group, func(t *testing.T) {
			arrived, release := make(chan struct{}, 4), make(chan struct{})
			slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-release
				io.WriteString(w, "slow")
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go slow.Serve(ln) //nolint:errcheck // until Close
			t.Cleanup(func() { slow.Close() })
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			addr, probe := loopback.FreeAddr(), loopback.FreeAddr()
			config := func(extra string) []byte {
				return []byte(`{"admin":{"disabled":true,"config":{"persist":false}},"apps":{"http":{"servers":{"s":{"listen":["` + addr + `"],
					"listener_wrappers":[{"wrapper":"max_connections","max":1,"group":"` + tt.group + `"},{"wrapper":"tls"}],
					"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":[{"dial":"` + ln.Addr().String() + `"}]}]}]}` + extra + `}}}}`)
			}
			cfg := config("")
			// The reload's: the same server, and a probe that answers once
			// the new configuration runs.
			reload := config(`,"probe":{"listen":["` + probe + `"],"routes":[{"handle":[{"handler":"static_response","body":"new"}]}]}`)
			if err := caddy.Load(cfg, true); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { caddy.Stop() })
			first := dialAndAsk(t, addr)
			<-arrived // the old configuration serves it, until release
			loaded := make(chan error, 1)
			go func() { loaded <- caddy.Load(reload, true) }()
			// The new configuration runs, then the old one's socket closes
			// (its server still serves the first connection).
			poll.Until(t, 10*time.Second, "the new configuration to run", func() bool {
				resp, err := http.Get("http://" + probe + "/")
				if err == nil {
					resp.Body.Close()
				}
				return err == nil && resp.StatusCode == 200
			})
			// Caddy counts the old socket out just before it closes it:
			// ask the kernel.
			poll.Until(t, 10*time.Second, "the old configuration's socket to close", func() bool { return listeningSockets(t, addr) == 1 })
			second := dialAndAsk(t, addr)
			if tt.held {
				if second.answered(t, heldWindow) {
					t.Fatal("the new configuration served a second connection while the old one's counts against max 1")
				}
				close(release)
			} else {
				select {
				case <-arrived:
				case <-time.After(5 * time.Second):
					t.Fatal("without a group, the new configuration does not take the connection")
				}
				close(release)
			}
			if !first.answered(t, 5*time.Second) || !second.answered(t, 5*time.Second) {
				t.Fatal("not both answered once the first was")
			}
			if err := <-loaded; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// listeningSockets is how many sockets listen on addr (an IPv4 host:port),
// as /proc/net/tcp lists them.
func listeningSockets(t *testing.T, addr string) int {
	t.Helper()
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ip := ap.Addr().As4()
	// The local address as the kernel writes it: the IPv4 address as a
	// little-endian 32-bit word, then the port, in hex.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port())
	n := 0
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[3] == "0A" { // TCP_LISTEN
			n++
		}
	}
	return n
}

// keptAlive is a client connection that has had an answer and is kept
// alive (counting against maxconn), or one that waits for its first.
type keptAlive struct {
	c net.Conn
	r *bufio.Reader
}

// dialAndAsk connects to addr and sends a request, without reading.
func dialAndAsk(t *testing.T, addr string) *keptAlive {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return &keptAlive{c, bufio.NewReader(c)}
}

// answered reads the answer within wait; false if none came.
func (k *keptAlive) answered(t *testing.T, wait time.Duration) bool {
	t.Helper()
	k.c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return false
		}
		t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return true
}

// heldWindow is how long a connection past maxconn is watched for an
// answer that must not come.
const heldWindow = 500 * time.Millisecond
