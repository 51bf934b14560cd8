package caddymodule

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// dateSlack is how much longer than the truth the policy may take a lease
// to be: it reads a renewal's age from the node's Date header, in whole
// seconds, rounded down.
const dateSlack = time.Second

// loadSlack covers a probe and a write on a loaded 2-core machine.
const loadSlack = 700 * time.Millisecond

// epochWriter posts writes through Caddy, each on a new connection (a
// reload closes kept-alive ones), and reports which node executed each.
type epochWriter struct {
	t      *testing.T
	tc     *testCaddy
	client *http.Client
	n      int
}

func newEpochWriter(t *testing.T, tc *testCaddy) *epochWriter {
	return &epochWriter{t: t, tc: tc, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// post sends one write and returns its status and what the node executed
// (zero unless 200).
func (w *epochWriter) post() (int, fakecluster.Execution) {
	w.t.Helper()
	w.n++
	req, _ := http.NewRequest(http.MethodPost, w.tc.url("/api/orders"), strings.NewReader("{}"))
	req.Header.Set("X-Request-Id", fmt.Sprint("epoch-", w.n))
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ex fakecluster.Execution
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
			w.t.Fatal(err)
		}
	}
	return resp.StatusCode, ex
}

// untilServedBy posts writes until one is executed by node at epoch, for
// at most until deadline, and returns when its answer came. Every write
// before it must be answered 503: no leader.
func (w *epochWriter) untilServedBy(node string, epoch int64, deadline time.Time) time.Time {
	w.t.Helper()
	for time.Now().Before(deadline) {
		status, ex := w.post()
		switch {
		case status == http.StatusOK && ex.Node == node && ex.Epoch == epoch:
			return time.Now()
		case status != http.StatusServiceUnavailable:
			w.t.Fatalf("write answered %d by %q at epoch %d while waiting for %s at epoch %d", status, ex.Node, ex.Epoch, node, epoch)
		}
		time.Sleep(20 * time.Millisecond) // pacing of the writes, not synchronisation
	}
	w.t.Fatalf("no write served by %s at epoch %d by %v", node, epoch, deadline)
	return time.Time{}
}

// poolView returns the admin API's view of the only leader pool.
func poolView(t *testing.T, tc *testCaddy) healthcheck.PoolView {
	t.Helper()
	var v []healthcheck.PoolView
	if err := json.Unmarshal([]byte(tc.adminGet("/ha/leader")), &v); err != nil || len(v) != 1 {
		t.Fatalf("/ha/leader: %v %+v", err, v)
	}
	return v[0]
}

const epochSite = `reverse_proxy {upstreams} {
		lb_policy leader {
			interval %s
			fast_interval 20ms
			timeout 500ms
			hold 300ms
		}
	}`

// Issue 19.3: a node answers as leader with the highest epoch there is and
// a 4s lease, a few times, then 503. The real leader gets no write while
// that lease is valid, also after a reload with new probe settings (a new
// prober), and serves writes again once it ran out: within the forged
// lease's end, plus the Date header's second and a probe. Before the fix it
// was stale for good.
func TestForgedEpochStopsWritesOnlyUntilItsLeaseEnds(t *testing.T) {
	c := newCluster(t, 2, 2*time.Second, 200*time.Millisecond)
	tc := startCaddy(t, c, "", fmt.Sprintf(epochSite, "200ms"))
	w := newEpochWriter(t, tc)
	a, b := c.Node("node-a"), c.Node("node-b")
	start := w.untilServedBy("node-a", 1, time.Now().Add(5*time.Second))

	const lease = 4 * time.Second
	forgedEnd := time.Now().Add(lease)
	b.Forge(math.MaxInt64, lease)
	leaderProbes := `caddy_ha_leader_probe_duration_seconds_count{outcome="leader",pool="` + poolName(c) + `",upstream="` + b.Addr() + `"}`
	poll.Until(t, 3*time.Second, "three forged answers probed", func() bool { return counterValue(tc, leaderProbes) >= 3 })
	b.Forge(0, 0) // b is a follower again
	if f := poolView(t, tc).EpochFloor; f.Epoch != math.MaxInt64 || f.Node != b.Addr() {
		t.Fatalf("epoch floor %+v, want %d from %s", f, int64(math.MaxInt64), b.Addr())
	}
	floorGauge := `caddy_ha_leader_epoch_floor{pool="` + poolName(c) + `"}`
	if v := metricValue(tc, floorGauge); v != math.MaxInt64 {
		t.Errorf("%s = %v, want %v", floorGauge, v, float64(math.MaxInt64))
	}

	// New probe settings: a new prober, which takes the floor with its end.
	tc.load(c, "", fmt.Sprintf(epochSite, "250ms"))
	before := a.Received()
	if left := time.Until(forgedEnd); left < loadSlack {
		t.Fatalf("the forged lease has only %v left after the reload: the machine is too slow for this test", left)
	}
	if status, ex := w.post(); status != http.StatusServiceUnavailable || a.Received() != before {
		t.Fatalf("within the forged lease, after a reload: %d by %q, %d requests reached node-a; want 503 and none", status, ex.Node, a.Received()-before)
	}

	served := w.untilServedBy("node-a", 1, forgedEnd.Add(dateSlack+loadSlack))
	t.Logf("writes on node-a %v after it first served, %v after the forged lease's end", served.Sub(start).Round(time.Millisecond), served.Sub(forgedEnd).Round(time.Millisecond))
	// The floor rose only while the forged lease was valid by the policy's
	// measure, which may end a probe's latency before the truth.
	if early := forgedEnd.Add(-loadSlack); served.Before(early) {
		t.Fatalf("node-a served at %v, before the forged lease's end %v", served, forgedEnd)
	}
	if f := poolView(t, tc).EpochFloor; f.Epoch != 1 || f.Node != a.Addr() {
		t.Errorf("epoch floor %+v, want 1 from %s", f, a.Addr())
	}
	if v := metricValue(tc, floorGauge); v != 1 {
		t.Errorf("%s = %v, want 1", floorGauge, v)
	}
	if len(tc.logLines(`"epoch jumped far beyond the last seen`)) == 0 {
		t.Error("the jump to the forged epoch was not logged")
	}
	if lines := tc.logLines(`"epoch went backwards`); len(lines) == 0 || !strings.Contains(lines[0], `"level":"warn"`) {
		t.Errorf("epoch going backwards not logged at warn: %q", lines)
	}
}

// The cluster's lease row is re-seeded (or its database restored): the
// leader's next acquisition is epoch 1 while epoch 2's lease may still be
// valid. Writes follow epoch 1 within one lease (plus the Date header's
// second and a probe).
func TestClusterEpochResetFollowedWithinOneLease(t *testing.T) {
	const ttl = 2 * time.Second
	c := newCluster(t, 2, ttl, 200*time.Millisecond)
	tc := startCaddy(t, c, "", fmt.Sprintf(epochSite, "200ms"))
	w := newEpochWriter(t, tc)
	c.Node("node-a").Stop() // a failover, so that the epoch is 2
	w.untilServedBy("node-b", 2, time.Now().Add(5*time.Second))

	reset := time.Now()
	c.Reseed()
	// A write may reach node-b at epoch 1 before its next probe: the
	// guard acts from the probe on.
	poll.Until(t, 2*time.Second, "node-b probed as stale", func() bool { return poolView(t, tc).Nodes[1].Status == healthcheck.StatusStale })
	served := w.untilServedBy("node-b", 1, reset.Add(ttl+dateSlack+loadSlack))
	t.Logf("epoch 1 served %v after the reset", served.Sub(reset).Round(time.Millisecond))
	if lines := tc.logLines(`"epoch went backwards`); len(lines) == 0 || !strings.Contains(lines[0], `"from":2`) || !strings.Contains(lines[0], `"to":1`) {
		t.Errorf("epoch going back from 2 to 1 not logged: %q", lines)
	}
}
