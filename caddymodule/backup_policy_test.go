package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// fakeUpstream is an upstream for backupChoice: up (healthy) or not, full
// (at its limit of requests) or not.
type fakeUpstream struct {
	name     string
	up, full bool
}

// fakeRoundRobin takes the available upstreams of a group in turns, as
// Caddy's round_robin does.
func fakeRoundRobin() func([]*fakeUpstream) *fakeUpstream {
	turn := 0
	return func(group []*fakeUpstream) *fakeUpstream {
		for range group {
			turn++
			if u := group[turn%len(group)]; u.up && !u.full {
				return u
			}
		}
		return nil
	}
}

// lb_policy backup's choice: the primaries in turns while one is up; the
// first backup up (in order) only when none is, or all the backups in
// turns with all_backups; a primary that is up but full holds the request
// rather than sending it to a backup; a primary the policy takes none of
// (weight 0) counts as down.
func TestBackupChoice(t *testing.T) {
	a, b := &fakeUpstream{name: "a"}, &fakeUpstream{name: "b"}
	s1, s2 := &fakeUpstream{name: "s1"}, &fakeUpstream{name: "s2"}
	primaries, backups := []*fakeUpstream{a, b}, []*fakeUpstream{s1, s2}
	up := func(u *fakeUpstream) bool { return u.up }
	full := func(u *fakeUpstream) bool { return u.full }
	for _, tt := range []struct {
		name       string
		down, full []*fakeUpstream
		all        bool
		want       string // the names chosen by 6 selections
	}{
		{name: "all up", want: "b a b a b a"},
		{name: "a down", down: []*fakeUpstream{a}, want: "b b b b b b"},
		{name: "primaries down", down: []*fakeUpstream{a, b}, want: "s1 s1 s1 s1 s1 s1"},
		{name: "primaries and s1 down", down: []*fakeUpstream{a, b, s1}, want: "s2 s2 s2 s2 s2 s2"},
		{name: "all down", down: []*fakeUpstream{a, b, s1, s2}, want: "- - - - - -"},
		{name: "all backups", down: []*fakeUpstream{a, b}, all: true, want: "s2 s1 s2 s1 s2 s1"},
		{name: "all backups, s2 down", down: []*fakeUpstream{a, b, s2}, all: true, want: "s1 s1 s1 s1 s1 s1"},
		{name: "all backups, primaries up", all: true, want: "b a b a b a"},
		{name: "a down, b full", down: []*fakeUpstream{a}, full: []*fakeUpstream{b}, want: "- - - - - -"},
		{name: "primaries down, s1 full", down: []*fakeUpstream{a, b}, full: []*fakeUpstream{s1}, want: "- - - - - -"},
		{name: "primaries down, s1 full, all backups", down: []*fakeUpstream{a, b}, full: []*fakeUpstream{s1}, all: true, want: "s2 s2 s2 s2 s2 s2"},
	} {
		for _, u := range []*fakeUpstream{a, b, s1, s2} {
			u.up, u.full = !slices.Contains(tt.down, u), slices.Contains(tt.full, u)
		}
		balance := fakeRoundRobin()
		var balanceBackups func([]*fakeUpstream) *fakeUpstream
		if tt.all {
			balanceBackups = fakeRoundRobin()
		}
		var got []string
		for range 6 {
			name := "-"
			if u := backupChoice(primaries, backups, up, full, balance, balanceBackups); u != nil {
				name = u.name
			}
			got = append(got, name)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: chose %s, want %s", tt.name, strings.Join(got, " "), tt.want)
		}
	}

	// A policy that takes none of the primaries though they are up (as
	// weighted_round_robin with weight 0): the backups serve.
	for _, u := range []*fakeUpstream{a, b, s1, s2} {
		u.up, u.full = true, false
	}
	never := func([]*fakeUpstream) *fakeUpstream { return nil }
	if u := backupChoice(primaries, backups, up, full, never, nil); u != s1 {
		t.Errorf("a policy that takes no primary: chose %v, want s1", u)
	}
}

// lb_policy backup's Caddyfile: every option, and what is refused with
// its line.
func TestBackupPolicyCaddyfile(t *testing.T) {
	adapt := func(block string) (string, error) {
		caddyfile := "http://127.0.0.1:1 {\n\treverse_proxy 127.0.0.1:2 127.0.0.1:3 127.0.0.1:4 {\n\t\tlb_policy backup " + block + "\n\t}\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		return string(out), err
	}
	got, err := adapt("{\n\t\t\tbackups 127.0.0.1:3 127.0.0.1:4\n\t\t\tprimary_policy weighted_round_robin 3 1\n\t\t\tall_backups\n\t\t\tbackup_policy first\n\t\t}")
	if want := `"selection_policy":{"all_backups":true,"backup_policy":{"policy":"first"},"backups":["127.0.0.1:3","127.0.0.1:4"],"policy":"backup","primary_policy":{"policy":"weighted_round_robin","weights":[3,1]}}`; err != nil ||
		!strings.Contains(got, want) {
		t.Errorf("adapted to %s (%v), want %s", got, err, want)
	}
	for _, tt := range []struct{ block, want string }{
		{"{\n\t\t\tprimary_policy first\n\t\t}", "lb_policy backup: backups names no upstream: without backups, use primary_policy itself, at Caddyfile:5"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tbackups 127.0.0.1:4\n\t\t}", "duplicate backups option, at Caddyfile:5"},
		{"{\n\t\t\tbackups 127.0.0.1:3 127.0.0.1:3\n\t\t}", "backups names 127.0.0.1:3 twice, at Caddyfile:4"},
		{"{\n\t\t\tbackups http://127.0.0.1:3\n\t\t}", `backups "http://127.0.0.1:3" is not an upstream's dial address`},
		{"{\n\t\t\tbackups 127.0.0.1\n\t\t}", `backups "127.0.0.1" is not an upstream's dial address`},
		{"{\n\t\t\tbackups 127.0.0.1:1-2\n\t\t}", `backups "127.0.0.1:1-2" is not an upstream's dial address`},
		{"{\n\t\t\tbackups\n\t\t}", "wrong argument count"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tbackup_policy first\n\t\t}", "lb_policy backup: backup_policy is used only with all_backups (without it the first backup up gets every request), at Caddyfile:5"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tall_backups yes\n\t\t}", "all_backups: too many arguments, at Caddyfile:5"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tprimary_policy first\n\t\t\tprimary_policy first\n\t\t}", "duplicate primary_policy option, at Caddyfile:6"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tprimary_policy nonesuch\n\t\t}", "nonesuch"},
		{"{\n\t\t\tbackups 127.0.0.1:3\n\t\t\tfirst\n\t\t}", "unrecognized lb_policy backup option 'first', at Caddyfile:5"},
		{"127.0.0.1:3", "wrong argument count"},
	} {
		if _, err := adapt(tt.block); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}
}

// testBackends starts an HTTP server per name that answers with X-Server:
// its name; its check (GET /health, or OPTIONS, HAProxy's default) fails
// with 503 while down[name] is set. addr maps each name to its address.
func testBackends(t *testing.T, names ...string) (addr map[string]string, down map[string]*atomic.Bool) {
	t.Helper()
	addr, down = map[string]string{}, map[string]*atomic.Bool{}
	for _, name := range names {
		d := new(atomic.Bool)
		down[name] = d
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (r.URL.Path == "/health" || r.Method == http.MethodOptions) && d.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("X-Server", name)
		})}
		go srv.Serve(ln) //nolint:errcheck // until Close
		t.Cleanup(func() { srv.Close() })
		addr[name] = ln.Addr().String()
	}
	return addr, down
}

// setDown marks the named backends down, the others up.
func setDown(down map[string]*atomic.Bool, names ...string) {
	for name, d := range down {
		d.Store(slices.Contains(names, name))
	}
}

// serverOf asks url and returns the X-Server that answered, or what failed.
func serverOf(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Server")
}

// waitForTurns waits until ask's servers are want, in turns: twice
// each, in the same order both times, in the last 2*len(want) requests;
// then it checks that the next requests keep those turns.
func waitForTurns(t *testing.T, what string, ask func() string, want ...string) {
	t.Helper()
	n := len(want)
	var window []string
	poll.Until(t, 15*time.Second, fmt.Sprintf("%s to send to %v in turns", what, want), func() bool {
		window = append(window, ask())
		if len(window) > 2*n {
			window = window[1:]
		}
		return len(window) == 2*n && slices.Equal(window[:n], window[n:]) &&
			slices.Equal(slices.Sorted(slices.Values(window[:n])), slices.Sorted(slices.Values(want)))
	})
	for i := range 3 * n {
		if got := ask(); got != window[i%n] {
			t.Fatalf("%s: request %d after settling on %v went to %s", what, i, window[:n], got)
		}
	}
}

// split is how many of n requests each server answered.
func split(n int, ask func() string) map[string]int {
	got := map[string]int{}
	for range n {
		got[ask()]++
	}
	return got
}

// lb_policy backup in a real Caddy with active health checks, on real
// HTTP backends: the primaries in turns, the first backup only when both
// primaries fail their checks, the next backup when it fails too, and
// back; with all_backups, both backups in turns; a weighted policy for
// the primaries; a backup that is not an upstream logged.
func TestBackupPolicyThroughCaddy(t *testing.T) {
	addr, down := testBackends(t, "a", "b", "s1", "s2")
	site := func(policy string) string {
		return fmt.Sprintf(`reverse_proxy %s %s %s %s {
		health_uri /health
		health_interval 50ms
		health_fails 1
		health_passes 1
		lb_policy backup {
			backups %s %s
			%s
		}
	}`, addr["s1"], addr["a"], addr["s2"], addr["b"], addr["s1"], addr["s2"], policy)
	}
	tc := startCaddy(t, nil, "", site("primary_policy round_robin"))
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func() string { return serverOf(client, tc.url("/")) }
	for _, step := range []struct {
		down []string
		want []string
	}{
		{nil, []string{"a", "b"}},
		{[]string{"a"}, []string{"b"}},
		{[]string{"a", "b"}, []string{"s1"}},
		{[]string{"a", "b", "s1"}, []string{"s2"}},
		{[]string{"a", "b", "s2"}, []string{"s1"}},
		{[]string{"b"}, []string{"a"}},
		{nil, []string{"a", "b"}},
	} {
		setDown(down, step.down...)
		waitForTurns(t, fmt.Sprintf("caddy with %v down", step.down), ask, step.want...)
	}

	tc.load(nil, "", site("all_backups"))
	setDown(down, "a", "b")
	waitForTurns(t, "caddy with all_backups and the primaries down", ask, "s1", "s2")
	setDown(down)
	waitForTurns(t, "caddy with all_backups and the primaries up", ask, "a", "b")

	tc.load(nil, "", site("primary_policy weighted_round_robin 3 1"))
	if got := split(40, ask); got["a"] != 30 || got["b"] != 10 {
		t.Errorf("weighted_round_robin 3 1 for a and b: %v of 40, want 30 and 10", got)
	}

	if len(tc.logLines("backups that are not upstreams")) > 0 {
		t.Fatal("a missing backup logged before one was missing")
	}
	tc.load(nil, "", fmt.Sprintf("reverse_proxy %s {\n\t\tlb_policy backup {\n\t\t\tbackups 127.0.0.1:1\n\t\t}\n\t}", addr["a"]))
	if got := ask(); got != "a" {
		t.Errorf("with a backup that is not an upstream: served by %s, want a", got)
	}
	poll.Until(t, 5*time.Second, "the missing backup to be logged", func() bool {
		lines := tc.logLines("backups that are not upstreams")
		return len(lines) == 1 && strings.Contains(lines[0], `"missing":["127.0.0.1:1"]`)
	})
}
