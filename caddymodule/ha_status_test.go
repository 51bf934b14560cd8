package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/status"
)

// statusSite is a site with a leader pool, a zone (on the ha app's
// store) and the status page at /status.
const statusSite = `handle /status {
		ha_status {
			refresh 2s
		}
	}
	edge_rate_limit {
		zone %s {
			match {
				not path /status
			}
			key {http.request.remote.host}
			events 2
			window 1m
		}
	}
	reverse_proxy {upstreams} {
		lb_policy leader {
			interval 50ms
		}
	}`

func statusSiteWith(zone string) string { return strings.Replace(statusSite, "%s", zone, 1) }

// A config reload that removes a leader pool, a zone and a store removes
// their series from /metrics and their sections from the view: before, a
// pool's caddy_ha_leader series outlived it.
func TestReloadRemovesTheSeriesOfWhatItRemoved(t *testing.T) {
	old, next := newCluster(t, 2, 2*time.Second, 200*time.Millisecond), newCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	oldState, err := old.WaitLeader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	tc := startCaddy(t, old, redisOption(srv, "reload-series:"), statusSiteWith("oldzone"))
	oldPool, oldStore := poolName(old), "redis "+srv.Addr+" db=0 prefix=reload-series:"
	poll.Until(t, 5*time.Second, "a leader in Caddy's view", func() bool {
		return strings.Contains(tc.adminGet("/metrics"), `caddy_ha_leader_current{pool="`+oldPool+`",upstream="`+old.Node(oldState.Leader).Addr()+`"} 1`)
	})
	for i := 0; i < 3; i++ {
		send(t, "GET", tc.url("/"))
	}
	before := tc.adminGet("/metrics")
	for _, series := range []string{`pool="` + oldPool + `"`, `zone="oldzone"`, `store="` + oldStore + `"`} {
		if !strings.Contains(before, series) {
			t.Fatalf("no series with %s before the reload:\n%s", series, before)
		}
	}

	tc.load(next, "", statusSiteWith("newzone")) // the memory store, another pool and zone
	if _, err := next.WaitLeader(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	send(t, "GET", tc.url("/"))
	after := tc.adminGet("/metrics")
	for _, series := range []string{`pool="` + oldPool + `"`, `zone="oldzone"`, `store="` + oldStore + `"`} {
		if strings.Contains(after, series) {
			t.Errorf("a series with %s outlived the reload that removed it:\n%s", series, grepLines(after, series))
		}
	}
	for _, series := range []string{`pool="` + poolName(next) + `"`, `zone="newzone"`, `store="memory"`} {
		if !strings.Contains(after, series) {
			t.Errorf("no series with %s after the reload", series)
		}
	}
	var v status.View
	if err := json.Unmarshal([]byte(tc.adminGet("/ha/status")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.LeaderPools) != 1 || v.LeaderPools[0].Pool != poolName(next) || len(v.RateLimitZones) != 1 ||
		v.RateLimitZones[0].Zone != "newzone" || len(v.Stores) != 1 || v.Stores[0].Store != "memory" {
		t.Errorf("the view after the reload: %+v", v)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The view on the admin API, the page's JSON and `caddy ha status` show
// the same state: the leader, the zone's decisions, the store.
func TestStatusViewAdminPageAndCommand(t *testing.T) {
	c := newCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	st, err := c.WaitLeader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Node(st.Leader).Addr()
	tc := startCaddy(t, c, "", statusSiteWith("viewzone"))
	poll.Until(t, 5*time.Second, "a leader in Caddy's view", func() bool {
		return viewOf(t, tc.adminGet("/ha/status")).LeaderPools[0].Leader == leader
	})
	for i := 0; i < 3; i++ { // 2 allowed, 1 limited
		send(t, "GET", tc.url("/"))
	}

	check := func(from string, v status.View) {
		t.Helper()
		if len(v.LeaderPools) != 1 || v.LeaderPools[0].Leader != leader || len(v.LeaderPools[0].Nodes) != 2 {
			t.Errorf("%s: leader pools %+v", from, v.LeaderPools)
		}
		if len(v.RateLimitZones) != 1 || v.RateLimitZones[0].Allowed != 2 || v.RateLimitZones[0].Limited != 1 ||
			v.RateLimitZones[0].Events != 2 || v.RateLimitZones[0].WindowSeconds != 60 || v.RateLimitZones[0].Store != "memory" {
			t.Errorf("%s: zones %+v", from, v.RateLimitZones)
		}
		if len(v.Stores) != 1 || !v.Stores[0].Up {
			t.Errorf("%s: stores %+v", from, v.Stores)
		}
	}
	check("admin /ha/status", viewOf(t, tc.adminGet("/ha/status")))
	check("page ?format=json", viewOf(t, send(t, "GET", tc.url("/status?format=json")).body))
	check("page Accept: application/json", viewOf(t, send(t, "GET", tc.url("/status"), "Accept", "application/json").body))
	var leaders []status.LeaderPool
	if err := json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &leaders); err != nil || len(leaders) != 1 || leaders[0].Leader != leader {
		t.Errorf("/ha/leader: %v %+v", err, leaders)
	}

	page := send(t, "GET", tc.url("/status"), "Accept", "text/html,application/xhtml+xml,application/json;q=0.9")
	if ct := page.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") ||
		!strings.Contains(page.body, `<meta http-equiv="refresh" content="2">`) ||
		!strings.Contains(page.body, `data-leader="`+leader+`"`) {
		t.Errorf("the page (%s):\n%s", ct, page.body)
	}
	if ans := send(t, "POST", tc.url("/status")); ans.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %d", ans.status)
	}

	out, err := runHACommand(t, "status", "--address", tc.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LEADER POOL " + poolName(c) + ": LEADER " + leader, "viewzone", "2 per 1m", "memory"} {
		if !strings.Contains(strings.ToUpper(out), strings.ToUpper(want)) {
			t.Errorf("caddy ha status lacks %q:\n%s", want, out)
		}
	}
	out, err = runHACommand(t, "status", "--json", "--address", tc.admin)
	if err != nil {
		t.Fatal(err)
	}
	check("caddy ha status --json", viewOf(t, out))
}

// `caddy ha status` says plainly when the admin API cannot be reached.
func TestHACommandWithoutAdminAPI(t *testing.T) {
	addr := loopback.FreeAddr() // nothing listens there
	_, err := runHACommand(t, "status", "--address", addr)
	if err == nil || !strings.Contains(err.Error(), "cannot read caddy-ha's status from the admin API at "+addr) ||
		!strings.Contains(err.Error(), "is Caddy running") {
		t.Errorf("error %v", err)
	}
}

// `caddy ha status` against a Caddy without caddy-ha says so.
func TestHACommandWithoutCaddyHA(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	addr := strings.TrimPrefix(other.URL, "http://")
	_, err := runHACommand(t, "status", "--address", addr)
	if err == nil || !strings.Contains(err.Error(), "has no /ha/status: is this Caddy built with caddy-ha?") {
		t.Errorf("error %v", err)
	}
}

// runHACommand runs `caddy ha <args>` as Caddy's command line builds it.
func runHACommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	registered, ok := caddycmd.Commands()["ha"]
	if !ok {
		t.Fatal("no ha command registered")
	}
	cmd := &cobra.Command{Use: "ha"}
	registered.CobraFunc(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func viewOf(t *testing.T, body string) status.View {
	t.Helper()
	var v status.View
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not the status view: %v\n%s", err, body)
	}
	return v
}

// ha_status's settings are checked at load time, with the line.
func TestHAStatusBadRefresh(t *testing.T) {
	for refresh, want := range map[string]string{
		"500ms": "ha_status: refresh must be at least 1s, or off, at Caddyfile:3",
		"soon":  "refresh: ",
	} {
		cf := "http://127.0.0.1:1 {\n\tha_status {\n\t\trefresh " + refresh + "\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refresh %s: %v, want %q", refresh, err, want)
		}
	}
}

// The page answers JSON only to a request that prefers it.
func TestHAStatusWantsJSON(t *testing.T) {
	for _, tt := range []struct {
		target, accept string
		json           bool
	}{
		{"/status", "", false},
		{"/status", "*/*", false},
		{"/status", "application/json", true},
		{"/status", "text/html,application/xhtml+xml,application/json;q=0.9", false},
		{"/status", "application/json;q=0, text/html", false},
		{"/status", "text/html;q=0.1, application/json", true},
		{"/status", "text/*;q=0.5, application/*", true},
		{"/status?format=json", "text/html", true},
		{"/status?format=html", "application/json", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x"+tt.target, nil)
		if tt.accept != "" {
			r.Header.Set("Accept", tt.accept)
		}
		if got := wantsJSON(r); got != tt.json {
			t.Errorf("%s with Accept %q: JSON %v, want %v", tt.target, tt.accept, got, tt.json)
		}
	}
}

// /metrics and /ha/status read while reloads build and tear down pools,
// zones and stores: every answer is whole (run with -race, as make test
// does, for the objects' publication).
func TestStatusAndMetricsDuringReloads(t *testing.T) {
	a, b := newCluster(t, 2, 2*time.Second, 200*time.Millisecond), newCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	tc := startCaddy(t, a, "", statusSiteWith("za"))
	done := make(chan struct{})
	failures := make(chan string, 1)
	go func() {
		defer close(failures)
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, path := range []string{"/metrics", "/ha/status"} {
				resp, err := http.Get("http://" + tc.admin + path)
				if err != nil {
					continue // the admin endpoint itself may restart
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failures <- fmt.Sprintf("%s: %d", path, resp.StatusCode)
					return
				}
			}
		}
	}()
	for i := range 6 {
		if i%2 == 0 {
			tc.load(b, "", statusSiteWith("zb"))
		} else {
			tc.load(a, "", statusSiteWith("za"))
		}
	}
	close(done)
	if f, ok := <-failures; ok {
		t.Fatal(f)
	}
}
