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
)

// rangeLists serves Cloudflare-style lists on loopback; what it serves can
// be changed while it runs.
type rangeLists struct {
	mu      sync.Mutex
	v4, v6  string
	delay   time.Duration
	status  int
	fetches atomic.Int64
	url     string
}

func serveRangeLists(t testing.TB, v4, v6 string) *rangeLists {
	l := &rangeLists{v4: v4, v6: v6, status: 200}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		body, delay, status := l.v4, l.delay, l.status
		if r.URL.Path == "/ips-v6" {
			body = l.v6
		}
		l.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
		l.fetches.Add(1)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	l.url = "http://" + ln.Addr().String()
	return l
}

func (l *rangeLists) set(v4, v6 string, status int, delay time.Duration) {
	l.mu.Lock()
	l.v4, l.v6, l.status, l.delay = v4, v6, status, delay
	l.mu.Unlock()
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

// It downloads, saves and refreshes the lists; a failed, malformed, empty or
// slow download keeps the last good set, and the file too.
func TestCloudflareRangesDownloads(t *testing.T) {
	lists := serveRangeLists(t, "173.245.48.0/20\n103.21.244.0/22\n", "2400:cb00::/32\n")
	file := filepath.Join(t.TempDir(), "cf.txt")
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
		delay        time.Duration
	}{
		{"garbage", "<html>blocked</html>\n", "2400:cb00::/32\n", 200, 0},
		{"empty", "", "", 200, 0},
		{"v6 in the v4 list", "2400:cb00::/32\n", "2400:cb00::/32\n", 200, 0},
		{"half garbage", "173.245.48.0/20\n10.0.0.0/8 extra\n", "2400:cb00::/32\n", 200, 0},
		{"server error", "173.245.48.0/20\n", "2400:cb00::/32\n", 500, 0},
		{"slow", "198.51.100.0/24\n", "2001:db8::/32\n", 200, time.Second},
	} {
		lists.set(bad.v4, bad.v6, bad.status, bad.delay)
		before := lists.fetches.Load()
		poll.Until(t, 5*time.Second, bad.name+": two more refreshes", func() bool {
			return lists.fetches.Load() >= before+2 || bad.delay > 0 && lists.fetches.Load() == before
		})
		if bad.delay > 0 {
			time.Sleep(3 * time.Duration(c.Timeout)) // the passage of time is what is tested: downloads that time out
		}
		if got := rangesText(c); got != good {
			t.Fatalf("%s: the ranges became %q", bad.name, got)
		}
		if now, _ := os.ReadFile(file); string(now) != string(saved) {
			t.Fatalf("%s: the saved file changed:\n%s", bad.name, now)
		}
	}
	lists.set("198.51.100.0/24\n", "2001:db8::/32\n", 200, 0)
	poll.Until(t, 5*time.Second, "the new lists", func() bool { return rangesText(c) == "198.51.100.0/24 2001:db8::/32" })
}

// With downloads off it reads the shared file, again when it changes, and
// keeps the last good set when it turns bad.
func TestCloudflareRangesSharedFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cf.txt")
	write := func(text string) {
		// A new modification time each write, even within the clock's
		// resolution.
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(time.Duration(len(text)) * time.Second)
		os.Chtimes(tmp, mt, mt)
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("# ipv4\n173.245.48.0/20\n# ipv6\n2400:cb00::/32\n")
	c := &CloudflareRanges{File: file, DisableDownloads: true, Refresh: caddy.Duration(20 * time.Millisecond),
		IPv4URL: "http://127.0.0.1:1/never", IPv6URL: "http://127.0.0.1:1/never"}
	provisionRanges(t, c)
	if got := rangesText(c); got != "173.245.48.0/20 2400:cb00::/32" {
		t.Fatalf("read at start: %q", got)
	}
	write("# ipv4\n198.51.100.0/24\n# ipv6\n2001:db8::/32\n")
	poll.Until(t, 5*time.Second, "the changed file", func() bool { return rangesText(c) == "198.51.100.0/24 2001:db8::/32" })
	write("# ipv4\nnot a range at all\n# ipv6\n2001:db8::/32\n")
	deadline := time.Now().Add(200 * time.Millisecond) // ten checks of the file
	for time.Now().Before(deadline) {
		if got := rangesText(c); got != "198.51.100.0/24 2001:db8::/32" {
			t.Fatalf("a bad file replaced the good set: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// End to end: a server whose trusted_proxies are Cloudflare's ranges, served
// from loopback, believes CF-Connecting-IP from them; before the ranges are
// loaded it trusts nobody.
func TestCloudflareRangesTrustCFConnectingIP(t *testing.T) {
	lists := serveRangeLists(t, "127.0.0.0/8\n", "2400:cb00::/32\n")
	lists.set("127.0.0.0/8\n", "2400:cb00::/32\n", 200, 500*time.Millisecond) // the first download takes a while
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
	poll.Until(t, 5*time.Second, "the ranges to load", func() bool {
		got, _ := rawRequest(t, tc.addr, "GET / HTTP/1.1\r\nHost: "+tc.addr+"\r\nCF-Connecting-IP: 198.51.100.99")
		return len(got["X-Forwarded-For"]) == 1 && got["X-Forwarded-For"][0] == "198.51.100.99"
	})
}
