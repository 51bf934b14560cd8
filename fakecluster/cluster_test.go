package fakecluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

func startCluster(t *testing.T, n int, ttl, renew time.Duration) *Cluster {
	t.Helper()
	c, err := New(Config{LeaseTTL: ttl, RenewInterval: renew}, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func get(t *testing.T, client *http.Client, method, url string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp, body
}

func TestLeaseAndEndpoints(t *testing.T) {
	c := startCluster(t, 2, time.Second, 200*time.Millisecond)
	s, err := c.WaitLeader(time.Second)
	if err != nil || s.Leader != "node-a" || s.Epoch != 1 {
		t.Fatalf("state %+v, %v: want node-a leading epoch 1", s, err)
	}
	a, b := c.Node("node-a"), c.Node("node-b")

	resp, body := get(t, http.DefaultClient, "GET", a.URL()+"/healthz/leader")
	if resp.StatusCode != 200 || body["status"] != "leader" || body["leaseEpoch"] != 1.0 || body["nodeId"] != "node-a" {
		t.Fatalf("leader probe: %d %v", resp.StatusCode, body)
	}
	for _, f := range []string{"leaseExpiresAt", "lastRenewAt"} {
		if _, err := time.Parse(time.RFC3339Nano, body[f].(string)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if resp, _ := get(t, http.DefaultClient, "GET", b.URL()+"/healthz/leader"); resp.StatusCode != 503 {
		t.Fatalf("follower probe: %d", resp.StatusCode)
	}
	// Followers refuse writes and the state-changing GET, serve reads.
	for _, r := range []struct{ method, path string }{{"POST", "/api/x"}, {"DELETE", "/api/x"}, {"GET", "/webhooks/in"}} {
		resp, _ := get(t, http.DefaultClient, r.method, b.URL()+r.path)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "30" {
			t.Fatalf("%s %s on follower: %d Retry-After %q", r.method, r.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if len(b.Executed()) != 0 {
		t.Fatal("follower executed a write")
	}
	if resp, _ := get(t, http.DefaultClient, "GET", b.URL()+"/api/items"); resp.StatusCode != 200 || resp.Header.Get("X-Node-Id") != "node-b" {
		t.Fatalf("read on follower: %d", resp.StatusCode)
	}
	resp, _ = get(t, http.DefaultClient, "POST", a.URL()+"/api/x")
	if resp.StatusCode != 200 || resp.Header.Get("X-Lease-Epoch") != "1" || len(a.Executed()) != 1 {
		t.Fatalf("write on leader: %d epoch %s executed %d", resp.StatusCode, resp.Header.Get("X-Lease-Epoch"), len(a.Executed()))
	}
}

func TestPlannedStopHandsOverOnRenewTick(t *testing.T) {
	c := startCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	c.WaitLeader(time.Second)
	c.Node("node-a").Stop()
	poll.Until(t, 5*time.Second, "node-b leads", func() bool { return c.State().Leader == "node-b" })
	s := c.State()
	if s.Epoch != 2 || len(s.Acquisitions) != 2 {
		t.Fatalf("state %+v, want epoch 2 after one failover", s)
	}
	// Released, so the handover took about one renew tick, not the TTL.
	if d := s.Acquisitions[1].At.Sub(s.Acquisitions[0].At); d > time.Second {
		t.Fatalf("handover after %v", d)
	}
	if _, err := http.Get(c.Node("node-a").URL() + "/healthz/leader"); err == nil {
		t.Fatal("stopped node still answers")
	}
	// Started again, it is a follower.
	if err := c.Node("node-a").Start(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, http.DefaultClient, "GET", c.Node("node-a").URL()+"/healthz/leader"); resp.StatusCode != 503 {
		t.Fatalf("restarted node: %d", resp.StatusCode)
	}
}

func TestKillModes(t *testing.T) {
	c := startCluster(t, 2, 500*time.Millisecond, 100*time.Millisecond)
	c.WaitLeader(time.Second)
	a := c.Node("node-a")
	a.Kill(KillHang)
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := client.Get(a.URL() + "/healthz/leader"); err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Fatalf("hung node answered: %v", err)
	}
	// Its lease runs out after the TTL; the standby takes over.
	poll.Until(t, 5*time.Second, "node-b leads", func() bool { return c.State().Leader == "node-b" })
	a.Kill(KillRefuse)
	if _, err := client.Get(a.URL() + "/healthz/leader"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("killed node: %v", err)
	}
}

func TestDatabaseDownMakesAllFollowers(t *testing.T) {
	c := startCluster(t, 2, time.Second, 100*time.Millisecond)
	c.WaitLeader(time.Second)
	c.SetDatabaseDown(true)
	for _, n := range c.Nodes() {
		if resp, _ := get(t, http.DefaultClient, "GET", n.URL()+"/healthz/leader"); resp.StatusCode != 503 {
			t.Fatalf("%s answers %d with the database down", n.ID(), resp.StatusCode)
		}
	}
	c.SetDatabaseDown(false)
	if _, err := c.WaitLeader(2 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestControlAPI(t *testing.T) {
	c := startCluster(t, 2, time.Second, 100*time.Millisecond)
	c.WaitLeader(time.Second)
	api := httptest.NewServer(c.ControlHandler())
	defer api.Close()
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/nodes/node-b/claim?epoch=1"); resp.StatusCode != 200 {
		t.Fatalf("claim: %d", resp.StatusCode)
	}
	if resp, body := get(t, http.DefaultClient, "GET", c.Node("node-b").URL()+"/healthz/leader"); resp.StatusCode != 200 || body["leaseEpoch"] != 1.0 {
		t.Fatalf("stale claim: %d %v", resp.StatusCode, body)
	}
	for _, p := range []string{"/nodes/node-a/stop", "/database/down", "/database/up", "/nodes/node-a/start", "/nodes/node-b/kill?mode=hang"} {
		if resp, _ := get(t, http.DefaultClient, "POST", api.URL+p); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	resp, body := get(t, http.DefaultClient, "GET", api.URL+"/state")
	if resp.StatusCode != 200 || body["nodes"] == nil {
		t.Fatalf("state: %d %v", resp.StatusCode, body)
	}
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/nodes/node-z/stop"); resp.StatusCode != 404 {
		t.Fatalf("unknown node: %d", resp.StatusCode)
	}
}

// A forged claim answers with its own lease until it is ended; a re-seeded
// lease row starts the epochs again at 1.
func TestForgeAndReseed(t *testing.T) {
	c := startCluster(t, 2, time.Second, 100*time.Millisecond)
	if _, err := c.WaitLeader(time.Second); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(c.ControlHandler())
	defer api.Close()
	b := c.Node("node-b")
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/nodes/node-b/forge?epoch=9223372036854775807&lease=2s"); resp.StatusCode != 200 {
		t.Fatalf("forge: %d", resp.StatusCode)
	}
	resp, body := get(t, http.DefaultClient, "GET", b.URL()+"/healthz/leader")
	expires, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(body["leaseExpiresAt"]))
	renewed, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(body["lastRenewAt"]))
	// The epoch is compared as JSON text: a float64 cannot hold it.
	if resp.StatusCode != 200 || resp.Header.Get("X-Lease-Epoch") != "9223372036854775807" || expires.Sub(renewed) != 2*time.Second {
		t.Fatalf("forged claim: %d %v", resp.StatusCode, body)
	}
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/nodes/node-b/forge?epoch=0"); resp.StatusCode != 200 {
		t.Fatalf("end forge: %d", resp.StatusCode)
	}
	if resp, _ := get(t, http.DefaultClient, "GET", b.URL()+"/healthz/leader"); resp.StatusCode != 503 {
		t.Fatalf("node-b after its forged claim ended: %d", resp.StatusCode)
	}

	acquired := len(c.State().Acquisitions)
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/database/reseed"); resp.StatusCode != 200 {
		t.Fatalf("reseed: %d", resp.StatusCode)
	}
	poll.Until(t, 2*time.Second, "a new acquisition", func() bool { return len(c.State().Acquisitions) > acquired })
	if s := c.State(); s.Epoch != 1 || s.Acquisitions[acquired].Epoch != 1 {
		t.Fatalf("the first acquisition after the reseed: %+v, want epoch 1", s.Acquisitions[acquired:])
	}
}

// Reset restores a known state from any mess: every node running as
// itself, the database up, and the chosen leader holding the lease, with
// a new epoch only if it did not hold it.
func TestReset(t *testing.T) {
	c := startCluster(t, 3, time.Second, 100*time.Millisecond)
	if _, err := c.WaitLeader(time.Second); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(c.ControlHandler())
	defer api.Close()
	if resp, body := get(t, http.DefaultClient, "POST", api.URL+"/reset"); resp.StatusCode != 200 || body["leader"] != "node-a" || body["epoch"] != 1.0 {
		t.Fatalf("reset of a cluster led by node-a: %d %v, want node-a still leading epoch 1", resp.StatusCode, body)
	}

	a, b, cc := c.Node("node-a"), c.Node("node-b"), c.Node("node-c")
	a.Kill(KillHang)
	b.Stop()
	cc.ClaimStale(1)
	c.SetDatabaseDown(true)
	resp, body := get(t, http.DefaultClient, "POST", api.URL+"/reset?leader=node-b")
	if resp.StatusCode != 200 {
		t.Fatalf("reset: %d %v", resp.StatusCode, body)
	}
	s := c.State()
	if s.Leader != "node-b" || s.Epoch != 2 || s.DatabaseDown {
		t.Fatalf("after reset to node-b: leader %q epoch %d database down %v, want node-b, 2, false", s.Leader, s.Epoch, s.DatabaseDown)
	}
	for _, n := range s.Nodes {
		if n.State != "running" || n.StaleEpoch != 0 || n.Leader != (n.ID == "node-b") {
			t.Fatalf("after reset: %+v", n)
		}
	}
	// Each node answers as itself: the leader as leader, the others as followers.
	for _, n := range c.Nodes() {
		want := 503
		if n == b {
			want = 200
		}
		client := &http.Client{Timeout: 2 * time.Second}
		if resp, _ := get(t, client, "GET", n.URL()+"/healthz/leader"); resp.StatusCode != want {
			t.Fatalf("%s after reset: %d, want %d", n.ID(), resp.StatusCode, want)
		}
	}
	// It keeps the lead: it renews, and the others' renew ticks find its
	// lease live.
	poll.Until(t, 2*time.Second, "node-b renews", func() bool { return c.State().ExpiresAt.After(s.ExpiresAt) })
	if s := c.State(); s.Leader != "node-b" || len(s.Acquisitions) != 2 {
		t.Fatalf("after a renewal: leader %q, acquisitions %+v", s.Leader, s.Acquisitions)
	}
	if resp, _ := get(t, http.DefaultClient, "POST", api.URL+"/reset?leader=node-z"); resp.StatusCode != 400 {
		t.Fatalf("reset to an unknown node: %d, want 400", resp.StatusCode)
	}
}
