package caddymodule

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

// Two objects sharing a label value (two configs in a reload) share its
// series: the first to go leaves them, the last takes them; the view sees
// an object only once it is published.
func TestSeriesOwners(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_series_owners_total"}, []string{"pool", "reason"})
	owners := newSeriesOwners[string]("pool", vec)
	published := func() (names []string) {
		owners.each(func(value string, states []string) {
			for _, s := range states {
				names = append(names, value+"="+s)
			}
		})
		return names
	}

	oldHold := owners.hold("p")
	vec.WithLabelValues("p", "a").Inc()
	if got := published(); len(got) != 0 {
		t.Fatalf("an unpublished object is in the view: %v", got)
	}
	oldHold.publish("old")
	newHold := owners.hold("p")
	newHold.publish("new")
	other := owners.hold("q")
	vec.WithLabelValues("q", "a").Inc()
	other.publish("q")
	if got := strings.Join(published(), " "); got != "p=old p=new q=q" {
		t.Fatalf("published %q", got)
	}
	if newest := owners.newest(); strings.Join(newest, " ") != "new q" {
		t.Fatalf("newest %v", newest)
	}

	oldHold.release()
	if n := testutil.CollectAndCount(vec); n != 2 {
		t.Fatalf("%d series after the first of two holders left, want 2", n)
	}
	newHold.release()
	if n := testutil.CollectAndCount(vec); n != 1 {
		t.Fatalf("%d series after the last holder of p left, want q's only", n)
	}
	if got := strings.Join(published(), " "); got != "q=q" {
		t.Fatalf("published %q", got)
	}
	var nothing *seriesHold[string]
	nothing.release() // a hold never taken
}

// Once closed, lookups no longer run, so a late event cannot bring back
// the series of a gone object.
func TestSeriesLookupsClosed(t *testing.T) {
	var l seriesLookups
	ran := 0
	l.do(func() { ran++ })
	l.close()
	l.do(func() { ran++ })
	if ran != 1 {
		t.Fatalf("ran %d times", ran)
	}
}

// A pool's observer, once its pool is gone, brings none of its series back:
// a request of an old config may still report a doubt or a new leader.
func TestGonePoolsObserverCreatesNoSeries(t *testing.T) {
	const pool = "gone-pool-test:1,gone-pool-test:2"
	count := func() int {
		n := 0
		for _, c := range []prometheus.Collector{leaderMetrics.current, leaderMetrics.probe} {
			for range countsBy(c, map[string]string{"pool": pool}, "upstream") {
				n++
			}
		}
		return n
	}
	hold := leaderSeries.hold(pool)
	obs := newLeaderObserver(pool)
	obs.LeaderChanged(healthcheck.LeaderChange{Pool: pool, To: "gone-pool-test:1", Epoch: 1})
	if count() == 0 {
		t.Fatal("no series while the pool lives")
	}
	obs.lookups.close() // what leaderPool.Destruct does, before the release
	hold.release()
	obs.LeaderChanged(healthcheck.LeaderChange{Pool: pool, From: "gone-pool-test:1", To: "gone-pool-test:2", Epoch: 2, Failover: true})
	obs.Probed(pool, "gone-pool-test:2", healthcheck.Result{Answered: true, Status: 200, Leader: true, Epoch: 2}, healthcheck.StatusLeader)
	if n := count(); n != 0 {
		t.Fatalf("%d series of the gone pool came back", n)
	}
}
