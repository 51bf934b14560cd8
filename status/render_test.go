package status

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

func sampleView() View {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lost, probed, floorEnds := now.Add(-3*time.Second), now.Add(-200*time.Millisecond), now.Add(2*time.Second)
	return View{
		GeneratedAt: now,
		LeaderPools: []LeaderPool{{
			PoolView: healthcheck.PoolView{Pool: "10.0.0.1:80,10.0.0.2:80", NoLeaderFrom: &lost,
				EpochFloor: healthcheck.EpochFloor{Epoch: 7, Node: "10.0.0.1:80", Until: &floorEnds},
				Nodes: []healthcheck.NodeView{
					{Addr: "10.0.0.1:80", Status: healthcheck.StatusDown, Fails: 3, LastProbe: &probed, LastError: "dial tcp: connection refused"},
					{Addr: "10.0.0.2:80", Status: healthcheck.StatusFollower, LastProbe: &probed, LastProbeMillis: 0.4},
				}},
			HoldSeconds: 15,
			LastChanges: []LeaderChange{{At: lost, From: "10.0.0.1:80", Reason: "10.0.0.1:80: <script>alert(1)</script>"}},
		}},
		RateLimitZones: []RateLimitZone{{Zone: "login", Events: 5, WindowSeconds: 60, Store: "redis 10.0.0.9:6379",
			OnStoreError: "local", Allowed: 10, Limited: 3}},
		Stores:         []Store{{Store: "redis 10.0.0.9:6379", Up: false, RetryInSeconds: 0.4}},
		UploadAffinity: UploadAffinity{Events: map[string]float64{"learned": 2, "hit": 9}},
	}
}

// The page is plain HTML that refreshes itself: no script, no asset from
// elsewhere, what the cluster says escaped; a failover in progress reads
// as one.
func TestPageIsPlainHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleView(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`<meta http-equiv="refresh" content="5">`, "Failover in progress", "no leader for 3s",
		`data-status="down"`, "dial tcp: connection refused", `data-zone="login"`, "5 per 1m", "&lt;script&gt;", `data-up="false"`, "in 400ms"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?i)<script|(src|href)="(https?:)?//`).MatchString(page) {
		t.Errorf("the page has a script or an external asset:\n%s", page)
	}
	if strings.Contains(page, "pinned-connections") {
		t.Errorf("a Pinned connections section without transport pinned")
	}
	b.Reset()
	if err := WriteHTML(&b, View{GeneratedAt: time.Now()}, 0); err != nil || strings.Contains(b.String(), "http-equiv") {
		t.Errorf("refresh off still refreshes (%v)", err)
	}
	// Past hold it is no longer a failover in progress but an outage.
	v := sampleView()
	v.LeaderPools[0].HoldSeconds = 2
	b.Reset()
	if err := WriteHTML(&b, v, 0); err != nil || !strings.Contains(b.String(), "No leader</span> for 3s, longer than hold (2s)") ||
		strings.Contains(b.String(), "Failover in progress") {
		t.Errorf("leaderless past hold (%v):\n%s", err, b.String())
	}
	// A pool that never had a leader does not read as one that lost it.
	v.LeaderPools[0].LastChanges = nil
	b.Reset()
	if err := WriteHTML(&b, v, 0); err != nil || !strings.Contains(b.String(), "No leader yet</span>: none found in the 3s since the pool started") ||
		strings.Contains(b.String(), "longer than hold") {
		t.Errorf("never led (%v):\n%s", err, b.String())
	}
	b.Reset()
	if err := WriteTable(&b, v); err != nil || !strings.Contains(b.String(), "NO LEADER YET: none found in the 3s since the pool started") {
		t.Errorf("never led, table (%v):\n%s", err, b.String())
	}
}

// The terminal table names what an operator looks for first.
func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleView()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"LEADER POOL 10.0.0.1:80,10.0.0.2:80: FAILOVER IN PROGRESS: no leader for 3s",
		"10.0.0.1:80  down", "RATE-LIMIT ZONES", "login", "DOWN", "hit 9, learned 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// The page and the table show the epoch floor, whose claim holds it, and
// until when.
func TestEpochFloorShown(t *testing.T) {
	v := sampleView()
	var page, table bytes.Buffer
	if err := WriteHTML(&page, v, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, v); err != nil {
		t.Fatal(err)
	}
	want := "7 from 10.0.0.1:80, held 2s more by its lease"
	if !strings.Contains(page.String(), `data-epoch-floor="7">`+want+`</span>`) {
		t.Errorf("the page does not show the floor %q:\n%s", want, page.String())
	}
	if !strings.Contains(table.String(), "epoch floor "+want+";") {
		t.Errorf("the table does not show the floor %q:\n%s", want, table.String())
	}
	ended := v.GeneratedAt.Add(-time.Second)
	v.LeaderPools[0].EpochFloor.Until = &ended
	table.Reset()
	if err := WriteTable(&table, v); err != nil {
		t.Fatal(err)
	}
	if want := "epoch floor 7 from 10.0.0.1:80, its lease ended: a lower epoch may lead;"; !strings.Contains(table.String(), want) {
		t.Errorf("the table does not show %q:\n%s", want, table.String())
	}
}

// Upload affinity shows the events that happened: while none has, the
// table has no block and the page says so, rather than a heading over
// zeros.
func TestUploadAffinityShowsEventsThatHappened(t *testing.T) {
	v := View{GeneratedAt: time.Now(), UploadAffinity: UploadAffinity{Events: map[string]float64{"hit": 0, "learned": 0}}}
	var page, table bytes.Buffer
	if err := WriteHTML(&page, v, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, v); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "data-event") || !strings.Contains(page.String(), "No upload seen yet.") {
		t.Errorf("the page with no upload event yet:\n%s", page.String())
	}
	if strings.Contains(table.String(), "UPLOAD AFFINITY") {
		t.Errorf("the table with no upload event yet:\n%s", table.String())
	}

	v.UploadAffinity.Events["learned"] = 1
	page.Reset()
	table.Reset()
	if err := WriteHTML(&page, v, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `data-event="learned">1<`) || strings.Contains(page.String(), `data-event="hit"`) {
		t.Errorf("the page after one learned upload:\n%s", page.String())
	}
	if !strings.Contains(table.String(), "UPLOAD AFFINITY\nEVENTS\nlearned 1\n") {
		t.Errorf("the table after one learned upload:\n%s", table.String())
	}
}

// A full memory store that refuses new keys reads degraded on the page and
// in the table, not up (issue 19.2), with its evictions on the page.
func TestDegradedStoreShown(t *testing.T) {
	v := View{GeneratedAt: time.Now(), Stores: []Store{{Store: "memory", Up: true, Degraded: true, Evictions: 4500, Refusals: 1}}}
	var page, table bytes.Buffer
	if err := WriteHTML(&page, v, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, v); err != nil {
		t.Fatal(err)
	}
	if p := page.String(); !strings.Contains(p, `data-degraded="true"`) || !strings.Contains(p, "degraded (full)</span>") ||
		!strings.Contains(p, "4500 evicted") || strings.Contains(p, `class="state up"`) {
		t.Errorf("the page does not show the memory store degraded:\n%s", p)
	}
	if !regexp.MustCompile(`\nmemory +DEGRADED \(full\) `).MatchString(table.String()) {
		t.Errorf("the table does not show the memory store degraded:\n%s", table.String())
	}
}
