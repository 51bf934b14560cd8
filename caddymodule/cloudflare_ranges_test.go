package caddymodule

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/status"
)

// rangeLists serves Cloudflare-style lists on loopback; what it serves can
// be changed while it runs, and its answers held back.
type rangeLists struct {
	mu        sync.Mutex
	v4, v6    string
	status    int
	held      chan struct{} // while set, answers wait until it is closed
	answered  time.Time     // when a v6 list, the end of a download, was last answered
	abandoned []abandonment
	fetches   atomic.Int64
	url       string
}

// abandonment is a request the client gave up on: how long after it
// arrived, and after the last download before it was answered.
type abandonment struct{ sinceReceived, sinceAnswered time.Duration }

func serveRangeLists(t testing.TB, v4, v6 string) *rangeLists {
	l := &rangeLists{v4: v4, v6: v6, status: 200}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received := time.Now()
		l.mu.Lock()
		body, status, held, answered := l.v4, l.status, l.held, l.answered
		if r.URL.Path == "/ips-v6" {
			body = l.v6
		}
		l.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
				l.mu.Lock()
				l.abandoned = append(l.abandoned, abandonment{time.Since(received), time.Since(answered)})
				l.mu.Unlock()
				return
			}
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
		if r.URL.Path == "/ips-v6" {
			l.mu.Lock()
			l.answered = time.Now() // before the client can have the answer: it is sent as the handler returns
			l.mu.Unlock()
		}
		l.fetches.Add(1)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	l.url = "http://" + ln.Addr().String()
	return l
}

func (l *rangeLists) set(v4, v6 string, status int) {
	l.mu.Lock()
	l.v4, l.v6, l.status = v4, v6, status
	l.mu.Unlock()
}

// hold makes answers wait until release.
func (l *rangeLists) hold() {
	l.mu.Lock()
	l.held = make(chan struct{})
	l.mu.Unlock()
}

func (l *rangeLists) release() {
	l.mu.Lock()
	close(l.held)
	l.held = nil
	l.mu.Unlock()
}

func (l *rangeLists) abandonedAfter() []abandonment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]abandonment(nil), l.abandoned...)
}

func provisionRanges(t testing.TB, c *CloudflareRanges) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Cleanup()
		cancel()
	})
}

func rangesText(c *CloudflareRanges) string {
	var s []string
	for _, p := range c.GetIPRanges(nil) {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// It downloads, saves (in a directory it creates) and refreshes the lists;
// a failed, malformed or empty download keeps the last good set, and the
// file too.
func TestCloudflareRangesDownloads(t *testing.T) {
	lists := serveRangeLists(t, "173.245.48.0/20\n103.21.244.0/22\n", "2400:cb00::/32\n")
	file := filepath.Join(t.TempDir(), "data", "caddy", "cf.txt")
	c := &CloudflareRanges{IPv4URL: lists.url + "/ips-v4", IPv6URL: lists.url + "/ips-v6", File: file,
		Refresh: caddy.Duration(30 * time.Millisecond), Timeout: caddy.Duration(200 * time.Millisecond)}
	provisionRanges(t, c)
	good := "173.245.48.0/20 103.21.244.0/22 2400:cb00::/32"
	var saved []byte
	poll.Until(t, 5*time.Second, "the first download, saved", func() bool {
		saved, _ = os.ReadFile(file)
		return rangesText(c) == good && len(saved) > 0
	})
	if !strings.Contains(string(saved), "173.245.48.0/20") || !strings.Contains(string(saved), "2400:cb00::/32") {
		t.Fatalf("the saved file:\n%s", saved)
	}

	for _, bad := range []struct {
		name, v4, v6 string
		status       int
	}{
		{"garbage", "<html>blocked</html>\n", "2400:cb00::/32\n", 200},
		{"empty", "", "", 200},
		{"v6 in the v4 list", "2400:cb00::/32\n", "2400:cb00::/32\n", 200},
		{"half garbage", "173.245.48.0/20\n10.0.0.0/8 extra\n", "2400:cb00::/32\n", 200},
		{"server error", "173.245.48.0/20\n", "2400:cb00::/32\n", 500},
	} {
		lists.set(bad.v4, bad.v6, bad.status)
		before := lists.fetches.Load()
		poll.Until(t, 5*time.Second, bad.name+": two more refreshes", func() bool { return lists.fetches.Load() >= before+2 })
		if got := rangesText(c); got != good {
			t.Fatalf("%s: the ranges became %q", bad.name, got)
		}
		if now, _ := os.ReadFile(file); string(now) != string(saved) {
			t.Fatalf("%s: the saved file changed:\n%s", bad.name, now)
		}
	}
	lists.set("198.51.100.0/24\n", "2001:db8::/32\n", 200)
	poll.Until(t, 5*time.Second, "the new lists", func() bool { return rangesText(c) == "198.51.100.0/24 2001:db8::/32" })
}

// A download that hangs is given up after the timeout; the last good set
// stays, and the next refresh still comes. Without the timeout the first
// hanging download would never end.
func TestCloudflareRangesHangingDownload(t *testing.T) {
	lists := serveRangeLists(t, "173.245.48.0/20\n", "2400:cb00::/32\n")
	timeout := 300 * time.Millisecond
	c := &CloudflareRanges{IPv4URL: lists.url + "/ips-v4", IPv6URL: lists.url + "/ips-v6", File: filepath.Join(t.TempDir(), "cf.txt"),
		Refresh: caddy.Duration(20 * time.Millisecond), Timeout: caddy.Duration(timeout)}
	provisionRanges(t, c)
	good := "173.245.48.0/20 2400:cb00::/32"
	poll.Until(t, 5*time.Second, "the first download", func() bool { return rangesText(c) == good })

	lists.set("198.51.100.0/24\n", "2001:db8::/32\n", 200)
	lists.hold()
	poll.Until(t, 10*time.Second, "two hanging downloads given up", func() bool { return len(lists.abandonedAfter()) >= 2 })
	for _, a := range lists.abandonedAfter() {
		// The client starts its clock after the last download before it
		// was answered, and before its request arrives: a timeout applied
		// gives up at least the timeout after the one, and at most about
		// the timeout after the other.
		if a.sinceAnswered < timeout || a.sinceReceived > timeout+2*time.Second {
			t.Errorf("a download was given up %v after the last answer and %v after it arrived, want the timeout, %v",
				a.sinceAnswered, a.sinceReceived, timeout)
		}
	}
	if got := rangesText(c); got != good {
		t.Fatalf("while downloads hung, the ranges became %q", got)
	}
	lists.release()
	poll.Until(t, 5*time.Second, "the next refresh", func() bool { return rangesText(c) == "198.51.100.0/24 2001:db8::/32" })
}

// A failed download is logged, with the set it keeps.
func TestCloudflareRangesFailureLogged(t *testing.T) {
	lists := serveRangeLists(t, "173.245.48.0/20\n", "2400:cb00::/32\n")
	lists.set("173.245.48.0/20\n", "2400:cb00::/32\n", http.StatusServiceUnavailable)
	src := "cloudflare_ranges {\n\t\t\tipv4_url " + lists.url + "/ips-v4\n\t\t\tipv6_url " + lists.url + "/ips-v6\n\t\t\tfile " +
		filepath.Join(t.TempDir(), "cf.txt") + "\n\t\t}"
	tc := startCaddy(t, nil, "", "forwarded {\n\t\tcloudflare "+src+"\n\t}\n\trespond ok")
	var lines []string
	poll.Until(t, 5*time.Second, "the failure to be logged", func() bool {
		lines = tc.logLines("downloading Cloudflare's ranges failed")
		return len(lines) > 0
	})
	for _, want := range []string{`"level":"warn"`, `"logger":"http.ip_sources.cloudflare_ranges"`, "status 503", `"ranges_kept":0`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the log line lacks %s: %s", want, lines[0])
		}
	}
	// What the operator sees: no ranges, never refreshed, the failure.
	file := strings.Fields(src[strings.Index(src, "file "):])[1]
	var set *status.CloudflareSet
	for _, s := range viewOf(t, tc.adminGet("/ha/status")).CloudflareRanges {
		if s.File == file {
			set = &s
		}
	}
	if set == nil || set.Ranges != 0 || set.RefreshedAt != nil || set.Failures < 1 || !strings.Contains(set.LastError, "503") || set.FailedAt == nil {
		t.Errorf("the status view's set: %+v", set)
	}
	if v := metricValue(tc, `caddy_ha_cloudflare_ranges{file="`+file+`"}`); v != 0 {
		t.Errorf("caddy_ha_cloudflare_ranges %v", v)
	}
	if v := metricValue(tc, `caddy_ha_cloudflare_refreshed_timestamp_seconds{file="`+file+`"}`); v != 0 {
		t.Errorf("caddy_ha_cloudflare_refreshed_timestamp_seconds %v before any download", v)
	}
	if v := counterValue(tc, `caddy_ha_cloudflare_refresh_failures_total{file="`+file+`"}`); v < 1 {
		t.Errorf("caddy_ha_cloudflare_refresh_failures_total %v", v)
	}
}

// With downloads off it reads the shared file, again when it changes, and
// keeps the last good set when it turns bad.
func TestCloudflareRangesSharedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cf.txt")
	// write replaces the file as Save does, by renaming a new one over
	// it. The new one keeps the old one's modification time, as a rewrite
	// within the clock's resolution would: with the same size, only that
	// it is another file tells.
	write := func(text string) {
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if old, err := os.Stat(file); err == nil {
			if err := os.Chtimes(tmp, old.ModTime(), old.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("# ipv4\n173.245.48.0/20\n# ipv6\n2400:cb00::/32\n")
	tc := startCaddy(t, nil, "", "respond ok") // for its log, where the set logs
	c := &CloudflareRanges{File: file, DisableDownloads: true, Refresh: caddy.Duration(20 * time.Millisecond),
		IPv4URL: "http://127.0.0.1:1/never", IPv6URL: "http://127.0.0.1:1/never"}
	provisionRanges(t, c)
	if got := rangesText(c); got != "173.245.48.0/20 2400:cb00::/32" {
		t.Fatalf("read at start: %q", got)
	}
	write("# ipv4\n198.51.100.0/24\n# ipv6\n2a06:98c0::/29\n") // the same size
	poll.Until(t, 5*time.Second, "the changed file", func() bool { return rangesText(c) == "198.51.100.0/24 2a06:98c0::/29" })
	write("# ipv4\nnot a range at all\n# ipv6\n2001:db8::/32\n")
	// Its refusal is logged, as it is made; the set's fields belong to its
	// goroutine.
	poll.Until(t, 5*time.Second, "the bad file refused", func() bool {
		return len(tc.logLines("reading Cloudflare's ranges failed")) > 0
	})
	if got := rangesText(c); got != "198.51.100.0/24 2a06:98c0::/29" {
		t.Fatalf("a bad file replaced the good set: %q", got)
	}
	// The set's age is the good copy's: when the instance keeping it saved it.
	st := c.shared.state()
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ranges != 2 || st.From != "file (downloads off)" || st.RefreshedAt == nil || !st.RefreshedAt.Equal(info.ModTime()) || st.Failures < 1 {
		t.Errorf("the set's state %+v (file modified %v)", st, info.ModTime())
	}
}

// End to end: a server whose trusted_proxies are Cloudflare's ranges, served
// from loopback, believes CF-Connecting-IP from them; before the ranges are
// loaded it trusts nobody.
func TestCloudflareRangesTrustCFConnectingIP(t *testing.T) {
	lists := serveRangeLists(t, "127.0.0.0/8\n", "2400:cb00::/32\n")
	lists.hold() // the first download, until the test has looked
	backend := echoBackend(t)
	src := "cloudflare_ranges {\n\t\t\tipv4_url " + lists.url + "/ips-v4\n\t\t\tipv6_url " + lists.url + "/ips-v6\n\t\t\tfile " +
		filepath.Join(t.TempDir(), "cf.txt") + "\n\t\t\trefresh 1h\n\t\t}"
	tc := startCaddy(t, nil, "", `forwarded {
		cloudflare `+src+`
	}
	reverse_proxy `+backend)
	if got, _ := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\nCF-Connecting-IP: 198.51.100.99"); got["X-Forwarded-For"][0] != "127.0.0.1" {
		t.Fatalf("before the ranges loaded, CF-Connecting-IP was believed: %v", got)
	}
	lists.release()
	poll.Until(t, 5*time.Second, "the ranges to load", func() bool {
		got, _ := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\nCF-Connecting-IP: 198.51.100.99")
		return len(got["X-Forwarded-For"]) == 1 && got["X-Forwarded-For"][0] == "198.51.100.99"
	})
}
