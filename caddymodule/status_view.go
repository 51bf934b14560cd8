package caddymodule

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-ha/caddy-ha/status"
)

// currentStatus gathers the operator's view from the live pools, zones,
// stores and sets (the same ones whose series /metrics exports), for the
// ha_status page, the admin API and `caddy ha status`.
func currentStatus() status.View {
	v := status.View{
		GeneratedAt:    time.Now(),
		LeaderPools:    []status.LeaderPool{},
		RateLimitZones: []status.RateLimitZone{},
		Stores:         []status.Store{},

		CloudflareRanges: []status.CloudflareSet{},
		PinnedPools:      []status.PinnedPool{},
	}
	if uploadAffinityPolicies.Load() > 0 {
		v.UploadAffinity.Events = countsBy(affinityEvents, nil, "event")
	}
	for _, p := range leaderSeries.newest() {
		pv := p.mon.View()
		v.LeaderPools = append(v.LeaderPools, status.LeaderPool{
			PoolView:          pv,
			HoldSeconds:       p.hold().Seconds(),
			LastChanges:       p.obs.lastChanges(),
			Failovers:         readMetric(p.obs.failovers),
			HoldingRequests:   readMetric(p.obs.holding),
			HeldRequests:      readMetric(p.obs.held),
			ReplayedRequests:  readMetric(p.obs.replayedRefusal) + readMetric(p.obs.replayedClosed),
			NoLeaderResponses: readMetric(p.obs.noLeader),
		})
	}
	for _, z := range zoneSeries.newest() {
		zv := z.settings
		zv.Allowed, zv.Limited, zv.Denied = readMetric(z.metrics.allowed), readMetric(z.metrics.limited), readMetric(z.metrics.denied)
		zv.StoreErrors, zv.FallbackDecisions = readMetric(z.metrics.storeErrors), readMetric(z.metrics.fallback)
		v.RateLimitZones = append(v.RateLimitZones, zv)
	}
	for _, sh := range storeSeries.newest() {
		f, _ := sh.fullness()
		var ping, offset time.Duration // none for the memory store
		if sh.health != nil {
			ping, offset = sh.health.Ping(), sh.health.ClockOffset()
		}
		v.Stores = append(v.Stores, status.Store{
			Store:              sh.name,
			Up:                 sh.guard == nil || sh.guard.Up(),
			RetryInSeconds:     sh.RetryIn().Seconds(),
			PingMillis:         float64(ping.Microseconds()) / 1000,
			ClockOffsetSeconds: offset.Seconds(),
			Degraded:           f.Degraded,
			Evictions:          float64(f.Evictions),
			Refusals:           float64(f.Refusals),
		})
	}
	for _, s := range cloudflareSeries.newest() {
		v.CloudflareRanges = append(v.CloudflareRanges, s.state())
	}
	pinnedSeries.each(func(pool string, transports []*PinnedTransport) {
		// Transports of the same upstreams (two configs in a reload, or two
		// sites) share the pool's series; their connections add up.
		match := map[string]string{"pool": pool}
		p := status.PinnedPool{Pool: pool, Ended: countsBy(pinnedMetrics.ended, match, "reason"),
			Refused: countsBy(pinnedMetrics.refused, match, "reason")}
		for _, t := range transports {
			p.Connections += float64(t.pool.Len())
			p.Max += t.MaxPinned
			p.Pins = readMetric(t.observer.pins)
			p.AtCap = newestPerCap(p.AtCap, t.observer.capRefusals())
		}
		v.PinnedPools = append(v.PinnedPools, p)
	})
	return v
}

// newestPerCap merges the cap refusals of transports sharing a pool (two
// configs in a reload): the newest of each cap.
func newestPerCap(have, more []status.CapRefusal) []status.CapRefusal {
	for _, c := range more {
		i := slices.IndexFunc(have, func(h status.CapRefusal) bool { return h.Cap == c.Cap })
		switch {
		case i < 0:
			have = append(have, c)
		case c.At.After(*have[i].At):
			have[i] = c
		}
	}
	return have
}

// countsBy reads the series of c whose labels include match, by the value
// of label, without creating any.
func countsBy(c prometheus.Collector, match map[string]string, label string) map[string]float64 {
	counts := map[string]float64{}
	reg := prometheus.NewRegistry()
	if reg.Register(c) != nil {
		return counts
	}
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			matches := true
			for k, want := range match {
				matches = matches && labels[k] == want
			}
			if matches {
				counts[labels[label]] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return counts
}
