package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// An entry is a syslog message as HAProxy's default format writes one:
// <facility*8+severity>, the local time, the tag and the process id, then
// the wrapped encoder's text.
func TestSyslogEncoder(t *testing.T) {
	d := caddyfile.NewTestDispenser("syslog {\n\tfacility local1\n\ttag edge\n}")
	se := new(SyslogEncoder)
	if err := se.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	if err := se.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)
	for level, pri := range map[zapcore.Level]int{zapcore.InfoLevel: 17*8 + 6, zapcore.WarnLevel: 17*8 + 4, zapcore.ErrorLevel: 17*8 + 3, zapcore.DebugLevel: 17*8 + 7} {
		enc := se.Clone()
		buf, err := enc.EncodeEntry(zapcore.Entry{Level: level, Time: at, LoggerName: "http.log.access", Message: "handled request"},
			[]zapcore.Field{{Key: "status", Type: zapcore.Int64Type, Integer: 200}})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("<%d>Mar  4 05:06:07 edge[%d]: {", pri, os.Getpid())
		if got := buf.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, `"status":200`) || !strings.HasSuffix(got, "}\n") {
			t.Errorf("level %s: %q, want %q…", level, got, want)
		}
	}
	if err := (&SyslogEncoder{Facility: "local9"}).Provision(ctx); err == nil {
		t.Error("facility local9 accepted")
	}
}

// HAProxy's global "log <socket> local0" with "log global" and "option
// httplog" in the defaults, run by --adapter haproxy: each request's
// access log reaches the syslog socket as a syslog message of facility
// local0 and tag haproxy, as HAProxy's line did.
func TestHAProxyAdapterLogsToSyslog(t *testing.T) {
	dir, err := os.MkdirTemp("", "syslog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "log")
	conn := listenSyslog(t, sock)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(app.Close)
	addr := loopback.FreeAddr()
	cfgText := fmt.Sprintf(`global
	log %s local0
defaults
	mode http
	log global
	option httplog
	option dontlognull
	timeout connect 5000
frontend web
	bind %s
	default_backend app
backend app
	server app1 %s
`, sock, addr, strings.TrimPrefix(app.URL, "http://"))
	_, text := runHAProxyConfig(t, cfgText)
	resp, err := http.Get("http://" + addr + "/logged?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	header := regexp.MustCompile(`^<134>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d haproxy\[` + strconv.Itoa(os.Getpid()) + `\]: \{`)
	msg := awaitSyslog(t, conn, `"uri":"/logged?x=1"`, 10*time.Second)
	if msg == "" {
		t.Fatalf("no access log entry for /logged reached the syslog socket\n%s", text)
	}
	if !header.MatchString(msg) || !strings.Contains(msg, `"logger":"http.log.access"`) || !strings.Contains(msg, `"status":204`) {
		t.Fatalf("the access log entry %q is not a local0 syslog message of tag haproxy with the request", msg)
	}
}

// The same logging configuration through HAProxy 2.6 and through
// caddy-ha: the access line of a request reaches the local0 socket from
// both as a syslog message of facility local0 (<134>, info) with the time
// and the tag haproxy and the process's id (HAProxy's text is its httplog
// line, caddy-ha's its JSON entry), and neither sends it to the local1
// notice socket (traffic is logged at info).
func TestHAProxyDifferentialSyslog(t *testing.T) {
	dir, err := os.MkdirTemp("", "syslog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(app.Close)
	for _, name := range []string{"haproxy", "caddy-ha"} {
		t.Run(name, func(t *testing.T) {
			info, notice := listenSyslog(t, filepath.Join(dir, name+"-info")), listenSyslog(t, filepath.Join(dir, name+"-notice"))
			addr := loopback.FreeAddr()
			cfgText := fmt.Sprintf(`global
	log %s local0
	log %s local1 notice
defaults
	mode http
	log global
	option httplog
	option dontlognull
	timeout connect 5000
	timeout client 10s
	timeout server 10s
frontend web
	bind %s
	default_backend app
backend app
	server app1 %s
`, info.LocalAddr(), notice.LocalAddr(), addr, strings.TrimPrefix(app.URL, "http://"))
			if name == "haproxy" {
				startHAProxy(t, cfgText, addr)
			} else {
				runHAProxyConfig(t, cfgText)
			}
			resp, err := http.Get("http://" + addr + "/logged-by-" + name)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			header := regexp.MustCompile(`^<134>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d haproxy\[\d+\]: `)
			msg := awaitSyslog(t, info, "/logged-by-"+name, 10*time.Second)
			if msg == "" || !header.MatchString(msg) {
				t.Fatalf("the access line %q is not a local0 info syslog message of tag haproxy", msg)
			}
			t.Logf("%s", msg)
			if m := awaitSyslog(t, notice, "/logged-by-"+name, time.Second); m != "" {
				t.Fatalf("the access line reached the notice socket: %q", m)
			}
		})
	}
}

// listenSyslog is a Unix datagram socket at path, closed after the test's
// other cleanups (the proxies stop before it does).
func listenSyslog(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// awaitSyslog is the first datagram holding s within d, "" if none came.
func awaitSyslog(t *testing.T, conn *net.UnixConn, s string, d time.Duration) string {
	t.Helper()
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(d)
	for {
		_ = conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		if msg := string(buf[:n]); strings.Contains(msg, s) {
			return msg
		}
	}
}

// A frontend's own log address beside log global: each request's access
// line reaches its own socket (facility local2) and the global section's
// first log line's (local0), as HAProxy sends it to both; Caddy's default
// logger, which the first global line is, would get none of a site's own
// logger's entries without the translation's copy of it. A request of
// set-log-level silent is logged at neither.
func TestHAProxyAdapterLogsToAProxysOwnTarget(t *testing.T) {
	dir, err := os.MkdirTemp("", "syslog")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	global, own := listenSyslog(t, filepath.Join(dir, "global")), listenSyslog(t, filepath.Join(dir, "own"))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(app.Close)
	addr := loopback.FreeAddr()
	_, text := runHAProxyConfig(t, fmt.Sprintf(`global
	log %s local0
defaults
	mode http
	log global
	option httplog
	timeout connect 5000
frontend web
	bind %s
	log %s local2
	http-request set-log-level silent if { path /healthz }
	default_backend app
backend app
	server app1 %s
`, filepath.Join(dir, "global"), addr, filepath.Join(dir, "own"), strings.TrimPrefix(app.URL, "http://")))
	for _, path := range []string{"/healthz", "/logged"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, s := range []struct {
		conn     *net.UnixConn
		priority string
	}{{global, "<134>"}, {own, "<150>"}} {
		// The first access line is /logged's: /healthz is not logged
		// (set-log-level silent: log_skip).
		msg := awaitSyslog(t, s.conn, `"uri":"/`, 10*time.Second)
		if !strings.HasPrefix(msg, s.priority) || !strings.Contains(msg, `"logger":"http.log.access.haproxy_frontend_web"`) || !strings.Contains(msg, `"uri":"/logged"`) {
			t.Fatalf("the access entry at %s is %q, want a %s message of it\n%s", s.conn.LocalAddr(), msg, s.priority, text)
		}
	}
}
