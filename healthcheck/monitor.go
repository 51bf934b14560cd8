package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is the timing of a Monitor.
type Config struct {
	// Interval between probes of each node while a leader is known.
	Interval time.Duration
	// FastInterval between probes of every node while there is no leader
	// or the leader is in doubt.
	FastInterval time.Duration
	// Timeout of one probe.
	Timeout time.Duration
	// Fails is how many probes in a row must fail before a node is down.
	// One failed probe already puts a leader in doubt.
	Fails int
	// Passes is how many leader answers in a row make a node the leader.
	Passes int
}

// Validate reports a configuration that cannot work, as a *SettingError.
func (c Config) Validate() error {
	bad := func(setting, problem string) error { return &SettingError{Setting: setting, Problem: problem} }
	switch {
	case c.Interval <= 0:
		return bad("interval", "must be positive")
	case c.FastInterval <= 0:
		return bad("fast_interval", "must be positive")
	case c.FastInterval > c.Interval:
		return bad("fast_interval", fmt.Sprintf("%v is longer than interval %v", c.FastInterval, c.Interval))
	case c.Timeout <= 0:
		return bad("timeout", "must be positive")
	case c.Fails < 1:
		return bad("fails", "must be at least 1")
	case c.Passes < 1:
		return bad("passes", "must be at least 1")
	}
	return nil
}

// SettingError is a Config setting that cannot work, named as
// configurations write it: interval, fast_interval, timeout, fails, passes.
type SettingError struct {
	Setting, Problem string
}

// Error names the setting and what is wrong with it.
func (e *SettingError) Error() string { return e.Setting + " " + e.Problem }

// minProbeGap keeps a node that many requests report at once from being
// probed back to back.
const minProbeGap = 10 * time.Millisecond

// Status is what a node is, as far as its probes tell.
type Status string

const (
	StatusUnknown  Status = "unknown"  // never answered
	StatusLeader   Status = "leader"   // answered 200 with an epoch at the floor
	StatusStale    Status = "stale"    // answered 200 with an epoch below the floor
	StatusFollower Status = "follower" // answered 503
	StatusDown     Status = "down"     // Fails probes in a row failed (no answer, or neither 200 nor 503)
)

// LeaderChange is reported whenever the pool's leader changes, including
// to none.
type LeaderChange struct {
	Pool string
	// From is the last leader's address, To the new one's ("": none).
	From, To string
	Epoch    int64
	Reason   string
	// Failover is true when To is a different leader (node or epoch) than
	// the last one the pool had.
	Failover bool
	// InDoubt is true when To is "" only because the leader is in doubt
	// (one failed probe, or a request that failed on it), and Confirmed
	// when To is the last leader again after a doubt: neither is a change
	// of leader yet.
	InDoubt, Confirmed bool
}

// Observer receives a Monitor's events; it must not block.
type Observer interface {
	LeaderChanged(LeaderChange)
	// Probed: a probe of addr ended with r, after which the node's status
	// is s (stale for a leader's answer of an epoch below the floor).
	Probed(pool, addr string, r Result, s Status)
	// EpochFloorChanged: the epoch below which leader answers are stale
	// changed, raised by a higher claim or lowered once every higher
	// claim's lease ran out.
	EpochFloorChanged(EpochFloorChange)
	// Panicked: a probe of addr panicked with v (in the Prober or the
	// Observer), which was recovered; the node is probed again an Interval
	// later.
	Panicked(pool, addr string, v any, stack []byte)
}

// EpochFloorChange is a change of a pool's epoch floor.
type EpochFloorChange struct {
	Pool     string
	From, To int64
	// Node is the node whose claim set To.
	Node string
}

// farEpochJump is how far beyond the floor a claim must be to be logged:
// the cluster's epoch grows by one per failover, so a jump this large is no
// failover missed between two probes but a forged or broken answer.
const farEpochJump = 1000

// Backwards reports whether the floor went down: every higher claim's
// lease ran out and a lower epoch leads (a cluster whose epochs restarted,
// or a forged claim that stopped).
func (c EpochFloorChange) Backwards() bool { return c.To < c.From }

// FarJump reports whether the floor rose more than farEpochJump above an
// epoch seen before.
func (c EpochFloorChange) FarJump() bool {
	return c.From > 0 && c.To > c.From && c.To-c.From > farEpochJump
}

// maxClaimHold bounds how long one leader answer holds the epoch floor:
// its lease by the measure that decides a leader's validity, but at most
// this long after the probe, so that a forged lease of centuries, or an
// answer without lease times, cannot stop the pool for ever. It is ten of
// the cluster's 30 s leases; a claimant that keeps renewing keeps the floor.
const maxClaimHold = 5 * time.Minute

// claim is a leader answer's hold on the epoch floor: epochs below it are
// stale until the claim's lease runs out.
type claim struct {
	epoch int64
	// until is when the claim stops holding the floor, in unix ns by this
	// process's clock (0: no claim).
	until int64
	// renewedAt is the answer's lastRenewAt: the same renewal seen again
	// extends nothing.
	renewedAt time.Time
	node      string
}

func (c claim) validAt(now int64) bool { return now < c.until }

// outranks reports whether c rather than o sets the floor at now: a valid
// claim over one that ran out, then the higher epoch, then the later end.
func (c claim) outranks(o claim, now int64) bool {
	if cv, ov := c.validAt(now), o.validAt(now); cv != ov {
		return cv
	}
	if c.epoch != o.epoch {
		return c.epoch > o.epoch
	}
	return c.until > o.until
}

// Node is one upstream of a pool.
type Node struct {
	Addr string

	kick chan struct{}
	// validUntil is when the leader's lease is known to end (unix ns, 0:
	// unknown), read without the lock on the request path.
	validUntil atomic.Int64

	// guarded by Monitor.mu
	status    Status
	fails     int
	passes    int
	epoch     int64
	doubtedAt time.Time // a live request failed on it; cleared by a later probe
	renewedAt time.Time // lastRenewAt of its last leader answer
	lease     leaseSeen // its last leader answer's lease, in the cluster's clock
	claim     claim     // its highest claim whose lease is valid, or its last
	last      Result
	answered  chan struct{} // closed and replaced after every probe
}

// leaseSeen is the lease of a node's last leader answer, as the cluster's
// own clock (the database's) writes it.
type leaseSeen struct {
	epoch int64
	// firstRenewAt is the earliest lastRenewAt seen for this epoch: about
	// when the node acquired it (the first renewal is the acquisition).
	firstRenewAt time.Time
	// expiresAt is leaseExpiresAt of the last answer.
	expiresAt time.Time
}

// Monitor keeps the leader view of one pool of nodes.
type Monitor struct {
	name   string
	cfg    Config
	prober Prober
	obs    Observer
	nodes  []*Node

	leader   atomic.Pointer[Node]    // nil: none, or in doubt
	readable atomic.Pointer[[]*Node] // nodes that answer probes and are not stale
	rr       atomic.Uint64
	waiting  atomic.Int64 // requests in WaitLeader, blocked until a leader is found

	// clock is the time that lease ends and doubts are measured by, the
	// Prober's clock (Result.Started): time.Now, or a test's fake clock.
	clock func() time.Time

	mu        sync.Mutex
	allProbed bool // every node has been probed once: claims can be compared
	// floor is the claim that sets the epoch floor: the highest epoch
	// whose lease is valid, or, while none is, the last one that was.
	floor        claim
	changed      chan struct{} // closed and replaced when a leader is found
	lastLeader   string        // addr@epoch of the last leader, for failover counts
	lastAddr     string        // address of the last leader, for logs
	lossReported bool          // the last leader's loss (not just a doubt) was reported
	noLeaderFrom time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMonitor creates a monitor of the nodes at addrs. It probes nothing
// until Start.
func NewMonitor(name string, addrs []string, cfg Config, prober Prober, obs Observer) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("no nodes to probe")
	}
	m := &Monitor{name: name, cfg: cfg, prober: prober, obs: obs, clock: time.Now, changed: make(chan struct{}), noLeaderFrom: time.Now()}
	for _, a := range addrs {
		m.nodes = append(m.nodes, &Node{Addr: a, kick: make(chan struct{}, 1), status: StatusUnknown, answered: make(chan struct{})})
	}
	m.readable.Store(&[]*Node{})
	return m, nil
}

// EpochFloor is the epoch below which leader answers are stale, and the
// claim that holds it there.
type EpochFloor struct {
	Epoch int64 `json:"epoch"`
	// Node is the node whose claim holds it.
	Node string `json:"node,omitempty"`
	// Until is when that claim's lease runs out by this process's clock;
	// after it, a leader of any epoch with a valid lease sets the floor,
	// lower or not.
	Until *time.Time `json:"until,omitempty"`
}

// RaiseEpochFloor takes f as the floor where it outranks the monitor's own
// (a valid claim over one that ran out, then the higher epoch), e.g. the
// floor of an earlier monitor of the same nodes, which a reload replaces:
// f holds until its own end, as it would have there.
func (m *Monitor) RaiseEpochFloor(f EpochFloor) {
	c := claim{epoch: f.Epoch, node: f.Node}
	if f.Until != nil {
		c.until = f.Until.UnixNano()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.outranks(m.floor, m.unixNano()) {
		m.floor = c
	}
}

// EpochFloor returns the pool's epoch floor.
func (m *Monitor) EpochFloor() EpochFloor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.floorLocked()
}

// floorLocked returns the epoch floor. m.mu must be held.
func (m *Monitor) floorLocked() EpochFloor {
	f := EpochFloor{Epoch: m.floor.epoch, Node: m.floor.node}
	if m.floor.until != 0 {
		t := time.Unix(0, m.floor.until)
		f.Until = &t
	}
	return f
}

// Name returns the pool's name.
func (m *Monitor) Name() string { return m.name }

// Nodes returns the pool's nodes.
func (m *Monitor) Nodes() []*Node { return m.nodes }

// Start starts one probe loop per node.
func (m *Monitor) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	for _, n := range m.nodes {
		m.wg.Add(1)
		go m.probeLoop(ctx, n)
	}
}

// Stop stops the probe loops and waits for them.
func (m *Monitor) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// probeLoop probes n until ctx ends. After a panic in a probe it goes on
// an Interval later: a node never probed again would freeze the leader
// view, and the wait bounds how often a panic that recurs is logged.
func (m *Monitor) probeLoop(ctx context.Context, n *Node) {
	defer m.wg.Done()
	for !m.probeUntilDone(ctx, n) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.Interval):
		}
	}
}

// probeUntilDone probes n at once, then every Interval while there is a
// leader, every FastInterval while there is none, and when kicked, until
// ctx ends (true) or a probe panics (false, the panic reported).
func (m *Monitor) probeUntilDone(ctx context.Context, n *Node) (done bool) {
	defer m.recoverProbe(n)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		r := m.probe(ctx, n)
		if ctx.Err() != nil {
			return true
		}
		s := m.record(n, r)
		if m.obs != nil {
			m.obs.Probed(m.name, n.Addr, r, s)
		}

		wait := m.cfg.Interval
		if m.Leader() == nil {
			wait = m.cfg.FastInterval
		}
		wait = max(wait-r.Duration, minProbeGap)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return true
		case <-timer.C:
		case <-n.kick:
			timer.Stop()
			// Even a kicked probe waits minProbeGap after the last one.
			if r.Duration < minProbeGap {
				timer.Reset(minProbeGap - r.Duration)
				select {
				case <-ctx.Done():
					return true
				case <-timer.C:
				}
			}
		}
	}
}

// probe sends one probe to n, within the probe timeout.
func (m *Monitor) probe(ctx context.Context, n *Node) Result {
	pctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	return m.prober.Probe(pctx, n.Addr)
}

// recoverProbe, deferred, recovers a panic in a probe of n (in the Prober
// or the Observer) and reports it with its stack, as Caddy's active health
// checker does, rather than letting it take the process down.
func (m *Monitor) recoverProbe(n *Node) {
	v := recover()
	if v == nil {
		return
	}
	if m.obs != nil {
		m.obs.Panicked(m.name, n.Addr, v, debug.Stack())
	}
}

func (n *Node) kickProbe() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// record takes in one probe result, updates the leader view and returns
// the node's status.
func (m *Monitor) record(n *Node, r Result) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	n.last = r
	var reason string
	switch {
	case !r.Answered || (!r.Leader && r.Status != http.StatusServiceUnavailable):
		// Only 200 and 503 are answers of the cluster's leader endpoint.
		reason = m.probeFailedLocked(n, r)
	case r.Leader:
		reason = m.leaderAnswerLocked(n, r)
	default:
		n.fails, n.passes = 0, 0
		n.status = StatusFollower
		reason = fmt.Sprintf("%s: probe answered %d: follower", n.Addr, r.Status)
	}
	if !n.doubtedAt.IsZero() && r.Answered && !r.Started.Before(n.doubtedAt) {
		n.doubtedAt = time.Time{}
	}
	close(n.answered)
	n.answered = make(chan struct{})
	m.recomputeLocked(reason)
	return n.status
}

// probeFailedLocked counts failed probe r of n, which is down after Fails
// in a row, and returns why it failed. m.mu must be held.
func (m *Monitor) probeFailedLocked(n *Node, r Result) string {
	n.fails++
	n.passes = 0
	if n.fails >= m.cfg.Fails {
		n.status = StatusDown
	}
	why := fmt.Sprint(r.Err)
	if r.Answered {
		why = fmt.Sprintf("answered %d", r.Status)
	}
	return fmt.Sprintf("%s: probe failed (%d in a row): %s", n.Addr, n.fails, why)
}

// leaderAnswerLocked takes in leader answer r of n: its claim on the
// epoch floor, then stale if its epoch is below the floor, else one more
// pass and its lease. It returns what n answered. m.mu must be held.
func (m *Monitor) leaderAnswerLocked(n *Node, r Result) string {
	n.fails = 0
	now := m.unixNano()
	n.recordClaim(r, now)
	m.updateFloorLocked(now)
	if r.Epoch < m.floor.epoch {
		n.status, n.passes = StatusStale, 0
		return fmt.Sprintf("%s: answers as leader of epoch %d, below the floor %d: stale", n.Addr, r.Epoch, m.floor.epoch)
	}
	if n.status != StatusLeader || n.epoch != r.Epoch {
		n.passes = 0
	}
	n.status, n.epoch = StatusLeader, r.Epoch
	n.passes++
	n.recordLease(r)
	return fmt.Sprintf("%s: probe answered 200 as leader of epoch %d", n.Addr, r.Epoch)
}

// recordClaim keeps leader answer r as n's claim on the epoch floor,
// unless n's claim of a higher epoch is still valid: a node that answers a
// lower epoch (its cluster's epochs restarted) does not withdraw a lease
// that may still be valid. The claim lasts as long as r's lease by
// leaseValidUntil, at most maxClaimHold; the same renewal seen again
// extends nothing. m.mu must be held.
func (n *Node) recordClaim(r Result, now int64) {
	c := &n.claim
	switch {
	case r.Epoch < c.epoch && c.validAt(now):
		return
	case r.Epoch == c.epoch && r.LeaseLeft > 0 && r.LastRenewAt.Equal(c.renewedAt):
		return
	}
	until := r.Started.Add(maxClaimHold).UnixNano()
	if r.LeaseLeft > 0 {
		until = min(until, leaseValidUntil(r))
	}
	*c = claim{epoch: r.Epoch, until: until, renewedAt: r.LastRenewAt, node: n.Addr}
}

// updateFloorLocked sets the floor to the claim that outranks the others
// at now, and reports a change of its epoch: a valid claim's epoch, the
// highest if several are valid, or the last floor while none is. m.mu must
// be held.
func (m *Monitor) updateFloorLocked(now int64) {
	next := m.floor
	for _, n := range m.nodes {
		if n.claim.validAt(now) && n.claim.outranks(next, now) {
			next = n.claim
		}
	}
	prev := m.floor.epoch
	m.floor = next
	if next.epoch != prev && m.obs != nil {
		m.obs.EpochFloorChanged(EpochFloorChange{Pool: m.name, From: prev, To: next.epoch, Node: next.node})
	}
}

// recordLease keeps the lease of n's leader answer r: its times in the
// cluster's clock, and when it ends by this process's. m.mu must be held.
func (n *Node) recordLease(r Result) {
	if n.lease.epoch != r.Epoch || n.lease.firstRenewAt.IsZero() {
		n.lease = leaseSeen{epoch: r.Epoch, firstRenewAt: r.LastRenewAt}
	}
	if r.LeaseLeft > 0 {
		n.lease.expiresAt = r.LastRenewAt.Add(r.LeaseLeft)
	}
	// The same renewal seen again extends nothing.
	switch {
	case r.LeaseLeft <= 0:
		n.validUntil.Store(0)
	case !r.LastRenewAt.Equal(n.renewedAt) || n.validUntil.Load() == 0:
		n.renewedAt = r.LastRenewAt
		n.validUntil.Store(leaseValidUntil(r))
	}
}

// leaseValidUntil is when the lease of leader answer r ends by this
// process's clock, in unix ns: LeaseLeft after the renewal the answer
// reports, less the renewal's age by the node's own Date header (which, in
// whole seconds, errs on the long side). Both are the cluster's times, so
// clock skew does not matter. A lease of centuries saturates rather than
// overflowing into the past; one already over is 1 (0 means unknown).
func leaseValidUntil(r Result) int64 {
	left := r.LeaseLeft
	if age := r.ServerTime.Sub(r.LastRenewAt); !r.ServerTime.IsZero() && age > 0 {
		if age >= left {
			return 1 // over before it was seen
		}
		left -= age
	}
	if left <= 0 {
		return 1
	}
	start := r.Started.UnixNano()
	switch {
	case start > math.MaxInt64-int64(left):
		return math.MaxInt64
	case start+int64(left) <= 0:
		return 1
	}
	return start + int64(left)
}

// eligible reports whether n may lead. m.mu must be held.
func (m *Monitor) eligible(n *Node, now time.Time) bool {
	if n.status != StatusLeader || n.epoch != m.floor.epoch || n.passes < m.cfg.Passes || n.fails > 0 || !n.doubtedAt.IsZero() {
		return false
	}
	return n.leaseValid(now.UnixNano)
}

// leaseValid reports whether n's lease is not known to have run out at the
// time, in unix ns, that now returns. now is called only for a lease whose
// end is known, so that Leader reads no clock (tens of ns) for a node that
// reports no lease times.
func (n *Node) leaseValid(now func() int64) bool {
	until := n.validUntil.Load()
	return until == 0 || now() < until
}

// unixNano is the monitor's clock in unix ns, the unit of validUntil.
func (m *Monitor) unixNano() int64 { return m.clock().UnixNano() }

// recomputeLocked applies the leader rules after any change of a node: no
// leader until every node has been probed once; then the eligible node
// leads, the current leader keeping a tie; reads go to the readable nodes;
// and a new leader, a doubt or a loss is reported. m.mu must be held.
func (m *Monitor) recomputeLocked(reason string) {
	now := m.clock()
	prev := m.leader.Load()
	var next *Node
	if m.everyNodeProbedLocked() {
		next = m.nextLeaderLocked(prev, now)
	}
	readable := m.readableNodesLocked()
	m.readable.Store(&readable)
	if next == prev {
		if next == nil {
			m.reportLossOnceLocked(reason, now)
		}
		return
	}
	m.leader.Store(next)
	if next == nil {
		m.reportLeaderChange(m.leaderGoneLocked(reason, now))
	} else {
		m.reportLeaderChange(m.leaderFoundLocked(next, reason))
	}
}

// everyNodeProbedLocked reports whether every node has been probed once
// (answered or failed). A stale leader may answer before the real one, so
// claims are compared only from then on. m.mu must be held.
func (m *Monitor) everyNodeProbedLocked() bool {
	if !m.allProbed {
		m.allProbed = true
		for _, n := range m.nodes {
			m.allProbed = m.allProbed && !n.last.Started.IsZero()
		}
	}
	return m.allProbed
}

// nextLeaderLocked returns the node that leads now: an eligible one (all
// of them claim the floor's epoch), and the current leader if it still is
// eligible, so that two claims of the same epoch keep the leader where it
// is; nil if none is eligible. m.mu must be held.
func (m *Monitor) nextLeaderLocked(current *Node, now time.Time) *Node {
	var next *Node
	for _, n := range m.nodes {
		if m.eligible(n, now) && (next == nil || n == current) {
			next = n
		}
	}
	return next
}

// readableNodesLocked returns the nodes that a read may go to: they answer
// probes, are not stale, and no request failed on them since their last
// probe. m.mu must be held.
func (m *Monitor) readableNodesLocked() []*Node {
	readable := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.status != StatusStale && n.status != StatusUnknown && n.status != StatusDown && n.fails == 0 && n.doubtedAt.IsZero() {
			readable = append(readable, n)
		}
	}
	return readable
}

// reportLossOnceLocked reports, once, that the last leader is lost rather
// than in doubt: a doubt turns into a loss with Fails failed probes, a
// follower or stale answer, or an expired lease. m.mu must be held.
func (m *Monitor) reportLossOnceLocked(reason string, now time.Time) {
	if m.lastAddr == "" || m.lossReported || m.lastLeaderInDoubt(now) {
		return
	}
	m.lossReported = true
	m.reportLeaderChange(LeaderChange{Pool: m.name, From: m.lastAddr, Reason: reason})
}

// leaderGoneLocked records that the pool has no leader from now, in doubt
// or lost, and puts every node to fast polling at once rather than after
// its interval. It returns the change to report. m.mu must be held.
func (m *Monitor) leaderGoneLocked(reason string, now time.Time) LeaderChange {
	change := LeaderChange{Pool: m.name, From: m.lastAddr, Reason: reason}
	m.noLeaderFrom = now
	change.InDoubt = m.lastLeaderInDoubt(now)
	m.lossReported = !change.InDoubt
	for _, n := range m.nodes {
		n.kickProbe()
	}
	return change
}

// leaderFoundLocked records next as the leader, wakes the requests that
// wait for one, and returns the change to report: a failover if next is
// another node or epoch than the last leader, a confirmation if it is the
// same one after a doubt. m.mu must be held.
func (m *Monitor) leaderFoundLocked(next *Node, reason string) LeaderChange {
	// The probe that settled it may be another node's (the last one
	// probed, or a rival that fell away): the reason names the leader.
	if !strings.HasPrefix(reason, next.Addr+":") {
		reason = fmt.Sprintf("%s: leader of epoch %d, settled by %s", next.Addr, next.epoch, reason)
	}
	change := LeaderChange{Pool: m.name, From: m.lastAddr, To: next.Addr, Epoch: next.epoch, Reason: reason}
	id := fmt.Sprintf("%s@%d", next.Addr, next.epoch)
	change.Failover = m.lastLeader != "" && m.lastLeader != id
	change.Confirmed = m.lastLeader == id
	m.lastLeader, m.lastAddr = id, next.Addr
	m.lossReported = false
	close(m.changed)
	m.changed = make(chan struct{})
	return change
}

// reportLeaderChange tells the observer, if any, of c.
func (m *Monitor) reportLeaderChange(c LeaderChange) {
	if m.obs != nil {
		m.obs.LeaderChanged(c)
	}
}

// lastLeaderInDoubt reports whether the last leader may still lead: it
// still claims the floor's epoch, has failed fewer than Fails probes, and
// its lease is not known to have run out. m.mu must be held.
func (m *Monitor) lastLeaderInDoubt(now time.Time) bool {
	for _, n := range m.nodes {
		if n.Addr == m.lastAddr {
			return n.status == StatusLeader && n.epoch == m.floor.epoch && n.fails < m.cfg.Fails && n.leaseValid(now.UnixNano)
		}
	}
	return false
}

// Leader returns the leader, or nil while there is none or it is in doubt.
// It does not allocate or lock.
func (m *Monitor) Leader() *Node {
	if n := m.leader.Load(); n != nil && n.leaseValid(m.unixNano) {
		return n
	}
	return nil
}

// WaitLeader waits for a leader until ctx ends or the deadline passes and
// returns it, or nil.
func (m *Monitor) WaitLeader(ctx context.Context, deadline time.Time) *Node {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		changed := m.dropExpiredLeader()
		if n := m.Leader(); n != nil {
			return n
		}
		if woken := m.block(ctx, changed, timer.C); !woken {
			return nil
		}
	}
}

// block waits, counted in waiting, until changed is closed (true), ctx
// ends or expired fires (false).
func (m *Monitor) block(ctx context.Context, changed <-chan struct{}, expired <-chan time.Time) bool {
	m.waiting.Add(1)
	defer m.waiting.Add(-1)
	select {
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	case <-expired:
		return false
	}
}

// dropExpiredLeader recomputes the leader if its lease ran out without a
// fresh answer, and returns the channel closed when one is found. The lock
// is released by defer, so that a panicking Observer cannot leave it held.
func (m *Monitor) dropExpiredLeader() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.leader.Load(); n != nil && !m.eligible(n, m.clock()) {
		m.recomputeLocked(fmt.Sprintf("%s: lease expired without a renewal seen", n.Addr))
	}
	return m.changed
}

// Readable returns a node for a read that any answering node may serve,
// round robin, or nil if none answers.
func (m *Monitor) Readable() *Node {
	nodes := *m.readable.Load()
	if len(nodes) == 0 {
		return nil
	}
	return nodes[m.rr.Add(1)%uint64(len(nodes))]
}

// Doubt reports that a live request failed on n (it could not connect, or
// n answered 503): n gets no traffic until a probe sent after now answers,
// and that probe is sent at once.
func (m *Monitor) Doubt(n *Node, why string) {
	m.markDoubted(n, why)
	n.kickProbe()
}

// markDoubted marks n doubted under the lock, released by defer so that a
// panicking Observer cannot leave it held.
func (m *Monitor) markDoubted(n *Node, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n.doubtedAt.IsZero() {
		n.doubtedAt = m.clock()
		m.recomputeLocked(fmt.Sprintf("%s: %s", n.Addr, why))
	}
}

// ConfirmFollower reports whether a request that n refused with 503 at
// since was refused as a follower. A probe sent after since decides if n
// answers it: 503, a follower (a stale leader believes it leads, so its
// refusals prove nothing). If n answers no probe within one probe timeout
// plus one fast interval, it stopped listening right after refusing: that
// was a follower's refusal if n turns out to have released its lease early
// (ReleasedEarly, which waits at most until deadline), since a node in a
// planned stop refuses as a follower from its release until its port
// closes. A crashed node keeps its lease, so its refusal proves nothing.
func (m *Monitor) ConfirmFollower(ctx context.Context, n *Node, since, deadline time.Time) bool {
	timer := time.NewTimer(m.cfg.Timeout + m.cfg.FastInterval + minProbeGap)
	defer timer.Stop()
	for {
		m.mu.Lock()
		last, status, answered := n.last, n.status, n.answered
		m.mu.Unlock()
		if !last.Started.Before(since) {
			if last.Answered {
				return status == StatusFollower && last.Status == http.StatusServiceUnavailable
			}
			return m.ReleasedEarly(ctx, n, deadline)
		}
		n.kickProbe()
		select {
		case <-answered:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return m.ReleasedEarly(ctx, n, deadline)
		}
	}
}

// ReleasedEarly reports whether the lease that n last held turns out to
// have been released before it could have run out: a node leads with a
// higher epoch that it acquired (by the cluster's clock) before n's last
// known lease expiry. A leader that crashed keeps its lease until it runs
// out, so this proves a planned stop, whose graceful shutdown answers every
// request it has read. It waits until that is seen, or can no longer be
// (the successor acquired later, or n's lease may have run out by now), or
// deadline, or ctx ends; without lease times it reports false at once.
func (m *Monitor) ReleasedEarly(ctx context.Context, n *Node, deadline time.Time) bool {
	m.mu.Lock()
	held, until := n.lease, n.validUntil.Load()
	m.mu.Unlock()
	if held.expiresAt.IsZero() || held.firstRenewAt.IsZero() || until <= 0 {
		return false
	}
	// A successor that acquired before the expiry is seen within a probe
	// of it; after that, any successor came too late to prove anything.
	giveUp := time.Unix(0, until).Add(m.cfg.Timeout + m.cfg.FastInterval + minProbeGap)
	if deadline.Before(giveUp) {
		giveUp = deadline
	}
	timer := time.NewTimer(time.Until(giveUp))
	defer timer.Stop()
	tick := time.NewTicker(m.cfg.FastInterval)
	defer tick.Stop()
	for {
		m.mu.Lock()
		successor, found := m.successorLocked(held.epoch)
		changed := m.changed
		m.mu.Unlock()
		if found {
			return successor.firstRenewAt.Before(held.expiresAt)
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// successorLocked returns the lease of the highest epoch above epoch that
// a node has answered with a renewal, and whether there is one. m.mu must
// be held.
func (m *Monitor) successorLocked(epoch int64) (leaseSeen, bool) {
	var successor *leaseSeen
	for _, s := range m.nodes {
		if s.lease.epoch > epoch && !s.lease.firstRenewAt.IsZero() && (successor == nil || s.lease.epoch > successor.epoch) {
			successor = &s.lease
		}
	}
	if successor == nil {
		return leaseSeen{}, false
	}
	return *successor, true
}

// NodeView is one node in a PoolView.
type NodeView struct {
	Addr            string     `json:"addr"`
	Status          Status     `json:"status"`
	Epoch           int64      `json:"epoch,omitempty"`
	Fails           int        `json:"fails"`
	Passes          int        `json:"passes"`
	InDoubt         bool       `json:"in_doubt"`
	LastProbe       *time.Time `json:"last_probe,omitempty"`
	LastProbeMillis float64    `json:"last_probe_ms"`
	LastError       string     `json:"last_error,omitempty"`
	LeaseValidUntil *time.Time `json:"lease_valid_until,omitempty"`
}

// PoolView is a pool's state, as the admin API shows it.
type PoolView struct {
	Pool         string     `json:"pool"`
	Leader       string     `json:"leader"`
	Epoch        int64      `json:"epoch"`
	EpochFloor   EpochFloor `json:"epoch_floor"`
	NoLeaderFrom *time.Time `json:"no_leader_since,omitempty"`
	Nodes        []NodeView `json:"nodes"`
}

// Leaderless is how long the pool has had no leader at now; 0 with one.
func (v PoolView) Leaderless(now time.Time) time.Duration {
	if v.NoLeaderFrom == nil {
		return 0
	}
	return now.Sub(*v.NoLeaderFrom)
}

// View returns a snapshot of the pool.
func (m *Monitor) View() PoolView {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := PoolView{Pool: m.name, EpochFloor: m.floorLocked()}
	if l := m.Leader(); l != nil {
		v.Leader, v.Epoch = l.Addr, l.epoch
	} else {
		t := m.noLeaderFrom
		v.NoLeaderFrom = &t
	}
	for _, n := range m.nodes {
		nv := NodeView{
			Addr: n.Addr, Status: n.status, Epoch: n.epoch, Fails: n.fails, Passes: n.passes,
			InDoubt:         !n.doubtedAt.IsZero(),
			LastProbeMillis: float64(n.last.Duration.Microseconds()) / 1000,
		}
		if !n.last.Started.IsZero() {
			t := n.last.Started
			nv.LastProbe = &t
		}
		if n.last.Err != nil {
			nv.LastError = n.last.Err.Error()
		}
		if u := n.validUntil.Load(); u != 0 && n.status == StatusLeader {
			t := time.Unix(0, u)
			nv.LeaseValidUntil = &t
		}
		v.Nodes = append(v.Nodes, nv)
	}
	return v
}
