package caddymodule

import (
	"errors"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

// leaderMetrics are process-wide: probers outlive a config, and each new
// config's registry gets the same collectors.
var leaderMetrics = struct {
	leader     *prometheus.GaugeVec
	epoch      *prometheus.GaugeVec
	failovers  *prometheus.CounterVec
	probe      *prometheus.HistogramVec
	held       *prometheus.CounterVec
	holding    *prometheus.GaugeVec
	replayed   *prometheus.CounterVec
	noLeader   *prometheus.CounterVec
	collectors []prometheus.Collector
}{}

func init() {
	const ns, sub = "caddy", "ha"
	m := &leaderMetrics
	m.leader = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
		Help: "1 for the upstream that is the pool's current leader, 0 for the others."}, []string{"pool", "upstream"})
	m.epoch = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "lease_epoch",
		Help: "Lease epoch of the pool's current leader (the last one while there is none)."}, []string{"pool"})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "failovers_total",
		Help: "Times the pool found a leader other than the last one (another node or epoch)."}, []string{"pool"})
	m.probe = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "probe_duration_seconds",
		Help:    "Duration of leader probes, by outcome (leader, follower: 503, failed: no answer or another status).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"pool", "upstream", "outcome"})
	m.held = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "held_requests_total",
		Help: "Requests that waited for a leader."}, []string{"pool"})
	m.holding = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "requests_holding",
		Help: "Requests waiting for a leader right now."}, []string{"pool"})
	m.replayed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "replayed_requests_total",
		Help: "Requests replayed to the leader that provably never executed on the node they were sent to: reason follower_refusal (refused by a node confirmed to be a follower) or planned_stop (its connection closed by a node that released its lease early)."}, []string{"pool", "reason"})
	m.noLeader = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "no_leader_responses_total",
		Help: "Requests answered with 503 because no leader was found within hold."}, []string{"pool"})
	m.collectors = []prometheus.Collector{m.leader, m.epoch, m.failovers, m.probe, m.held, m.holding, m.replayed, m.noLeader}
}

// registerCollectors adds process-wide collectors to a config's registry;
// the collectors outlive configs, so a later config finds them there.
func registerCollectors(reg *prometheus.Registry, collectors ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// leaderObserver turns a pool's events into logs and metrics.
type leaderObserver struct {
	pool string
	// The pool's request metrics, looked up once.
	held, noLeader prometheus.Counter
	// Requests replayed after a follower's refusal, or after a planned
	// stop closed their connection.
	replayedRefusal, replayedClosed prometheus.Counter
	holding                         prometheus.Gauge

	// The flags make an outage one log line each, not one per request.
	mu             sync.Mutex
	noLeaderLogged bool
	refusedLogged  bool
}

func newLeaderObserver(pool string) *leaderObserver {
	return &leaderObserver{
		pool:            pool,
		held:            leaderMetrics.held.WithLabelValues(pool),
		replayedRefusal: leaderMetrics.replayed.WithLabelValues(pool, "follower_refusal"),
		replayedClosed:  leaderMetrics.replayed.WithLabelValues(pool, "planned_stop"),
		noLeader:        leaderMetrics.noLeader.WithLabelValues(pool),
		holding:         leaderMetrics.holding.WithLabelValues(pool),
	}
}

// answeredNoLeader logs, once per outage, that requests are being answered
// with 503 because no leader was found within hold.
func (o *leaderObserver) answeredNoLeader(hold time.Duration) {
	o.noLeader.Inc()
	o.mu.Lock()
	first := !o.refusedLogged
	o.refusedLogged = true
	o.mu.Unlock()
	if first {
		o.logger().Error("no leader within hold: answering 503 with Retry-After until a node leads",
			zap.String("pool", o.pool), zap.Duration("hold", hold))
	}
}

func (o *leaderObserver) logger() *zap.Logger {
	// Looked up per event: the pool outlives the config that created it.
	return caddy.Log().Named("http.reverse_proxy.selection_policies.leader")
}

// LeaderChanged logs and counts a change of leader.
func (o *leaderObserver) LeaderChanged(c healthcheck.LeaderChange) {
	if c.From != "" {
		leaderMetrics.leader.WithLabelValues(c.Pool, c.From).Set(0)
	}
	if c.To != "" {
		leaderMetrics.leader.WithLabelValues(c.Pool, c.To).Set(1)
	}
	o.mu.Lock()
	outage := o.noLeaderLogged
	if c.To != "" {
		// A leader again: the next outage is logged anew.
		o.noLeaderLogged, o.refusedLogged = false, false
	}
	o.mu.Unlock()
	switch {
	case c.InDoubt || c.Confirmed && !outage:
		// A doubt that the next probe settles is not a change of leader.
		o.logger().Debug("leader in doubt or confirmed", zap.String("pool", c.Pool), zap.String("node", c.To),
			zap.Bool("in_doubt", c.InDoubt), zap.String("reason", c.Reason))
	case c.To == "":
		o.mu.Lock()
		first := !o.noLeaderLogged
		o.noLeaderLogged = true
		o.mu.Unlock()
		if first {
			o.logger().Warn("no leader: holding requests", zap.String("pool", c.Pool), zap.String("previous", c.From), zap.String("reason", c.Reason))
		}
	default:
		leaderMetrics.epoch.WithLabelValues(c.Pool).Set(float64(c.Epoch))
		if c.Failover {
			leaderMetrics.failovers.WithLabelValues(c.Pool).Inc()
		}
		o.logger().Info("leader", zap.String("pool", c.Pool), zap.String("node", c.To), zap.Int64("epoch", c.Epoch),
			zap.Bool("failover", c.Failover), zap.String("previous", c.From), zap.String("reason", c.Reason))
	}
}

// Probed records a probe's duration and outcome.
func (o *leaderObserver) Probed(pool, addr string, r healthcheck.Result) {
	outcome := "failed"
	switch {
	case r.Leader:
		outcome = "leader"
	case r.Answered && r.Status == 503:
		outcome = "follower"
	}
	leaderMetrics.probe.WithLabelValues(pool, addr, outcome).Observe(r.Duration.Seconds())
}

// Panicked logs a recovered panic of a probe loop with its stack; the
// loop probes the node again an interval later.
func (o *leaderObserver) Panicked(pool, addr string, v any, stack []byte) {
	o.logger().Error("leader probe panicked", zap.String("pool", pool), zap.String("node", addr),
		zap.Any("error", v), zap.ByteString("stack", stack))
}
