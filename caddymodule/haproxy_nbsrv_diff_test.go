package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// nbsrv and monitor fail beside HAProxy 2.6, as the corpus's
// maintenance-page.cfg and monitor-disable-on-404.cfg use them, with the
// named backend's servers going down: b's checks fail, then a stops. While
// app has a server up, both proxies send to it and answer the monitor
// URI 200; once none is, both send every request to the maintenance
// backend and answer the monitor URI 503 with HAProxy's page; a started
// again brings both back.
func TestHAProxyDifferentialNbsrv(t *testing.T) {
	pair := &checkPair{t: t, proxies: []*checkProxy{{name: "haproxy"}, {name: "caddy-ha"}}}
	configFor := func(p *checkProxy) string {
		p.a, p.b = newCheckedBackend(t, "a"), newCheckedBackend(t, "b")
		p.addr = loopback.FreeAddr()
		return fmt.Sprintf(`defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s

frontend shop
    bind %s
    monitor-uri /alive
    acl app_down nbsrv(app) eq 0
    acl site_dead nbsrv(app) lt 1
    monitor fail if site_dead
    use_backend maintenance if app_down
    default_backend app

backend app
    option httpchk
    http-check expect status 200
    default-server inter 200ms fall 3 rise 2
    server a %s check
    server b %s check

backend maintenance
    http-request return status 503 content-type text/plain string "down for maintenance"
`, p.addr, p.a.addr, p.b.addr)
	}
	hap, ch := pair.proxies[0], pair.proxies[1]
	startHAProxy(t, configFor(hap), hap.addr)
	runHAProxyConfig(t, configFor(ch))

	client := &http.Client{Timeout: 10 * time.Second}
	const (
		ready       = `200 text/html no-cache "<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n"`
		unavailable = `503 text/html no-cache "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n"`
		maintenance = `503 text/plain  "down for maintenance"`
	)
	// answers waits until each proxy answers path as want.
	answers := func(what, path, want string) {
		t.Helper()
		pair.each(func(p *checkProxy) {
			var got string
			poll.Until(t, 15*time.Second, fmt.Sprintf("%s with %s: %s answered %s", p.name, what, path, want), func() bool {
				got = answerOf(client, "http://"+p.addr+path)
				return got == want
			})
		})
	}

	pair.turns("both up", "a", "b")
	answers("both up", "/alive", ready)
	pair.answerChecks(checkStep{http.StatusServiceUnavailable, "", []string{"a"}})
	answers("b down", "/alive", ready)

	pair.each(func(p *checkProxy) { p.a.stop() })
	answers("a stopped too", "/", maintenance)
	answers("a stopped too", "/alive", unavailable)

	pair.each(func(p *checkProxy) { p.a.start() })
	pair.turns("a started again", "a")
	answers("a started again", "/alive", ready)
}

// answerOf is the status, Content-Type, Cache-Control and body of url's
// answer.
func answerOf(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
}
