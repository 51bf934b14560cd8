package caddymodule

import (
	"slices"
	"testing"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

// The status view's history of leader changes never shows a node handing
// over to itself. The monitor names the last leader it had, so a node that
// lost its lead and took it again with a new epoch (the demo's database
// outage, a crashed node started again alone) read
// "127.0.0.1:9002 → 127.0.0.1:9002 (failover)".
func TestLeaderHistoryHasNoHandoverToItself(t *testing.T) {
	const pool = "history-test:1,history-test:2"
	const a, b = "history-test:1", "history-test:2"
	hold := leaderSeries.hold(pool)
	obs := newLeaderObserver(pool)
	t.Cleanup(func() { obs.lookups.close(); hold.release() })

	for _, c := range []healthcheck.LeaderChange{
		{To: b, Epoch: 2, Reason: "first leader"},
		{From: b, Reason: "lost: probe answered 503"},
		{From: b, To: b, Epoch: 3, Failover: true, Reason: "the same node, a new lease, after the loss"},
		{From: b, InDoubt: true, Reason: "a doubt: not a row"},
		{From: b, To: b, Epoch: 3, Confirmed: true, Reason: "confirmed: not a row"},
		{From: b, To: a, Epoch: 4, Failover: true, Reason: "handed over"},
		{From: a, To: a, Epoch: 5, Failover: true, Reason: "the same node, a new lease, no loss seen"},
		{From: a, Reason: "lost: probe failed"},
		{From: a, To: b, Epoch: 6, Failover: true, Reason: "another node after the loss"},
	} {
		c.Pool = pool
		obs.LeaderChanged(c)
	}
	rows := obs.lastChanges()
	slices.Reverse(rows) // oldest first
	type row struct {
		from, to string
		epoch    int64
	}
	var got []row
	for _, c := range rows {
		got = append(got, row{c.From, c.To, c.Epoch})
	}
	// A lost lead's row shows the epoch lost; a failover after a loss
	// names the leader lost.
	want := []row{{"", b, 2}, {b, "", 2}, {"", b, 3}, {b, a, 4}, {"", a, 5}, {a, "", 5}, {a, b, 6}}
	if !slices.Equal(got, want) {
		t.Fatalf("history (from, to, epoch), oldest first:\n got %v\nwant %v", got, want)
	}
}
