package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

const leaderSite = `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 200ms
			fast_interval 20ms
			timeout 500ms
			hold %s
		}
	}`

// startWrites streams POSTs through the proxy, a new connection per write:
// a config reload closes idle keep-alive connections, which a client may be
// reusing at that moment.
func startWrites(url string, every, timeout time.Duration) *fakecluster.Writes {
	return fakecluster.StartWrites(url, every, timeout, &http.Transport{DisableKeepAlives: true})
}

// checkWrites fails for any 200 write not executed exactly once and any
// write executed twice; it returns the writes that failed (a transport
// error or another status) for the caller to judge.
func checkWrites(t *testing.T, results []fakecluster.WriteResult, c *fakecluster.Cluster) (failed []fakecluster.WriteResult) {
	t.Helper()
	ex := c.ExecutedIDs()
	for _, r := range results {
		switch {
		case r.Err != nil || r.Status != http.StatusOK:
			failed = append(failed, r)
		case ex[r.ID] != 1:
			t.Errorf("write %s answered 200 but executed %d times", r.ID, ex[r.ID])
		}
	}
	for id, n := range ex {
		if n > 1 {
			t.Errorf("write %s executed %d times", id, n)
		}
	}
	return failed
}

// Every request reaches the leader only: right after start (before the
// first probe answered) and across config reloads under load.
func TestLeaderOnlyAcrossStartAndReload(t *testing.T) {
	c := newCluster(t, 3, 3*time.Second, time.Second)
	// Fail over first, so that the first-listed node is the follower: a
	// proxy that sends anything before its first probes answered sends it
	// there. A third node hangs, so the first round of probes takes a probe
	// timeout (500ms) while writes already arrive.
	follower := c.Node("node-a")
	follower.Stop()
	var leader string
	poll.Until(t, 5*time.Second, "another node leads", func() bool {
		leader = c.State().Leader
		return leader != "" && leader != "node-a"
	})
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	hung := c.Node("node-b")
	if leader == "node-b" {
		hung = c.Node("node-c")
	}
	hung.Kill(fakecluster.KillHang)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "10s"))
	load := startWrites(tc.url("/api/orders"), 2*time.Millisecond, 5*time.Second)
	poll.Until(t, 5*time.Second, "writes flowing", func() bool { return load.Count() > 50 })
	for i := range 3 {
		// A new hold changes the config but not the probe settings.
		tc.load(c, "", fmt.Sprintf(leaderSite, fmt.Sprintf("%ds", 9-i)))
		n := load.Count()
		poll.Until(t, 5*time.Second, "writes after reload", func() bool { return load.Count() > n+50 })
	}
	results := load.Stop()

	if got := follower.Received(); got != 0 {
		t.Errorf("the follower received %d requests", got)
	}
	failed := checkWrites(t, results, c)
	for _, r := range failed {
		if r.Err == nil {
			t.Errorf("write %s answered %d", r.ID, r.Status)
		}
	}
	// Caddy itself may drop a connection that its old server accepted as a
	// reload stops it; that is Caddy's reload, not routing.
	t.Logf("%d writes, all on the leader; %d connections dropped by the reloads", len(results), len(failed))
}

// Killing the leader: the new leader gets the traffic; requests the dead
// leader never accepted are held and delivered, none twice.
func TestLeaderCrash(t *testing.T) {
	for _, mode := range []struct {
		name string
		kill fakecluster.KillMode
	}{{"refuse", fakecluster.KillRefuse}, {"hang", fakecluster.KillHang}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, 2, 1500*time.Millisecond, 300*time.Millisecond)
			tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "10s"))
			load := startWrites(tc.url("/api/orders"), 5*time.Millisecond, 10*time.Second)
			poll.Until(t, 5*time.Second, "writes flowing", func() bool { return load.Count() > 20 })

			killed := time.Now()
			c.Node("node-a").Kill(mode.kill)
			newLeader := c.Node("node-b")
			poll.Until(t, 10*time.Second, "writes on the new leader", func() bool { return len(newLeader.Executed()) > 20 })
			results := load.Stop()

			first := newLeader.Executed()[0]
			acq, _ := c.AcquisitionOf(first.Epoch)
			delay := first.At.Sub(acq.At)
			t.Logf("routing delay (new leader's lease acquisition -> first write it served): %v", delay)
			if delay > time.Second {
				t.Errorf("routing delay %v", delay)
			}
			failed := checkWrites(t, results, c)
			// Only writes that the dying leader accepted may fail: those in
			// flight when it was killed and, for a hung leader, those sent
			// before a probe timed out (interval + timeout).
			window := 200 * time.Millisecond
			if mode.kill == fakecluster.KillHang {
				window += 800 * time.Millisecond
			}
			for _, r := range failed {
				if r.Sent.After(killed.Add(window)) {
					t.Errorf("write %s sent %v after the kill failed: status %d, %v", r.ID, r.Sent.Sub(killed), r.Status, r.Err)
				}
			}
			// A crashed leader keeps its lease until it runs out: nothing it
			// may have executed is replayed as after a planned stop.
			if n := counterValue(tc, `caddy_ha_leader_replayed_requests_total{pool="`+poolName(c)+`",reason="planned_stop"}`); n != 0 {
				t.Errorf("%v writes replayed as after a planned stop", n)
			}
			t.Logf("%d writes, %d failed (accepted by the dying leader)", len(results), len(failed))
		})
	}
}

// A planned stop under a steady stream of POSTs: no client sees an error
// and every POST executes exactly once.
func TestPlannedStopIsInvisible(t *testing.T) {
	c := newCluster(t, 2, 2*time.Second, 400*time.Millisecond)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "10s"))
	load := startWrites(tc.url("/api/orders"), 5*time.Millisecond, 5*time.Second)
	poll.Until(t, 5*time.Second, "writes flowing", func() bool { return load.Count() > 20 })
	c.Node("node-a").Stop()
	poll.Until(t, 10*time.Second, "writes on the new leader", func() bool { return len(c.Node("node-b").Executed()) > 20 })
	results := load.Stop()

	for _, r := range checkWrites(t, results, c) {
		t.Errorf("write %s failed in a planned stop: status %d, %v", r.ID, r.Status, r.Err)
	}
	first := c.Node("node-b").Executed()[0]
	acq, _ := c.AcquisitionOf(first.Epoch)
	t.Logf("%d writes; routing delay %v", len(results), first.At.Sub(acq.At))

	// The leader change is logged and counted.
	b := c.Node("node-b").Addr()
	if lines := tc.logLines(`"node":"` + b + `","epoch":2,"failover":true`); len(lines) != 1 {
		t.Errorf("%d log lines for the new leader %s at epoch 2, want 1", len(lines), b)
	}
	metrics := tc.adminGet("/metrics")
	for _, want := range []string{
		`caddy_ha_leader_current{pool="` + c.Node("node-a").Addr() + "," + b + `",upstream="` + b + `"} 1`,
		`caddy_ha_leader_epoch{pool="` + c.Node("node-a").Addr() + "," + b + `"} 2`,
		`caddy_ha_leader_failovers_total{pool="` + c.Node("node-a").Addr() + "," + b + `"} 1`,
		`caddy_ha_leader_probe_duration_seconds_count{outcome="leader",pool="` + c.Node("node-a").Addr() + "," + b + `",upstream="` + b + `"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// Every prober stops when the config that uses it is unloaded.
func TestProbersStopWithTheirConfig(t *testing.T) {
	c := newCluster(t, 2, 3*time.Second, time.Second)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "5s"))
	resp, err := http.Get(tc.url("/api/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := countPools(); n != 1 {
		t.Fatalf("%d probers running, want 1", n)
	}
	// A reload with the same probe settings keeps the prober.
	tc.load(c, "", fmt.Sprintf(leaderSite, "6s"))
	if n := countPools(); n != 1 {
		t.Fatalf("%d probers after reload, want 1", n)
	}
	// Other probe settings replace it.
	tc.load(c, "", strings.Replace(fmt.Sprintf(leaderSite, "6s"), "interval 200ms", "interval 300ms", 1))
	if n := countPools(); n != 1 {
		t.Fatalf("%d probers after a reload with new settings, want 1", n)
	}
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	// Destruct stops the prober and waits for its goroutines.
	if n := countPools(); n != 0 {
		t.Fatalf("%d probers left after stop", n)
	}
}

func countPools() int {
	n := 0
	leaderPools.Range(func(_, _ any) bool { n++; return true })
	return n
}

// A mutating request refused by a node that has just become a follower is
// replayed to the leader, body included, once a probe confirms it; one
// with a body too large to buffer is not, and the client gets the 503.
func TestFollowerRefusalReplay(t *testing.T) {
	c := newCluster(t, 1, 3*time.Second, 100*time.Millisecond)
	tc := startCaddy(t, c, "", `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 1h
			fast_interval 20ms
			hold 5s
			replay_buffer 64KiB
		}
	}`)
	get := func() {
		resp, err := http.Get(tc.url("/api/warmup"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get() // held until the first probe answers

	// The node becomes a follower; the proxy only learns it from the 503.
	// It heals once the proxy holds the refused request for a leader (so
	// the replay path, not a lucky order, answers it).
	pool := poolName(c)
	replayedSeries := `caddy_ha_leader_replayed_requests_total{pool="` + pool + `",reason="follower_refusal"}`
	replayedBefore := counterValue(tc, replayedSeries)
	c.SetDatabaseDown(true)
	body := bytes.Repeat([]byte("x"), 1000)
	req, _ := http.NewRequest(http.MethodPost, tc.url("/api/orders"), bytes.NewReader(body))
	req.Header.Set("X-Request-Id", "replayed")
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		answered <- answer{resp, err}
	}()
	poll.Until(t, 5*time.Second, "the refused request to be held for a leader", func() bool {
		return metricValue(tc, `caddy_ha_leader_holding_requests{pool="`+pool+`"}`) == 1
	})
	c.SetDatabaseDown(false)
	a := <-answered
	if a.err != nil {
		t.Fatal(a.err)
	}
	resp := a.resp
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 after the replay", resp.StatusCode)
	}
	ex := c.Node("node-a").Executed()
	last := ex[len(ex)-1]
	if last.RequestID != "replayed" || last.BodyBytes != len(body) {
		t.Fatalf("executed %+v, want the replayed request with its %d-byte body", last, len(body))
	}
	// The metric's value, not its name (issue 29.3: the name alone is
	// there once the collector is registered).
	if got := counterValue(tc, replayedSeries); got != replayedBefore+1 {
		t.Errorf("%s: %v, want %v", replayedSeries, got, replayedBefore+1)
	}

	// Too large to buffer: the follower's own 503 reaches the client.
	c.SetDatabaseDown(true)
	defer c.SetDatabaseDown(false)
	req, _ = http.NewRequest(http.MethodPost, tc.url("/api/orders"), bytes.NewReader(bytes.Repeat([]byte("y"), 128<<10)))
	req.Header.Set("X-Request-Id", "too-large")
	// Interval is 1h: only a live request can show the proxy the follower.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("status %d Retry-After %q, want the follower's 503 with Retry-After 30", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if c.ExecutedIDs()["too-large"] != 0 {
		t.Fatal("the unbuffered request executed")
	}
}

// All nodes followers: 503 with Retry-After after hold, logged once.
func TestAllFollowers(t *testing.T) {
	c := newCluster(t, 2, time.Second, 200*time.Millisecond)
	c.SetDatabaseDown(true)
	tc := startCaddy(t, c, "", `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 200ms
			fast_interval 20ms
			hold 300ms
			retry_after 7s
		}
	}`)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			req, _ := http.NewRequest(http.MethodPost, tc.url("/api/orders"), strings.NewReader("{}"))
			req.Header.Set("X-Request-Id", fmt.Sprint("f", i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
				t.Errorf("status %d Retry-After %q, want 503 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if el := time.Since(start); el < 300*time.Millisecond {
				t.Errorf("answered after %v, before hold", el)
			}
		}()
	}
	wg.Wait()
	for _, n := range c.Nodes() {
		if n.Received() != 0 {
			t.Errorf("%s received %d requests while no node led", n.ID(), n.Received())
		}
	}
	if lines := tc.logLines("no leader within hold"); len(lines) != 1 {
		t.Errorf("%d 'no leader within hold' log lines for 10 requests, want 1", len(lines))
	}
	var views []healthcheck.PoolView
	if err := json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &views); err != nil || len(views) != 1 || views[0].Leader != "" {
		t.Errorf("admin view %+v (%v), want one pool without leader", views, err)
	}
}

// A held request whose client has gone is never sent.
func TestHeldRequestOfGoneClientIsNotSent(t *testing.T) {
	c := newCluster(t, 1, time.Second, 100*time.Millisecond)
	c.SetDatabaseDown(true)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "10s"))
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, tc.url("/api/orders"), strings.NewReader(`{"x":1}`))
		req.Header.Set("X-Request-Id", fmt.Sprint("gone", i))
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("answered %d while no node led", resp.StatusCode)
		}
	}
	// Each was held, and has let go of its wait as its client left, before
	// a leader could release it: nothing of it is left to send.
	pool := `{pool="` + poolName(c) + `"}`
	poll.Until(t, 5*time.Second, "the five held writes let go", func() bool {
		return counterValue(tc, "caddy_ha_leader_held_requests_total"+pool) == 5 && metricValue(tc, "caddy_ha_leader_holding_requests"+pool) == 0
	})
	c.SetDatabaseDown(false)
	poll.Until(t, 5*time.Second, "a leader", func() bool {
		resp, err := http.Get(tc.url("/api/x"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for id, n := range c.ExecutedIDs() {
		t.Errorf("write %s of a gone client executed %d times", id, n)
	}
	if got := c.Node("node-a").Received(); got < 1 || got > 2 {
		t.Fatalf("node received %d requests, want the GETs only", got)
	}
}

// A crashed leader with hold shorter than the takeover: the client gets an
// error with Retry-After after about hold, not hold plus the failed attempt.
func TestHoldExpiresAfterCrash(t *testing.T) {
	c := newCluster(t, 2, 10*time.Second, time.Second)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "500ms"))
	// Wait through the admin API, so that the proxy has no pooled
	// connection to the leader and the write's attempt is a fresh dial.
	poll.Until(t, 5*time.Second, "a leader", func() bool {
		var v []healthcheck.PoolView
		json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &v)
		return len(v) == 1 && v[0].Leader != ""
	})
	c.Node("node-a").Kill(fakecluster.KillRefuse)
	start := time.Now()
	resp, err := http.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	el := time.Since(start)
	// The first attempt could not connect, and Caddy reports the last
	// error of its retry loop: 502 here, 503 for requests that found no
	// leader at all. Both say when to come back.
	if (resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if el < 400*time.Millisecond || el > 2*time.Second {
		t.Fatalf("answered after %v, want about hold (500ms)", el)
	}
	if c.Node("node-b").Received() != 0 {
		t.Fatal("the follower received the write")
	}
}

// reads any spreads GETs over the nodes; leader_paths go to the leader.
func TestReadsAnyAndLeaderPaths(t *testing.T) {
	c := newCluster(t, 2, 3*time.Second, time.Second)
	tc := startCaddy(t, c, "", `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 100ms
			reads any
			leader_paths /webhooks/*
		}
	}`)
	poll.Until(t, 5*time.Second, "both nodes readable", func() bool {
		var v []healthcheck.PoolView
		json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &v)
		return len(v) == 1 && v[0].Leader != "" && v[0].Nodes[0].Status != "unknown" && v[0].Nodes[1].Status != "unknown"
	})
	served := map[string]int{}
	for range 40 {
		resp, err := http.Get(tc.url("/api/items"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		served[resp.Header.Get("X-Node-Id")]++
	}
	if served["node-a"] == 0 || served["node-b"] == 0 {
		t.Errorf("GETs served %v, want both nodes", served)
	}
	for i := range 10 {
		req, _ := http.NewRequest(http.MethodGet, tc.url("/webhooks/github"), nil)
		req.Header.Set("X-Request-Id", fmt.Sprint("hook", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Node-Role") != "leader" {
			t.Errorf("webhook GET: status %d from %s (%s)", resp.StatusCode, resp.Header.Get("X-Node-Id"), resp.Header.Get("X-Node-Role"))
		}
	}
}

// Two nodes claiming leadership: only the higher epoch gets traffic.
func TestStaleLeaderGetsNoTraffic(t *testing.T) {
	c := newCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "5s"))
	a, b := c.Node("node-a"), c.Node("node-b")
	post := func(id string) string {
		req, _ := http.NewRequest(http.MethodPost, tc.url("/api/orders"), strings.NewReader("{}"))
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Node-Id")
	}
	post("before")
	a.Stop()
	poll.Until(t, 5*time.Second, "b leads", func() bool { return post(fmt.Sprint("x", time.Now().UnixNano())) == "node-b" })
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	a.ClaimStale(1) // a believes it still leads epoch 1; b leads epoch 2
	poll.Until(t, 5*time.Second, "a probed as stale", func() bool {
		var v []healthcheck.PoolView
		json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &v)
		return len(v) == 1 && v[0].Nodes[0].Status == healthcheck.StatusStale
	})
	before := a.Received()
	for i := range 30 {
		if node := post(fmt.Sprint("s", i)); node != "node-b" {
			t.Fatalf("write served by %s, want node-b (epoch 2)", node)
		}
	}
	if a.Received() != before {
		t.Fatalf("the stale leader received %d requests", a.Received()-before)
	}
	// What the stale-leader alert watches.
	if n := counterValue(tc, `caddy_ha_leader_probe_duration_seconds_count{outcome="stale",pool="`+poolName(c)+`",upstream="`+a.Addr()+`"}`); n < 1 {
		t.Errorf("stale probes counted: %v", n)
	}

	// The real leader dies and a reload brings new probe settings, hence a
	// new prober: it still knows epoch 2 and never takes a for the leader.
	b.Kill(fakecluster.KillRefuse)
	tc.load(c, "", strings.Replace(fmt.Sprintf(leaderSite, "300ms"), "interval 200ms", "interval 250ms", 1))
	req, _ := http.NewRequest(http.MethodPost, tc.url("/api/orders"), strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || a.Received() != before {
		t.Fatalf("status %d, stale leader received %d: want 503 and nothing sent to it", resp.StatusCode, a.Received()-before)
	}
}

// caddy adapt of Caddyfile.example succeeds; bad config fails clearly.
func TestCaddyfileConfig(t *testing.T) {
	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(example, map[string]any{"filename": "Caddyfile.example"}); err != nil {
		t.Fatalf("Caddyfile.example: %v", err)
	}
	bad := []struct{ block, want string }{
		{"frobnicate 1", "unrecognized lb_policy leader option 'frobnicate'"},
		{"interval -1s", "interval must be positive"},
		{"interval", "wrong argument count"},
		{"fails 0", "fails must be a whole number of at least 1"},
		{"reads some", "reads must be leader or any"},
		{"replay_buffer lots", "replay_buffer: bad size lots"},
		{"hold 1s 2s", "hold: too many arguments"},
	}
	for _, tc := range bad {
		cf := "http://127.0.0.1:1 {\n\treverse_proxy 127.0.0.1:2 {\n\t\tlb_policy leader {\n\t\t\t" + tc.block + "\n\t\t}\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Caddyfile:4") {
			t.Errorf("%q: error %v, want %q at Caddyfile:4", tc.block, err, tc.want)
		}
	}
	// JSON config is checked at load time too.
	for _, tc := range []struct{ policy, want string }{
		{`{"policy":"leader","interval":-1000000000}`, "interval must be positive"},
		{`{"policy":"leader","reads":"some"}`, "reads must be leader or any"},
		{`{"policy":"leader","fast_interval":5000000000,"interval":1000000000}`, "fast_interval 5s is longer than interval 1s"},
	} {
		cfg := `{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":[{"dial":"127.0.0.1:2"}],"load_balancing":{"selection_policy":` + tc.policy + `}}]}]}}}}}`
		err := caddy.Validate(mustConfig(t, cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.policy, err, tc.want)
		}
	}
}

func mustConfig(t *testing.T, s string) *caddy.Config {
	t.Helper()
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// selectFixture is a policy with a known leader and a request as Caddy
// hands it to Select; selectOnce runs the request path once.
func selectFixture(tb testing.TB) (selectOnce func()) {
	tb.Helper()
	c := newClusterWith(tb, fakecluster.Config{LeaseTTL: 30 * time.Second, RenewInterval: 10 * time.Second}, 2)
	addrs := []string{c.Nodes()[0].Addr(), c.Nodes()[1].Addr()}
	mon, err := healthcheck.NewMonitor("bench", addrs, healthcheck.Config{Interval: time.Second, FastInterval: 10 * time.Millisecond, Timeout: time.Second, Fails: 2, Passes: 1},
		&healthcheck.HTTPProber{Client: &http.Client{}, Scheme: "http", URI: "/healthz/leader"}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	mon.Start()
	tb.Cleanup(mon.Stop)
	s := &LeaderSelection{pool: &leaderPool{mon: mon}, requestKey: "ha.leader.request.bench"}
	pool := reverseproxy.UpstreamPool{{Dial: addrs[0]}, {Dial: addrs[1]}}
	if mon.WaitLeader(context.Background(), time.Now().Add(5*time.Second)) == nil {
		tb.Fatal("no leader")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/api", nil)
	vars := map[string]any{"client_ip": "127.0.0.1"}
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, vars))
	return func() {
		delete(vars, s.requestKey) // a new request
		if s.Select(pool, req, nil) == nil {
			tb.Fatal(errors.New("no upstream"))
		}
	}
}

// BenchmarkSelect measures the request path of Select with a known leader.
func BenchmarkSelect(b *testing.B) {
	selectOnce := selectFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		selectOnce()
	}
}

// Select allocates one thing per request once a leader is known: the
// request's leaderRequest, which its attempts share (a write it may
// replay also has its attempts traced).
func TestSelectAllocatesOnce(t *testing.T) {
	selectOnce := selectFixture(t)
	if n := testing.AllocsPerRun(1000, selectOnce); n > 1 {
		t.Fatalf("Select allocates %v times per request, want 1", n)
	}
}

// Two proxies to the same nodes in one request (forward_auth, then
// reverse_proxy) each route by themselves: the second does not take the
// first one's attempt for a failed one and hold.
func TestTwoProxiesInOneRequest(t *testing.T) {
	c := newCluster(t, 2, 3*time.Second, time.Second)
	tc := startCaddy(t, c, "", `forward_auth {upstreams} {
		uri /auth
		lb_policy leader {
			interval 200ms
		}
	}
	reverse_proxy {upstreams} {
		lb_policy leader {
			interval 200ms
		}
	}`)
	post := func() {
		resp, err := http.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post() // held until the first probes answer
	held := func() string {
		for _, l := range strings.Split(tc.adminGet("/metrics"), "\n") {
			if strings.HasPrefix(l, "caddy_ha_leader_held_requests_total") {
				return l
			}
		}
		return ""
	}
	before := held()
	for range 20 {
		post()
	}
	if after := held(); after != before {
		t.Fatalf("requests were held with a known leader: %q -> %q", before, after)
	}
	if n := len(c.Node("node-a").Executed()); n != 21 {
		t.Fatalf("leader executed %d writes, want 21", n)
	}
}

// With an lb_try_duration longer than hold, requests wait that long (and
// Caddy's retry loop does not spin past a shorter hold).
func TestTryDurationLongerThanHold(t *testing.T) {
	c := newCluster(t, 1, time.Second, 200*time.Millisecond)
	c.SetDatabaseDown(true)
	tc := startCaddy(t, c, "", `reverse_proxy {upstreams} {
		lb_try_duration 800ms
		lb_policy leader {
			hold 200ms
		}
	}`)
	start := time.Now()
	resp, err := http.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); resp.StatusCode != http.StatusServiceUnavailable || el < 700*time.Millisecond || el > 3*time.Second {
		t.Fatalf("status %d after %v, want 503 after about 800ms", resp.StatusCode, el)
	}
	if m := tc.adminGet("/metrics"); !strings.Contains(m, "caddy_ha_leader_no_leader_responses_total{pool=\""+c.Nodes()[0].Addr()+"\"} 1") {
		t.Fatal("the no-leader answer was not counted exactly once")
	}
}

// Planned stops without a drain: the leader releases its lease and shuts
// its HTTP server down at once (Go's Shutdown closes its idle kept-alive
// connections, which Caddy may be sending a write on). Five stops under
// 200 writes/s: no client error and no write executed twice.
func TestPlannedStopWithoutDrain(t *testing.T) {
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 2 * time.Second, RenewInterval: 400 * time.Millisecond}, 2)
	tc := startCaddy(t, c, "", fmt.Sprintf(leaderSite, "10s"))
	load := startWrites(tc.url("/api/orders"), 5*time.Millisecond, 10*time.Second)
	poll.Until(t, 5*time.Second, "writes flowing", func() bool { return load.Count() > 20 })
	for range 5 {
		stopLeaderUntilWritesMove(t, c)
	}
	results := load.Stop()
	for _, r := range checkWrites(t, results, c) {
		t.Errorf("write %s failed in a planned stop: status %d, %v", r.ID, r.Status, r.Err)
	}
	replayed := counterValue(tc, `caddy_ha_leader_replayed_requests_total{pool="`+poolName(c)+`",reason="planned_stop"}`)
	if replayed < 1 {
		t.Error("no write was replayed: the stops raced nothing, the test proves nothing")
	}
	t.Logf("%d writes, %v replayed after a planned stop closed their connection", len(results), replayed)
}

// stopLeaderUntilWritesMove stops the cluster's leader (a planned stop),
// waits until another node leads and has executed 20 more writes, then
// starts the stopped node again, as a follower.
func stopLeaderUntilWritesMove(t *testing.T, c *fakecluster.Cluster) {
	t.Helper()
	leader := c.Node(c.State().Leader)
	leader.Stop()
	var next *fakecluster.Node
	poll.Until(t, 10*time.Second, "a new leader", func() bool {
		next = c.Node(c.State().Leader)
		return next != nil && next != leader
	})
	n := len(next.Executed())
	poll.Until(t, 10*time.Second, "writes on the new leader", func() bool { return len(next.Executed()) > n+20 })
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
}

// A planned stop whose refusals reach Caddy after the node closed its port
// (a busy host, as under CI load): the probe that would confirm the refusal
// finds nothing listening, and the lease released early proves the node
// refused as a follower. Each such write is replayed on the new leader.
// Probes 1s apart leave Caddy routing to the stopped node until its first
// refusal arrives (a probe right after the release would make Caddy hold
// the writes instead, so the test stops the leader again, at most thrice).
func TestPlannedStopRefusalsAfterThePortClosed(t *testing.T) {
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: 400 * time.Millisecond,
		StopDrain: 200 * time.Millisecond, RefusalDelay: 400 * time.Millisecond}, 2)
	tc := startCaddy(t, c, "", `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 1s
			fast_interval 20ms
			timeout 500ms
			hold 10s
		}
	}`)
	load := startWrites(tc.url("/api/orders"), 10*time.Millisecond, 10*time.Second)
	poll.Until(t, 5*time.Second, "writes flowing", func() bool { return load.Count() > 20 })
	metric := `caddy_ha_leader_replayed_requests_total{pool="` + poolName(c) + `",reason="follower_refusal"}`
	for stops := 0; stops < 3 && counterValue(tc, metric) == 0; stops++ {
		stopLeaderUntilWritesMove(t, c)
	}
	results := load.Stop()
	for _, r := range checkWrites(t, results, c) {
		t.Errorf("write %s failed in a planned stop: status %d, %v", r.ID, r.Status, r.Err)
	}
	replayed := counterValue(tc, metric)
	if replayed < 1 {
		t.Error("no refusal was replayed: the stops raced nothing, the test proves nothing")
	}
	t.Logf("%d writes, %v refusals replayed", len(results), replayed)
}

// The coupling to Caddy's provisioning order (see "What caddy-ha relies on
// in Caddy" in docs/couplings.md): the policy is provisioned after the transport
// and before Caddy's retry defaults, so what it sets on its reverse_proxy
// stays. If Caddy changed that order, this fails first.
func TestLeaderSetsItsProxysRetrySettings(t *testing.T) {
	c := newCluster(t, 2, 2*time.Second, 400*time.Millisecond)
	startCaddy(t, c, "", fmt.Sprintf(leaderSite, "7s"))
	h := loadedProxy(t)
	lb := h.LoadBalancing
	if time.Duration(lb.TryDuration) != 7*time.Second || time.Duration(lb.TryInterval) != retryInterval || h.RequestBuffers != defaultReplayBuffer {
		t.Errorf("try_duration %v, try_interval %v, request_buffers %d: want 7s, %v, %d",
			time.Duration(lb.TryDuration), time.Duration(lb.TryInterval), h.RequestBuffers, retryInterval, defaultReplayBuffer)
	}
	var refusal, closed bool
	for _, set := range lb.RetryMatch {
		for _, m := range set {
			switch m.(type) {
			case followerRefusal:
				refusal = true
			case plannedStopClose:
				closed = len(set) == 1
			}
		}
	}
	if !refusal || !closed {
		t.Errorf("retry_match has the follower refusal entry %v, the planned stop entry (alone in its set) %v", refusal, closed)
	}
}

// loadedProxy returns the first reverse_proxy handler of the running
// config's first server.
func loadedProxy(t *testing.T) *reverseproxy.Handler {
	t.Helper()
	app, err := caddy.ActiveContext().App("http")
	if err != nil {
		t.Fatal(err)
	}
	var find func(routes caddyhttp.RouteList) *reverseproxy.Handler
	find = func(routes caddyhttp.RouteList) *reverseproxy.Handler {
		for _, r := range routes {
			for _, h := range r.Handlers {
				switch h := h.(type) {
				case *reverseproxy.Handler:
					return h
				case *caddyhttp.Subroute:
					if found := find(h.Routes); found != nil {
						return found
					}
				}
			}
		}
		return nil
	}
	for _, srv := range app.(*caddyhttp.App).Servers {
		if h := find(srv.Routes); h != nil {
			return h
		}
	}
	t.Fatal("no reverse_proxy in the running config")
	return nil
}
