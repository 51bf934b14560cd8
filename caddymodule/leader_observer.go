package caddymodule

import (
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/status"
)

// leaderObserver turns a pool's events into logs and metrics.
type leaderObserver struct {
	pool string
	// The pool's request metrics, looked up once.
	held, noLeader, failovers prometheus.Counter
	// Requests replayed after a follower's refusal, or after a planned
	// stop closed their connection.
	replayedRefusal, replayedClosed prometheus.Counter
	holding, epoch                  prometheus.Gauge
	lookups                         seriesLookups // closed once the pool is gone

	// The flags make an outage one log line each, not one per request.
	mu             sync.Mutex
	noLeaderLogged bool
	refusedLogged  bool
	// The last changes of leader, oldest first, for the status view.
	changes []status.LeaderChange
}

// keptLeaderChanges bounds the changes a pool keeps for the status view.
const keptLeaderChanges = 10

func newLeaderObserver(pool string) *leaderObserver {
	return &leaderObserver{
		pool:            pool,
		held:            leaderMetrics.held.WithLabelValues(pool),
		replayedRefusal: leaderMetrics.replayed.WithLabelValues(pool, "follower_refusal"),
		replayedClosed:  leaderMetrics.replayed.WithLabelValues(pool, "planned_stop"),
		noLeader:        leaderMetrics.noLeader.WithLabelValues(pool),
		failovers:       leaderMetrics.failovers.WithLabelValues(pool),
		holding:         leaderMetrics.holding.WithLabelValues(pool),
		epoch:           leaderMetrics.epoch.WithLabelValues(pool),
	}
}

// setCurrent sets caddy_ha_leader_current of upstream addr.
func (o *leaderObserver) setCurrent(addr string, leads bool) {
	v := 0.0
	if leads {
		v = 1
	}
	o.lookups.do(func() { leaderMetrics.current.WithLabelValues(o.pool, addr).Set(v) })
}

// lastChanges returns the kept changes of leader, newest first.
func (o *leaderObserver) lastChanges() []status.LeaderChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	changes := slices.Clone(o.changes)
	slices.Reverse(changes)
	return changes
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
		o.setCurrent(c.From, false)
	}
	if c.To != "" {
		o.setCurrent(c.To, true)
	}
	o.mu.Lock()
	if !c.InDoubt && !c.Confirmed {
		from, epoch := c.From, c.Epoch
		if c.To == "" && len(o.changes) > 0 {
			epoch = o.changes[len(o.changes)-1].Epoch // the lead lost
		}
		if from == c.To {
			// The same node with a new lease (it lost its lead and took
			// it again): no leader handed over to another.
			from = ""
		}
		o.changes = append(o.changes, status.LeaderChange{At: time.Now(), From: from, To: c.To, Epoch: epoch,
			Failover: c.Failover, Reason: c.Reason})
		if len(o.changes) > keptLeaderChanges {
			o.changes = slices.Delete(o.changes, 0, len(o.changes)-keptLeaderChanges)
		}
	}
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
		o.epoch.Set(float64(c.Epoch))
		if c.Failover {
			o.failovers.Inc()
		}
		o.logger().Info("leader", zap.String("pool", c.Pool), zap.String("node", c.To), zap.Int64("epoch", c.Epoch),
			zap.Bool("failover", c.Failover), zap.String("previous", c.From), zap.String("reason", c.Reason))
	}
}

// EpochFloorChanged logs a change of the epoch floor: at WARN when it went
// backwards or jumped far ahead, else at DEBUG (every new leader's epoch
// is logged with it).
func (o *leaderObserver) EpochFloorChanged(c healthcheck.EpochFloorChange) {
	fields := []zap.Field{zap.String("pool", c.Pool), zap.Int64("from", c.From), zap.Int64("to", c.To), zap.String("node", c.Node)}
	switch {
	case c.Backwards():
		o.logger().Warn("epoch went backwards: every higher claim's lease ran out, so the lower epoch is taken", fields...)
	case c.FarJump():
		o.logger().Warn("epoch jumped far beyond the last seen: leaders of lower epochs are stale while this claim's lease is valid", fields...)
	default:
		o.logger().Debug("epoch floor", fields...)
	}
}

// Probed records a probe's duration and outcome.
func (o *leaderObserver) Probed(pool, addr string, r healthcheck.Result, s healthcheck.Status) {
	outcome := "failed"
	switch {
	case r.Leader && s == healthcheck.StatusStale:
		outcome = "stale"
	case r.Leader:
		outcome = "leader"
	case r.Answered && r.Status == 503:
		outcome = "follower"
	}
	o.lookups.do(func() { leaderMetrics.probe.WithLabelValues(pool, addr, outcome).Observe(r.Duration.Seconds()) })
}

// Panicked logs a recovered panic of a probe loop with its stack; the
// loop probes the node again an interval later.
func (o *leaderObserver) Panicked(pool, addr string, v any, stack []byte) {
	o.logger().Error("leader probe panicked", zap.String("pool", pool), zap.String("node", addr),
		zap.Any("error", v), zap.ByteString("stack", stack))
}
