package caddymodule

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-ha/caddy-ha/status"
	"github.com/caddy-ha/caddy-ha/store"
)

// Every metric caddy-ha exports is defined here; docs/operations.md's "Metrics"
// table lists them. The scheme: caddy_ha_<capability>_<quantity>[_<unit>]
// [_total], the capability one of leader, rate_limit, store,
// upload_affinity, pinned, cloudflare, reload; each series is named by its
// object (pool, zone, store, file) and at most one enumeration label
// (outcome, reason, decision, event).
//
// The collectors are process-wide: pools, stores and Cloudflare sets
// outlive a config, and each new config's registry gets the same ones.
// A series named by an object lives as long as the object: the last user
// of a pool, zone or store lets go of its series (seriesOwners), and the
// gauges of a live state are read from it at each scrape (liveCollector).

const (
	metricsNamespace = "caddy"
	metricsSubsystem = "ha"
)

func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name: name, Help: help}, labels)
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name: name, Help: help}, labels)
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name: name, Help: help, Buckets: buckets}, labels)
}

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, name), help, labels, nil)
}

// Leader pools (lb_policy leader), by pool: the pool's upstreams, joined by ",".
var leaderMetrics = struct {
	current, epoch, holding             *prometheus.GaugeVec
	failovers, held, replayed, noLeader *prometheus.CounterVec
	probe                               *prometheus.HistogramVec
	leaderlessSeconds, holdSeconds      *prometheus.Desc
	epochFloor                          *prometheus.Desc
}{
	current: newGaugeVec("leader_current",
		"1 for the upstream that is the pool's current leader, 0 for the others.", "pool", "upstream"),
	epoch: newGaugeVec("leader_epoch",
		"Lease epoch of the pool's current leader (the last one while there is none).", "pool"),
	holding: newGaugeVec("leader_holding_requests",
		"Requests waiting for a leader right now.", "pool"),
	failovers: newCounterVec("leader_failovers_total",
		"Times the pool found a leader other than the last one (another node or epoch).", "pool"),
	held: newCounterVec("leader_held_requests_total",
		"Requests that waited for a leader.", "pool"),
	replayed: newCounterVec("leader_replayed_requests_total",
		"Requests replayed to the leader that provably never executed on the node they were sent to: reason follower_refusal (refused by a node confirmed to be a follower) or planned_stop (its connection closed by a node that released its lease early).",
		"pool", "reason"),
	noLeader: newCounterVec("leader_no_leader_responses_total",
		"Requests answered with 503 because no leader was found within hold.", "pool"),
	probe: newHistogramVec("leader_probe_duration_seconds",
		"Duration of leader probes, by outcome: leader, stale (a leader's answer with an epoch below the epoch floor), follower (503), failed (no answer or another status).",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "pool", "upstream", "outcome"),
	leaderlessSeconds: newDesc("leader_leaderless_seconds",
		"How long the pool has had no leader; 0 while it has one.", "pool"),
	holdSeconds: newDesc("leader_hold_seconds",
		"How long a request waits for a leader before its 503 (hold, or a longer try_duration), in the newest config using the pool.", "pool"),
	epochFloor: newDesc("leader_epoch_floor",
		"Epoch below which leader answers are stale: the highest epoch whose claim's lease is valid, or the last one while none is.", "pool"),
}

// Rate-limit zones (edge_rate_limit), by zone name.
var rateLimitMetrics = struct {
	requests, storeErrors, fallback *prometheus.CounterVec
	latency                         *prometheus.HistogramVec
}{
	requests: newCounterVec("rate_limit_requests_total",
		"Requests counted in a zone, by decision: allowed, limited (429), denied (503: store down with on_store_error deny).",
		"zone", "decision"),
	storeErrors: newCounterVec("rate_limit_store_errors_total",
		"Store calls that failed or missed store_timeout.", "zone"),
	fallback: newCounterVec("rate_limit_fallback_decisions_total",
		"Decisions taken by on_store_error because the store failed or was known to be down.", "zone"),
	latency: newHistogramVec("rate_limit_store_duration_seconds",
		"Time a decision waited for a store that answered (one observation per decision that asked it: decisions out of a lease held here ask none); failures count in rate_limit_store_errors_total.",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1}, "zone"),
}

// Stores (the ha app's, and a handler's own), by store: its description,
// e.g. "redis 10.0.0.5:6379".
var storeMetrics = struct {
	up, clockOffset, pingSeconds  *prometheus.GaugeVec
	degraded, evictions, refusals *prometheus.Desc
}{
	up: newGaugeVec("store_up",
		"1 while the store answers, 0 while it is taken to be down.", "store"),
	clockOffset: newGaugeVec("store_clock_offset_seconds",
		"How far the store's clock (Redis TIME, the database's now()) is ahead of this Caddy's, as last measured; rate-limit windows follow the store's.",
		"store"),
	pingSeconds: newGaugeVec("store_ping_seconds",
		"Duration of the store's last answered health check.", "store"),
	degraded: newDesc("store_degraded",
		"1 while a bounded store (memory) has refused a new key for lack of room within the last 10s (rate limits then decide by on_store_error), else 0.", "store"),
	evictions: newDesc("store_evictions_total",
		"Counters a bounded store (memory) evicted to make room for new ones, smallest counts first.", "store"),
	refusals: newDesc("store_refusals_total",
		"New keys a bounded store (memory) refused for lack of room.", "store"),
}

// Upload affinity (lb_policy upload_affinity), process-wide.
var affinityEvents = newCounterVec("upload_affinity_events_total",
	"Upload affinity events: learned, hit, miss, discovered, removed, owner_down (503), store_error (503), refused (400/404), unreachable (a server out of creation hashing).",
	"event")

// Pinned connections (transport pinned), by pool: the proxy's upstreams.
var pinnedMetrics = struct {
	connections          *prometheus.GaugeVec
	pins, ended, refused *prometheus.CounterVec
}{
	connections: newGaugeVec("pinned_connections",
		"Client connections with an upstream connection of their own right now.", "pool"),
	pins: newCounterVec("pinned_pins_total",
		"Pins begun: a client connection bound to an upstream connection of its own (again after a failover).", "pool"),
	ended: newCounterVec("pinned_pins_ended_total",
		"Pins ended, by reason: client_closed, upstream_closed, failover, idle, upgraded, pool_closed, handshake_timeout.", "pool", "reason"),
	refused: newCounterVec("pinned_refusals_total",
		"Requests the pinned transport answered itself, by reason: cap, handshake_cap, client_cap, http2, handshake_cut, pin_lost, no_client.", "pool", "reason"),
}

// Cloudflare ranges (trusted_proxies cloudflare_ranges), by file: the saved
// copy of the set.
var cloudflareMetrics = struct {
	failures                   *prometheus.CounterVec
	ranges, refreshed, refresh *prometheus.Desc
}{
	failures: newCounterVec("cloudflare_refresh_failures_total",
		"Downloads or reads of the ranges that failed; the last good set is kept.", "file"),
	ranges: newDesc("cloudflare_ranges",
		"Ranges trusted right now; 0 before the first good list.", "file"),
	refreshed: newDesc("cloudflare_refreshed_timestamp_seconds",
		"When the trusted ranges were last fetched: the last good download, or with downloads off the saved copy's modification time; 0 before the first.", "file"),
	refresh: newDesc("cloudflare_refresh_interval_seconds",
		"How often the ranges are downloaded again (with downloads off: the file checked).", "file"),
}

// Config reloads (listener wrapper reload_handoff), process-wide.
var handedOffConns = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
	Name: "reload_handed_off_connections_total",
	Help: "Kept-alive HTTP/1 connections a stopping server handed to its successor in a config reload instead of closing them."})
var reloadClosedConns = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
	Name: "reload_closed_connections_total",
	Help: "Connections a stopping server closed in a config reload instead of handing them off (HTTP/2, upgraded, pipelined, answered with Connection: close, ended by the client, or no successor on the address)."})

// The series owned by each kind of object.
var (
	leaderSeries     = newSeriesOwners[*leaderPool]("pool", leaderMetrics.current, leaderMetrics.epoch, leaderMetrics.holding, leaderMetrics.failovers, leaderMetrics.held, leaderMetrics.replayed, leaderMetrics.noLeader, leaderMetrics.probe)
	zoneSeries       = newSeriesOwners[*rateZone]("zone", rateLimitMetrics.requests, rateLimitMetrics.storeErrors, rateLimitMetrics.fallback, rateLimitMetrics.latency)
	storeSeries      = newSeriesOwners[*sharedStore]("store", storeMetrics.up, storeMetrics.clockOffset, storeMetrics.pingSeconds)
	pinnedSeries     = newSeriesOwners[*PinnedTransport]("pool", pinnedMetrics.connections, pinnedMetrics.pins, pinnedMetrics.ended, pinnedMetrics.refused)
	cloudflareSeries = newSeriesOwners[*cloudflareSet]("file", cloudflareMetrics.failures)
)

// haCollectors are every collector, registered on each config's registry.
var haCollectors = []prometheus.Collector{
	leaderMetrics.current, leaderMetrics.epoch, leaderMetrics.holding, leaderMetrics.failovers, leaderMetrics.held,
	leaderMetrics.replayed, leaderMetrics.noLeader, leaderMetrics.probe,
	rateLimitMetrics.requests, rateLimitMetrics.storeErrors, rateLimitMetrics.fallback, rateLimitMetrics.latency,
	storeMetrics.up, storeMetrics.clockOffset, storeMetrics.pingSeconds,
	affinityEvents,
	pinnedMetrics.connections, pinnedMetrics.pins, pinnedMetrics.ended, pinnedMetrics.refused,
	cloudflareMetrics.failures,
	handedOffConns, reloadClosedConns,
	liveCollector{},
}

// registerMetrics adds caddy-ha's collectors to a config's registry; they
// outlive configs, so a later config finds them there. Collectors without
// series export nothing, so every module registers all of them.
func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range haCollectors {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// seriesOwners tracks the live objects of one kind (pools, zones, stores),
// of type T, by the label value that names their series: two objects can
// share one (a reload that changed only a password opens the new store
// before the old one closes), so the series go only with the last. An
// object holds its series before it looks them up, and publishes itself to
// the status view once it is built.
type seriesOwners[T any] struct {
	label string
	vecs  []*prometheus.MetricVec
	mu    sync.Mutex
	held  map[string][]*seriesHold[T] // by label value, oldest first
}

// seriesHold is one object's hold on the series of a label value.
type seriesHold[T any] struct {
	owners    *seriesOwners[T]
	value     string
	state     T // the object, once published
	published bool
}

func newSeriesOwners[T any](label string, vecs ...any) *seriesOwners[T] {
	o := &seriesOwners[T]{label: label, held: map[string][]*seriesHold[T]{}}
	for _, v := range vecs {
		switch v := v.(type) {
		case *prometheus.CounterVec:
			o.vecs = append(o.vecs, v.MetricVec)
		case *prometheus.GaugeVec:
			o.vecs = append(o.vecs, v.MetricVec)
		case *prometheus.HistogramVec:
			o.vecs = append(o.vecs, v.MetricVec)
		default:
			panic("seriesOwners: not a metric vector")
		}
	}
	return o
}

// hold records one more holder of the series named value.
func (o *seriesOwners[T]) hold(value string) *seriesHold[T] {
	h := &seriesHold[T]{owners: o, value: value}
	o.mu.Lock()
	o.held[value] = append(o.held[value], h)
	o.mu.Unlock()
	return h
}

// publish shows the holder's object, fully built, in the status view and
// the live gauges.
func (h *seriesHold[T]) publish(state T) {
	h.owners.mu.Lock()
	h.state, h.published = state, true
	h.owners.mu.Unlock()
}

// release lets go of the hold; the last holder's release deletes every
// series named its value. A nil hold is none.
func (h *seriesHold[T]) release() {
	if h == nil {
		return
	}
	o := h.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	holds := o.held[h.value]
	if i := slices.Index(holds, h); i >= 0 {
		holds = slices.Delete(holds, i, i+1)
	}
	if len(holds) > 0 {
		o.held[h.value] = holds
		return
	}
	delete(o.held, h.value)
	for _, v := range o.vecs {
		v.DeletePartialMatch(prometheus.Labels{o.label: h.value})
	}
}

// each calls f with every held label value that has a published object,
// in the order of the values, and its published objects, oldest first.
func (o *seriesOwners[T]) each(f func(value string, states []T)) {
	o.mu.Lock()
	byValue := make(map[string][]T, len(o.held))
	for v, holds := range o.held {
		for _, h := range holds {
			if h.published {
				byValue[v] = append(byValue[v], h.state)
			}
		}
	}
	o.mu.Unlock()
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		f(v, byValue[v])
	}
}

// newest is the newest published object of each label value, in the
// order of the values.
func (o *seriesOwners[T]) newest() []T {
	var newest []T
	o.each(func(_ string, states []T) { newest = append(newest, states[len(states)-1]) })
	return newest
}

// seriesLookups guards the lookups (WithLabelValues) of a gone object's
// series: a request of an old config may still report an event after the
// series were deleted, and must not bring them back.
type seriesLookups struct {
	mu     sync.Mutex
	closed bool
}

// do runs f, which looks up series, unless the object is gone.
func (l *seriesLookups) do(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		f()
	}
}

// close ends the lookups, before the series are deleted.
func (l *seriesLookups) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// liveCollector exports, at each scrape, the gauges read from a live state
// rather than kept up to date: they exist exactly while their object does.
type liveCollector struct{}

// Describe sends the descriptors of the live gauges.
func (liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderMetrics.leaderlessSeconds, leaderMetrics.holdSeconds, leaderMetrics.epochFloor,
		storeMetrics.degraded, storeMetrics.evictions, storeMetrics.refusals,
		cloudflareMetrics.ranges, cloudflareMetrics.refreshed, cloudflareMetrics.refresh} {
		ch <- d
	}
}

// Collect sends the live gauges of every leader pool, bounded store and
// Cloudflare set.
func (liveCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label)
	}
	for _, p := range leaderSeries.newest() {
		v := status.LeaderPool{PoolView: p.mon.View()}
		gauge(leaderMetrics.leaderlessSeconds, v.Leaderless(now).Seconds(), v.Pool)
		gauge(leaderMetrics.holdSeconds, p.hold().Seconds(), v.Pool)
		gauge(leaderMetrics.epochFloor, float64(v.EpochFloor.Epoch), v.Pool)
	}
	for _, sh := range storeSeries.newest() {
		if f, ok := sh.fullness(); ok {
			gauge(storeMetrics.degraded, b2f(f.Degraded), sh.name)
			ch <- prometheus.MustNewConstMetric(storeMetrics.evictions, prometheus.CounterValue, float64(f.Evictions), sh.name)
			ch <- prometheus.MustNewConstMetric(storeMetrics.refusals, prometheus.CounterValue, float64(f.Refusals), sh.name)
		}
	}
	for _, s := range cloudflareSeries.newest() {
		st := s.state()
		refreshed := 0.0
		if st.RefreshedAt != nil {
			refreshed = float64(st.RefreshedAt.UnixNano()) / 1e9
		}
		gauge(cloudflareMetrics.ranges, float64(st.Ranges), s.cfg.File)
		gauge(cloudflareMetrics.refreshed, refreshed, s.cfg.File)
		gauge(cloudflareMetrics.refresh, time.Duration(s.cfg.Refresh).Seconds(), s.cfg.File)
	}
}

// fullness is how a bounded store (memory) copes with its bound; false for
// the others.
func (sh *sharedStore) fullness() (store.Fullness, bool) {
	b, ok := sh.store.(store.Bounded)
	if !ok {
		return store.Fullness{}, false
	}
	return b.Fullness(), true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// readMetric is the value of a counter or gauge, for the status view.
func readMetric(m prometheus.Metric) float64 {
	var d dto.Metric
	if m.Write(&d) != nil {
		return 0
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return 0
}
