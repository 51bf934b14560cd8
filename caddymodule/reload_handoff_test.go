package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// keptAliveLoad POSTs through url on conns kept-alive connections until
// stop, counting requests and keeping the errors (transport errors and
// statuses other than 200).
type keptAliveLoad struct {
	requests atomic.Int64
	mu       sync.Mutex
	errs     []error
	stop     chan struct{}
	wg       sync.WaitGroup
	tr       *http.Transport
}

func startKeptAliveLoad(url string, conns int) *keptAliveLoad {
	l := &keptAliveLoad{stop: make(chan struct{}), tr: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	client := &http.Client{Transport: l.tr, Timeout: 10 * time.Second}
	for range conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := client.Post(url, "application/json", strings.NewReader(`{"order":1}`))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
				}
				l.requests.Add(1)
			}
		}()
	}
	return l
}

// waitFor waits until n more requests completed.
func (l *keptAliveLoad) waitFor(t *testing.T, n int64) {
	t.Helper()
	from := l.requests.Load()
	poll.Until(t, 10*time.Second, fmt.Sprintf("%d more requests", n), func() bool { return l.requests.Load() >= from+n })
}

// finish stops the load and returns the errors.
func (l *keptAliveLoad) finish() []error {
	close(l.stop)
	l.wg.Wait()
	l.tr.CloseIdleConnections()
	return l.errs
}

// Five forced reloads while 32 kept-alive connections POST through Caddy:
// with reload_handoff no request fails, and the new config's server
// answers on connections the old one accepted. Stock Caddy's count is
// logged for comparison (bench/reload measures both side by side).
func TestReloadUnderKeptAliveLoad(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	site := "reverse_proxy " + strings.TrimPrefix(backend.URL, "http://")
	for _, tt := range []struct {
		name, opts string
	}{
		{"reload_handoff", "servers {\n\t\tlistener_wrappers {\n\t\t\treload_handoff\n\t\t}\n\t}"},
		{"stock", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := startCaddy(t, nil, tt.opts, site)
			handedOff := counterValue(tc, "caddy_ha_reload_handed_off_connections_total")
			load := startKeptAliveLoad(tc.url("/api/orders"), 32)
			for range 5 {
				load.waitFor(t, 300)
				tc.load(nil, tt.opts, site)
			}
			load.waitFor(t, 300)
			errs := load.finish()
			handed := counterValue(tc, "caddy_ha_reload_handed_off_connections_total") - handedOff
			t.Logf("%d requests, %d errors, %v connections handed off", load.requests.Load(), len(errs), handed)
			if tt.name == "stock" {
				return
			}
			for _, err := range errs {
				t.Errorf("client error across reloads: %v", err)
			}
			if handed == 0 {
				t.Error("no connection was handed off: the test proves nothing")
			}
		})
	}
}

func TestReloadHandoffCaddyfileErrors(t *testing.T) {
	for _, tt := range []struct{ wrapper, want string }{
		{"reload_handoff now", "wrong argument count or unexpected line ending after 'now', at Caddyfile:4"},
		{"reload_handoff {\n\t\t\t\tgrace 1s\n\t\t\t}", "reload_handoff takes no options, got 'grace', at Caddyfile:5"},
	} {
		caddyfile := "{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\t" + tt.wrapper + "\n\t\t}\n\t}\n}\nhttp://127.0.0.1:1 {\n\trespond ok\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.wrapper, err, tt.want)
		}
	}
}
