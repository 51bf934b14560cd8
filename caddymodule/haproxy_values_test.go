package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/blocklist"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// Issue 27.1 and 27.2: literal values that HAProxy carries as they are
// reach the client as the same bytes through the adapted config, run by
// real Caddy in front of a real backend: a header value ending in a
// backslash or holding \", one that is <<END (the Caddyfile's heredoc),
// {env.*} and {file.*} in header values, a return string and a redirect
// target (never evaluated: the secret and the file stay out of every
// answer), and an errorfile holding Caddyfile lines and JSON with \" (its deny's answer). On
// 507eb08 these added an upstream, served a file or failed to adapt.
func TestHAProxyAdapterCarriesValuesExactly(t *testing.T) {
	t.Setenv("CADDY_HA_TEST_SECRET", "s3cr3t-v4lue")
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the backend")
	}))
	defer backend.Close()
	dir := t.TempDir()
	const errorBody = "{\"error\": \"said \\\"no\\\"\"}\n}\nhandle {\n\tfile_server browse\n}\n<<END\n"
	errorFile := filepath.Join(dir, "403.http")
	if err := os.WriteFile(errorFile, []byte("HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\r\n"+errorBody), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := loopback.FreeAddr()
	headers := map[string]string{
		"X-Backslash": `ends in a backslash\`,
		"X-Escaped":   `holds \" a quote`,
		"X-Heredoc":   "<<END",
		"X-Env":       "{env.CADDY_HA_TEST_SECRET}",
		"X-File":      "{file./etc/hostname}",
		"X-Braces":    `a \{b\} {c} }{`,
	}
	var rules strings.Builder
	for name, v := range headers {
		fmt.Fprintf(&rules, "    http-response set-header %s %s\n", name, haproxyWord(v))
	}
	cfg := fmt.Sprintf(`defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    errorfile 403 %s

frontend web
    bind %s
    http-request return status 200 content-type text/plain string %s if { path /return }
    http-request redirect location %s if { path /redirect }
    http-request deny if { path /denied }
%s    default_backend app

backend app
    server app1 %s
`, errorFile, addr, haproxyWord("{env.CADDY_HA_TEST_SECRET} {file./etc/hostname}"), haproxyWord("/to/{env.CADDY_HA_TEST_SECRET}"),
		rules.String(), strings.TrimPrefix(backend.URL, "http://"))
	_, text := runHAProxyConfig(t, cfg)
	if strings.Contains(text, "s3cr3t-v4lue") {
		t.Errorf("the migrated Caddyfile holds the secret:\n%s", text)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(body), "s3cr3t-v4lue") || strings.Contains(fmt.Sprint(resp.Header), "s3cr3t-v4lue") {
			t.Errorf("%s: the answer holds the secret: %v %q", path, resp.Header, body)
		}
		return resp, string(body)
	}
	resp, body := get("/")
	if body != "from the backend" {
		t.Errorf("/: %q", body)
	}
	for name, v := range headers {
		if got := resp.Header.Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
	if _, body := get("/return"); body != "{env.CADDY_HA_TEST_SECRET} {file./etc/hostname}" {
		t.Errorf("/return: %q", body)
	}
	if resp, _ := get("/redirect"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/to/{env.CADDY_HA_TEST_SECRET}" {
		t.Errorf("/redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := get("/denied"); resp.StatusCode != http.StatusForbidden || body != errorBody {
		t.Errorf("/denied: %d %q, want the errorfile's body %q", resp.StatusCode, body, errorBody)
	}
}

// haproxyWord writes v as one HAProxy word that HAProxy reads as v: in
// single quotes, where nothing is interpreted, a single quote as \'.
func haproxyWord(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// A block list of 20,000 addresses in one ACL is Caddy's remote_ip
// matcher, which Caddy loads and which denies (http-request deny) or
// drops (tcp-request connection reject) the listed peer alone: as an
// expression it was past the 100,000 code points Caddy's expression
// matcher compiles (it adapted, then did not load; then it was refused).
func TestHAProxyBlockListLoads(t *testing.T) {
	app := startRecordingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	for _, rule := range []string{"http-request deny if blocked", "tcp-request connection reject if blocked"} {
		addr := loopback.FreeAddr()
		cfg := strings.NewReplacer("127.0.0.1:8080", addr, "127.0.0.1:9000", app.addr,
			"    http-request deny if blocked", "    acl blocked src 127.0.0.2\n    "+rule).Replace(blocklist.Config(400, 50))
		_, caddyfileText, _ := runHAProxyConfigWarned(t, cfg) // tcp-request connection's warning: Caddy reads a request first
		if !strings.Contains(caddyfileText, " remote_ip 10.0.0.0 10.0.0.1 ") {
			t.Errorf("%s: the block list is no remote_ip matcher:\n%.2000s", rule, caddyfileText)
		}
		for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
			status := 0
			if resp, err := client.Get("http://" + addr + "/"); err == nil {
				resp.Body.Close()
				status = resp.StatusCode
			}
			want := map[string]int{"127.0.0.1": http.StatusOK, "127.0.0.2": http.StatusForbidden}[from]
			if from == "127.0.0.2" && strings.HasPrefix(rule, "tcp-request") {
				want = 0 // no answer: the connection closed
			}
			if status != want {
				t.Errorf("%s: from %s: %d, want %d (0: no answer)", rule, from, status, want)
			}
		}
	}
}

// The adapter on a block list of 2,000 and 20,000 lines of 50 addresses:
// time and memory grow linearly (issue 27.5: quadratic before, a scan of
// the configuration per ACL line). bench/haproxyadapt compares it with
// haproxy -c.
func BenchmarkHAProxyAdaptBlockList(b *testing.B) {
	for _, lines := range []int{2000, 20000} {
		cfg := []byte(blocklist.Config(lines, 50))
		b.Run(fmt.Sprint(lines, "-lines"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := (HAProxyAdapter{}).Adapt(cfg, map[string]any{"filename": "blocklist.cfg"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Whatever the configuration, the adapter gives JSON that Caddy's own
// Caddyfile adapter gave for the translation, or refuses with a file and
// line; never a translation that does not adapt, and never a panic. The
// seeds (every golden and corpus configuration, and the hostile values
// above) run in make test; make fuzz looks for more.
func FuzzHAProxyAdapt(f *testing.F) {
	files, _ := filepath.Glob("../haproxy/testdata/*.cfg")
	corpus, _ := filepath.Glob("../haproxy/testdata/corpus/*.cfg")
	for _, file := range append(files, corpus...) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, v := range []string{`ends in a backslash\`, `holds \" a quote`, "<<END", "{env.HOME}", "back`tick\\\"", "{$HOME}"} {
		f.Add("defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\nfrontend f\n    bind :8080\n" +
			"    http-response set-header X-V " + haproxyWord(v) + "\n    default_backend b\nbackend b\n    server s 127.0.0.1:9000\n")
	}
	f.Fuzz(func(t *testing.T, cfg string) {
		out, _, err := HAProxyAdapter{}.Adapt([]byte(cfg), map[string]any{"filename": "f.cfg"})
		switch {
		case err != nil && strings.Contains(err.Error(), "does not adapt"):
			t.Fatalf("a translation that does not adapt: %v", err)
		case err != nil && !strings.HasPrefix(err.Error(), "f.cfg:"):
			t.Fatalf("a refusal without its line: %v", err)
		case err == nil && !json.Valid(out):
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

// Issue 27.4: an approximation is a warning that names its file and line,
// carried by value to caddy adapt (and printed by caddy ha migrate), as
// well as a comment in the Caddyfile.
func TestHAProxyApproximationsAreWarnings(t *testing.T) {
	cfg := "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n" +
		"frontend web\n    bind 127.0.0.1:8080\n    option http-server-close\n    option forwardfor\n    http-request del-header X-Forwarded-Proto\n    http-request del-header X-Forwarded-Host\n    default_backend app\n" +
		"backend app\n    option http-pretend-keepalive\n    server a 127.0.0.1:9000\n"
	_, warnings, err := HAProxyAdapter{}.Adapt([]byte(cfg), map[string]any{"filename": "w.cfg"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0].File != "w.cfg" || warnings[0].Line != 8 ||
		!strings.HasPrefix(warnings[0].Message, "option http-server-close: Caddy keeps its connections to the servers alive") {
		t.Fatalf("warnings %+v, want one for w.cfg:8 (option http-server-close; http-pretend-keepalive is ignored, not approximated)", warnings)
	}
}

// A bind's address and port from the environment (a container's
// "${BIND_ADDR-0.0.0.0}:${PORT-8080}") are read by Caddy from its
// environment when it reads the Caddyfile: the site listens there, with
// the servers option of that listener (timeout client's read_timeout).
// The backend is on ::1, so that the translation holds 127.0.0.1 only if
// it holds the environment's value.
func TestHAProxyAdapterBindFromTheEnvironment(t *testing.T) {
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the backend")
	}))
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no ::1 here: %v", err)
	}
	backend.Listener = ln
	backend.Start()
	defer backend.Close()
	addr := loopback.FreeAddr()
	host, port, _ := net.SplitHostPort(addr)
	t.Setenv("CADDY_HA_TEST_BIND_ADDR", host)
	t.Setenv("CADDY_HA_TEST_PORT", port)
	adapted, text := runHAProxyConfig(t, `defaults
    mode http
    timeout connect 2s
    timeout client 7s
    timeout server 10s

frontend web
    bind "${CADDY_HA_TEST_BIND_ADDR-0.0.0.0}:${CADDY_HA_TEST_PORT-8080}"
    default_backend app

backend app
    server app1 `+strings.TrimPrefix(backend.URL, "http://")+"\n")
	if !strings.Contains(text, "servers {$CADDY_HA_TEST_BIND_ADDR:0.0.0.0}:{$CADDY_HA_TEST_PORT:8080} {") || strings.Contains(text, ":"+port) {
		t.Errorf("the bind is not Caddy's references to the environment:\n%s", text)
	}
	if !strings.Contains(string(adapted), `"listen":["`+addr+`"]`) || !strings.Contains(string(adapted), `"read_timeout":7000000000`) {
		t.Errorf("the server does not listen at %s with its servers option:\n%s", addr, adapted)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); string(body) != "from the backend" {
		t.Errorf("got %q", body)
	}
}
