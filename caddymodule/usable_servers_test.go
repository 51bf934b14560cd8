package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/poolcount"
)

// usable_servers' Caddyfile, as a matcher, and dynamic checked's name.
func TestUsableServersCaddyfile(t *testing.T) {
	adapt := func(site string) (string, error) {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:1 {\n"+site+"\n}\n"), nil)
		return string(out), err
	}
	got, err := adapt("\t@down usable_servers app lt 1\n\trespond @down 503\n\treverse_proxy {\n\t\tdynamic checked {\n\t\t\tservers 127.0.0.1:2\n\t\t\tname app\n\t\t}\n\t}")
	for _, want := range []string{`"usable_servers":{"compare":"lt","count":1,"name":"app"}`, `"name":"app","servers":["127.0.0.1:2"],"source":"checked"`} {
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("adapted to %s (%v), want %s", got, err, want)
		}
	}
	for _, tt := range []struct{ matcher, want string }{
		{"usable_servers app", "wrong argument count"},
		{"usable_servers app ne 1", `usable_servers: compare must be eq, lt, le, gt or ge, not "ne"`},
		{"usable_servers app eq one", "usable_servers: count must be a whole number, got one"},
		{"usable_servers app eq -1", "usable_servers: count must be a whole number, got -1"},
	} {
		if _, err := adapt("\t@m " + tt.matcher + "\n\trespond @m 503"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.matcher, err, tt.want)
		}
	}
}

// dynamic checked's count of servers up read by usable_servers in a real
// Caddy, as a matcher and in a CEL expression: it follows the servers
// going down and up; a reload's source publishes in place of the old
// one's, and a config without it publishes nothing.
func TestUsableServersThroughCaddy(t *testing.T) {
	a, b := newCheckedBackend(t, "a"), newCheckedBackend(t, "b")
	site := func(name string) string {
		return fmt.Sprintf(`@none expression `+"`"+`usable_servers("app") == 0`+"`"+`
	respond @none "maintenance" 503
	@one usable_servers app eq 1
	header @one X-Usable one
	reverse_proxy {
		dynamic checked {
			servers %s %s
			interval 100ms
			fall 1
			rise 1
			name %s
		}
	}`, a.addr, b.addr, name)
	}
	tc := startCaddy(t, nil, "", site("app"))
	client := &http.Client{Timeout: 5 * time.Second}
	answer := func() string {
		resp, err := client.Get(tc.url("/"))
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("X-Usable"))
	}
	waitForAnswer := func(what, want string) {
		t.Helper()
		poll.Until(t, 10*time.Second, what+": "+want, func() bool { return answer() == want })
	}
	waitForAnswer("both up", "200 ")
	b.stop()
	waitForAnswer("b down", "200 one")
	a.stop()
	waitForAnswer("a and b down", "503 ")
	a.start()
	waitForAnswer("a up again", "200 one")

	// A reload with other check settings (a new checker, its servers up
	// at the start) publishes its own count.
	tc.load(nil, "", strings.Replace(site("app"), "interval 100ms", "interval 150ms", 1))
	waitForAnswer("b still down after the reload", "200 one")
	if n, ok := poolcount.Usable("app"); !ok || n != 1 {
		t.Fatalf("app's count after the reload: %d, %v; want the new source's 1", n, ok)
	}
	tc.load(nil, "", site("other"))
	if _, ok := poolcount.Usable("app"); ok {
		t.Fatal("app is still published by a config that names its source other")
	}
	waitForAnswer("nothing publishes app: it counts 0", "503 ")
}
