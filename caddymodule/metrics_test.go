package caddymodule

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two objects sharing a label value (two configs in a reload) share its
// series: the first to go leaves them, the last takes them; the view sees
// an object only once it is published.
func TestSeriesOwners(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_series_owners_total"}, []string{"pool", "reason"})
	owners := newSeriesOwners("pool", vec)
	published := func() (names []string) {
		owners.each(func(value string, states []any) {
			for _, s := range states {
				names = append(names, value+"="+s.(string))
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
	var newest []string
	owners.newest(func(value string, state any) { newest = append(newest, value+"="+state.(string)) })
	if strings.Join(newest, " ") != "p=new q=q" {
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
	var nothing *seriesHold
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
