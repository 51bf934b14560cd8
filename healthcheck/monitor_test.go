package healthcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// scriptedProber answers each node's probes with what the test set last.
type scriptedProber struct {
	clock   func() time.Time // stamps Result.Started: the monitor's clock
	mu      sync.Mutex
	answers map[string]Result
	delays  map[string]time.Duration
	count   map[string]int
}

func newScripted() *scriptedProber {
	return &scriptedProber{clock: time.Now, answers: map[string]Result{}, delays: map[string]time.Duration{}, count: map[string]int{}}
}

// waitProbes waits until n more probes of addr have started than had
// when it was called: with n = 2, one that read the answer set last has
// been recorded (a node's probes follow one another).
func (p *scriptedProber) waitProbes(t *testing.T, addr string, n int) {
	t.Helper()
	want := p.probes(addr) + n
	poll.Until(t, 5*time.Second, fmt.Sprintf("%d more probes of %s", n, addr), func() bool { return p.probes(addr) >= want })
}

// fakeClock is a monitor's and its prober's clock that moves only when
// the test advances it, so that leases run out by the test's measure
// however late the machine schedules the probes.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func (p *scriptedProber) set(addr string, r Result) {
	p.mu.Lock()
	p.answers[addr] = r
	p.mu.Unlock()
}

func (p *scriptedProber) probes(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[addr]
}

func (p *scriptedProber) Probe(ctx context.Context, addr string) Result {
	// Stamped before the answer is read, as a real probe is sent before
	// its answer exists.
	started, sent := p.clock(), time.Now()
	p.mu.Lock()
	r, ok := p.answers[addr]
	delay := p.delays[addr]
	p.count[addr]++
	p.mu.Unlock()
	r.Started = started
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	if !ok || r.Err == errHang {
		<-ctx.Done()
		return Result{Started: r.Started, Err: ctx.Err(), Duration: time.Since(sent)}
	}
	return r
}

var errHang = errors.New("hang")

func leaderAt(epoch int64) Result {
	return Result{Answered: true, Status: 200, Leader: true, Epoch: epoch}
}

var (
	follower = Result{Answered: true, Status: 503}
	refused  = Result{Err: errors.New("connection refused")}
	hang     = Result{Err: errHang}
)

// recorder is an Observer that keeps the leader changes and the panics.
type recorder struct {
	mu      sync.Mutex
	changes []LeaderChange
	panics  []panicReport
}

// panicReport is one call of Observer.Panicked.
type panicReport struct {
	pool, addr string
	v          any
	stack      []byte
}

func (r *recorder) LeaderChanged(c LeaderChange) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}
func (r *recorder) Probed(string, string, Result, Status) {}
func (r *recorder) Panicked(pool, addr string, v any, stack []byte) {
	r.mu.Lock()
	r.panics = append(r.panics, panicReport{pool: pool, addr: addr, v: v, stack: stack})
	r.mu.Unlock()
}

func testConfig() Config {
	return Config{Interval: 40 * time.Millisecond, FastInterval: 5 * time.Millisecond, Timeout: 30 * time.Millisecond, Fails: 2, Passes: 1}
}

func startMonitor(t *testing.T, p Prober, cfg Config, addrs ...string) (*Monitor, *recorder) {
	t.Helper()
	return startMonitorOn(t, time.Now, p, cfg, addrs...)
}

// startMonitorOn starts a monitor whose clock is clock.
func startMonitorOn(t *testing.T, clock func() time.Time, p Prober, cfg Config, addrs ...string) (*Monitor, *recorder) {
	t.Helper()
	rec := &recorder{}
	m, err := NewMonitor("pool", addrs, cfg, p, rec)
	if err != nil {
		t.Fatal(err)
	}
	m.clock = clock
	m.Start()
	t.Cleanup(m.Stop)
	return m, rec
}

func leaderAddr(m *Monitor) string {
	if n := m.Leader(); n != nil {
		return n.Addr
	}
	return ""
}

func TestLeaderSelection(t *testing.T) {
	tests := []struct {
		name    string
		answers map[string]Result
		want    string
	}{
		{"one leader", map[string]Result{"a": leaderAt(3), "b": follower}, "a"},
		{"two claim leadership: higher epoch wins", map[string]Result{"a": leaderAt(7), "b": leaderAt(8)}, "b"},
		{"higher epoch first in order", map[string]Result{"a": leaderAt(9), "b": leaderAt(8)}, "a"},
		{"leader and a dead node", map[string]Result{"a": refused, "b": leaderAt(2)}, "b"},
		{"leader and a hung node", map[string]Result{"a": hang, "b": leaderAt(2)}, "b"},
		{"all followers", map[string]Result{"a": follower, "b": follower}, ""},
		{"all down", map[string]Result{"a": refused, "b": hang}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newScripted()
			for a, r := range tc.answers {
				p.set(a, r)
			}
			m, _ := startMonitor(t, p, testConfig(), "a", "b")
			// Wait until both nodes have been probed at least twice.
			poll.Until(t, 2*time.Second, "probes", func() bool { return p.probes("a") >= 2 && p.probes("b") >= 2 })
			if got := leaderAddr(m); got != tc.want {
				t.Fatalf("leader = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStaleLeaderAfterHigherEpochSeen(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(8))
	p.set("b", follower)
	m, _ := startMonitor(t, p, testConfig(), "a", "b")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })

	// a fails over to b (epoch 9), then a comes back claiming its old epoch.
	p.set("b", leaderAt(9))
	poll.Until(t, 2*time.Second, "b leads", func() bool { return leaderAddr(m) == "b" })
	p.set("b", refused)
	poll.Until(t, 2*time.Second, "no leader", func() bool { return leaderAddr(m) == "" })
	p.set("a", leaderAt(8))
	n0 := p.probes("a")
	poll.Until(t, 2*time.Second, "a probed again", func() bool { return p.probes("a") > n0+3 })
	if got := leaderAddr(m); got != "" {
		t.Fatalf("stale leader of epoch 8 got traffic after epoch 9 was seen: leader %q", got)
	}
	if v := m.View(); v.Nodes[0].Status != StatusStale {
		t.Fatalf("a's status = %s, want stale", v.Nodes[0].Status)
	}
}

func TestFastPollingWhileNoLeader(t *testing.T) {
	p := newScripted()
	p.set("a", follower)
	p.set("b", follower)
	cfg := testConfig()
	cfg.Interval = time.Hour // only fast polling can probe again
	startMonitor(t, p, cfg, "a", "b")
	poll.Until(t, 2*time.Second, "fast probes", func() bool { return p.probes("a") >= 5 && p.probes("b") >= 5 })
}

func TestLeaderFoundWakesWaiters(t *testing.T) {
	p := newScripted()
	p.set("a", follower)
	p.set("b", follower)
	m, _ := startMonitor(t, p, testConfig(), "a", "b")

	got := make(chan string, 1)
	go func() {
		n := m.WaitLeader(context.Background(), time.Now().Add(5*time.Second))
		if n == nil {
			got <- ""
			return
		}
		got <- n.Addr
	}()
	// The waiter blocks first, so that only the leader's being found can
	// wake it (issue 29.3: a sleep let either order pass).
	poll.Until(t, 5*time.Second, "the waiter to block", func() bool { return m.waiting.Load() == 1 })
	p.set("b", leaderAt(1))
	select {
	case a := <-got:
		if a != "b" {
			t.Fatalf("waiter got %q, want b", a)
		}
	case <-time.After(time.Second):
		t.Fatal("waiter not woken by the new leader")
	}
}

func TestWaitLeaderDeadlineAndCancel(t *testing.T) {
	p := newScripted()
	p.set("a", follower)
	m, _ := startMonitor(t, p, testConfig(), "a")
	start := time.Now()
	if n := m.WaitLeader(context.Background(), start.Add(50*time.Millisecond)); n != nil {
		t.Fatal("got a leader from followers only")
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > time.Second {
		t.Fatalf("WaitLeader returned after %v, want about 50ms", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n := m.WaitLeader(ctx, time.Now().Add(time.Hour)); n != nil {
		t.Fatal("got a leader with a cancelled context")
	}
}

func TestFlappingLeaderIsDoubtedOnEveryFailure(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(1))
	m, rec := startMonitor(t, p, testConfig(), "a")
	for i := range 3 {
		poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
		p.set("a", refused)
		// One failed probe is enough to stop traffic, although fails is 2.
		poll.Until(t, 2*time.Second, "a in doubt", func() bool { return leaderAddr(m) == "" })
		p.set("a", leaderAt(1))
		_ = i
	}
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.changes) < 7 {
		t.Fatalf("%d leader changes logged, want at least 7", len(rec.changes))
	}
	for i, c := range rec.changes {
		if c.Failover {
			t.Fatalf("the same leader coming back was counted as a failover: %+v", c)
		}
		// The way back is a confirmation of the same leader, not a new one.
		if i > 0 && c.To == "a" && !c.Confirmed {
			t.Fatalf("change %d: %+v, want a confirmation", i, c)
		}
	}
}

func TestPassesThreshold(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(1))
	cfg := testConfig()
	cfg.Passes = 3
	m, _ := startMonitor(t, p, cfg, "a")
	poll.Until(t, 2*time.Second, "a leads", func() bool {
		// Read the leader first: probes only grow in between.
		leader := leaderAddr(m)
		if leader != "" && p.probes("a") < 3 {
			t.Fatalf("leader after %d probes, want 3 passes", p.probes("a"))
		}
		return leader == "a"
	})
}

func TestDoubtHoldsTrafficUntilAProbeAnswers(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(4))
	cfg := testConfig()
	cfg.Interval = time.Hour
	m, _ := startMonitor(t, p, cfg, "a")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	p.set("a", hang)
	m.Doubt(m.Nodes()[0], "dial failed")
	if leaderAddr(m) != "" {
		t.Fatal("leader still routable right after a doubt")
	}
	p.set("a", leaderAt(4))
	poll.Until(t, 2*time.Second, "a confirmed", func() bool { return leaderAddr(m) == "a" })
}

func TestConfirmFollower(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(4))
	p.set("b", follower)
	cfg := testConfig()
	cfg.Interval = time.Hour
	m, _ := startMonitor(t, p, cfg, "a", "b")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	a := m.Nodes()[0]
	confirm := func() bool {
		return m.ConfirmFollower(context.Background(), a, time.Now(), time.Now().Add(5*time.Second))
	}

	// a still leads: a 503 it sent was not a follower's refusal.
	if confirm() {
		t.Fatal("leader confirmed as follower")
	}
	p.set("a", follower)
	if !confirm() {
		t.Fatal("follower not confirmed")
	}
	// Only a 503 is a follower's answer; a 500 or a stale leader's 200
	// proves nothing about a refused request.
	p.set("a", Result{Answered: true, Status: 500})
	if confirm() {
		t.Fatal("a node answering 500 was confirmed as follower")
	}
	p.set("b", leaderAt(5))
	poll.Until(t, 2*time.Second, "b leads", func() bool { return leaderAddr(m) == "b" })
	p.set("a", leaderAt(4))
	if confirm() {
		t.Fatal("a stale leader was confirmed as follower")
	}
	p.set("a", hang)
	start := time.Now()
	if confirm() {
		t.Fatal("a node that does not answer, with no lease times to prove a release, was confirmed as follower")
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("ConfirmFollower took %v", el)
	}
}

// leaseRenewed is when leaderGone's leader last renewed its lease.
var leaseRenewed = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// leaseOf is a leader's answer for epoch with a 2s lease renewed at renewedAt.
func leaseOf(epoch int64, renewedAt time.Time) Result {
	return forgedAt(epoch, 2*time.Second, renewedAt)
}

// leaderGone starts a monitor of a, the leader of epoch 5 with a lease
// renewed at leaseRenewed, and b, then makes a refuse connections and b answer
// successor. It returns the monitor and a.
func leaderGone(t *testing.T, successor Result) (*Monitor, *Node) {
	t.Helper()
	p := newScripted()
	p.set("a", leaseOf(5, leaseRenewed))
	p.set("b", follower)
	m, _ := startMonitor(t, p, testConfig(), "a", "b")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	p.set("a", refused)
	p.set("b", successor)
	return m, m.Nodes()[0]
}

// A node that refused and then stopped listening is confirmed only if it
// released its lease early (a planned stop refuses as a follower from its
// release until its port closes); a crashed one keeps its lease.
func TestConfirmFollowerOfANodeThatStoppedListening(t *testing.T) {
	for _, tc := range []struct {
		name      string
		successor Result
		want      bool
	}{
		{"released: a successor acquired before the lease could run out", leaseOf(6, leaseRenewed.Add(400*time.Millisecond)), true},
		{"crashed: no successor before the lease runs out", follower, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, a := leaderGone(t, tc.successor)
			if got := m.ConfirmFollower(context.Background(), a, time.Now(), time.Now().Add(5*time.Second)); got != tc.want {
				t.Fatalf("ConfirmFollower = %v, want %v", got, tc.want)
			}
		})
	}
}

// A 60ms lease that is not renewed runs out 60ms after the probe that saw
// it, by the monitor's clock: a silent node is found out by its lease
// before any probe times out, and answers that repeat the same renewal
// extend nothing. The clock is fake, so a loaded machine changes nothing.
func TestLeaseExpiryWithoutRenewalDropsLeader(t *testing.T) {
	lease := leaderAt(5)
	lease.LeaseLeft, lease.LastRenewAt = 60*time.Millisecond, time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		after Result
		// probes to wait for at 40ms: 1 that hangs, or 2 so that one
		// answer of the same renewal has been recorded then.
		probes int
	}{
		{"node goes silent", hang, 1},
		{"node repeats the same renewal", lease, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			p := newScripted()
			p.clock = clock.Now
			p.set("a", lease)
			cfg := testConfig()
			cfg.Interval = 10 * time.Millisecond
			cfg.FastInterval = 10 * time.Millisecond
			cfg.Timeout = time.Minute // the lease runs out long before
			m, _ := startMonitorOn(t, clock.Now, p, cfg, "a")
			poll.Until(t, 5*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
			p.set("a", tc.after)
			clock.advance(40 * time.Millisecond)
			p.waitProbes(t, "a", tc.probes)
			if leaderAddr(m) != "a" {
				t.Fatal("no leader 40ms into a 60ms lease")
			}
			clock.advance(21 * time.Millisecond)
			if leaderAddr(m) != "" {
				t.Fatal("the leader kept its lease 61ms after its only renewal")
			}
		})
	}
}

// A 60ms lease renewed every 20ms (by the fake clock) keeps its leader
// through five leases' time.
func TestLeaseRenewalsKeepTheLeader(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.clock = clock.Now
	cfg := testConfig()
	cfg.Interval = 10 * time.Millisecond
	m, _ := startMonitorOn(t, clock.Now, p, cfg, "a")
	for i := range 15 {
		r := leaderAt(5)
		r.LeaseLeft, r.LastRenewAt = 60*time.Millisecond, time.Unix(1000, int64(i))
		p.set("a", r)
		p.waitProbes(t, "a", 2)
		if leaderAddr(m) != "a" {
			t.Fatalf("a leader renewing every 20ms lost its lease after %d renewals", i)
		}
		clock.advance(20 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	good := testConfig()
	for name, mut := range map[string]func(*Config){
		"negative interval": func(c *Config) { c.Interval = -time.Second },
		"fast > interval":   func(c *Config) { c.FastInterval = time.Hour },
		"zero timeout":      func(c *Config) { c.Timeout = 0 },
		"zero fails":        func(c *Config) { c.Fails = 0 },
		"zero passes":       func(c *Config) { c.Passes = 0 },
	} {
		c := good
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLeader(b *testing.B) {
	p := newScripted()
	p.set("a", leaderAt(1))
	cfg := testConfig()
	cfg.Interval = time.Hour
	m, err := NewMonitor("pool", []string{"a"}, cfg, p, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.Start()
	defer m.Stop()
	for m.Leader() == nil {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if m.Leader() == nil {
			b.Fatal("no leader")
		}
	}
}

// At start a stale leader may answer first: nobody leads until every node
// has been probed once.
func TestNoLeaderBeforeEveryNodeWasProbed(t *testing.T) {
	p := newScripted()
	p.set("stale", leaderAt(7))
	p.set("slow", leaderAt(8))
	p.delays["slow"] = 20 * time.Millisecond // within the 30ms timeout
	m, rec := startMonitor(t, p, testConfig(), "stale", "slow")
	poll.Until(t, 2*time.Second, "the real leader", func() bool { return leaderAddr(m) == "slow" })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, c := range rec.changes {
		if c.To == "stale" {
			t.Fatalf("the stale node led before the other node answered: %+v", rec.changes)
		}
	}
}

func TestEpochFloorFromAnEarlierMonitor(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(7))
	rec := &recorder{}
	m, err := NewMonitor("pool", []string{"a"}, testConfig(), p, rec)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	m.RaiseEpochFloor(EpochFloor{Epoch: 8, Until: &later})
	m.Start()
	t.Cleanup(m.Stop)
	poll.Until(t, 2*time.Second, "a probed", func() bool { return p.probes("a") >= 3 })
	if got := leaderAddr(m); got != "" {
		t.Fatalf("epoch 7 leads although epoch 8 was seen before: %q", got)
	}
	if f := m.EpochFloor(); f.Epoch != 8 {
		t.Fatalf("epoch floor %d", f.Epoch)
	}
}

// A leader that fails one probe is in doubt; once it fails Fails probes it
// is lost, which is reported once however long it stays down.
func TestLossReportedOnceAfterDoubt(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(1))
	m, rec := startMonitor(t, p, testConfig(), "a")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	p.set("a", refused)
	n0 := p.probes("a")
	poll.Until(t, 2*time.Second, "many failed probes", func() bool { return p.probes("a") > n0+10 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var doubts, losses int
	for _, c := range rec.changes {
		switch {
		case c.To == "" && c.InDoubt:
			doubts++
		case c.To == "":
			losses++
			if c.From != "a" {
				t.Errorf("loss reported from %q, want a", c.From)
			}
		}
	}
	if doubts != 1 || losses != 1 {
		t.Fatalf("%d doubts and %d losses reported, want 1 each: %+v", doubts, losses, rec.changes)
	}
}

// A node that stopped renewing long ago but still answers leader, seen by
// a new monitor: the node's Date header shows the renewal is older than
// the lease, so it gets no traffic.
func TestOldRenewalSeenFirstIsNotALease(t *testing.T) {
	p := newScripted()
	r := leaderAt(3)
	r.LastRenewAt = time.Unix(1000, 0)
	r.LeaseLeft = 30 * time.Second
	r.ServerTime = r.LastRenewAt.Add(45 * time.Second)
	p.set("a", r)
	m, _ := startMonitor(t, p, testConfig(), "a")
	poll.Until(t, 2*time.Second, "a probed", func() bool { return p.probes("a") >= 3 })
	if got := leaderAddr(m); got != "" {
		t.Fatalf("a node whose lease ran out 15s ago leads: %q", got)
	}
	// The same node renewing (a fresh renewal, Date just after it) leads.
	r.LastRenewAt = time.Unix(2000, 0)
	r.ServerTime = r.LastRenewAt.Add(time.Second)
	p.set("a", r)
	poll.Until(t, 2*time.Second, "a leads after renewing", func() bool { return leaderAddr(m) == "a" })
}

// A lease of centuries (or a leaseExpiresAt at the end of time) saturates:
// the node is elected and stays leader, rather than its lease overflowing
// into the past.
func TestLeaseOfCenturiesSaturates(t *testing.T) {
	for _, expires := range []string{"2600-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z"} {
		t.Run(expires, func(t *testing.T) {
			body := `{"status":"leader","nodeId":"a","leaseEpoch":4,"lastRenewAt":"2026-12-01T00:00:00Z","leaseExpiresAt":"` + expires + `"}`
			leader, epoch, _, left, renewed, err := parseLeaderBody([]byte(body), false)
			if err != nil || !leader || epoch != 4 {
				t.Fatalf("parse: leader %v epoch %d err %v", leader, epoch, err)
			}
			p := newScripted()
			p.set("a", Result{Answered: true, Status: 200, Leader: true, Epoch: epoch, LeaseLeft: left, LastRenewAt: renewed,
				ServerTime: time.Now()})
			m, _ := startMonitor(t, p, testConfig(), "a")
			poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
			if until := m.Nodes()[0].validUntil.Load(); until < time.Now().Add(100*365*24*time.Hour).UnixNano() {
				t.Fatalf("lease valid until %v, want saturated far ahead", time.Unix(0, until))
			}
		})
	}
}

// ReleasedEarly tells a planned stop (the lease released: a successor
// acquired it before it could have run out) from a crash (the successor
// acquired it only after it ran out), by the cluster's clock.
func TestReleasedEarly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		successor Result
		want      bool
	}{
		{"successor acquired before the lease could run out", leaseOf(6, leaseRenewed.Add(400*time.Millisecond)), true},
		{"successor acquired after the lease ran out", leaseOf(6, leaseRenewed.Add(2*time.Second)), false},
		{"no successor before the lease runs out", follower, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, a := leaderGone(t, tc.successor)
			m.Doubt(a, "a request to it failed")
			start := time.Now()
			if got := m.ReleasedEarly(context.Background(), a, time.Now().Add(5*time.Second)); got != tc.want {
				t.Fatalf("ReleasedEarly = %v, want %v", got, tc.want)
			}
			// Without a successor it gives up once the lease may have run out
			// (2s after the last answer), not at the deadline.
			if waited := time.Since(start); waited > 3*time.Second {
				t.Fatalf("waited %v", waited)
			}
		})
	}
	t.Run("no lease times", func(t *testing.T) {
		p := newScripted()
		p.set("a", leaderAt(5))
		m, _ := startMonitor(t, p, testConfig(), "a")
		poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
		if m.ReleasedEarly(context.Background(), m.Nodes()[0], time.Now().Add(5*time.Second)) {
			t.Fatal("released early without lease times")
		}
	})
}

// panickingProber panics at its first probes (as many as panics says),
// then probes as its scriptedProber does.
type panickingProber struct {
	*scriptedProber
	panics int
}

func (p *panickingProber) Probe(ctx context.Context, addr string) Result {
	p.mu.Lock()
	panicNow := p.panics > 0
	p.panics--
	p.mu.Unlock()
	if panicNow {
		panic("prober bug")
	}
	return p.scriptedProber.Probe(ctx, addr)
}

// A Prober that panics is reported with its stack, and the node is probed
// (and elected) afterwards rather than never again.
func TestProbePanicIsReportedAndProbingGoesOn(t *testing.T) {
	p := &panickingProber{scriptedProber: newScripted(), panics: 1}
	p.set("a", leaderAt(1))
	m, rec := startMonitor(t, p, testConfig(), "a")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.panics) != 1 {
		t.Fatalf("%d panics reported, want 1: %+v", len(rec.panics), rec.panics)
	}
	got := rec.panics[0]
	if got.pool != "pool" || got.addr != "a" || got.v != "prober bug" {
		t.Fatalf("panic reported as %q %q %v, want pool a prober bug", got.pool, got.addr, got.v)
	}
	if !bytes.Contains(got.stack, []byte("panickingProber")) {
		t.Fatalf("the stack does not show the panicking Prober:\n%s", got.stack)
	}
}

// A new leader's reason names the leader, even when the probe that settled
// it was another node's (here the follower, answering last): before, the
// status page said "b: probe answered 503: follower" for a's election.
func TestLeaderFoundReasonNamesTheLeader(t *testing.T) {
	p := newScripted()
	p.set("a", leaderAt(4))
	p.set("b", follower)
	p.delays["b"] = 15 * time.Millisecond // b's answer, last, settles it
	m, rec := startMonitor(t, p, testConfig(), "a", "b")
	poll.Until(t, 2*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	c := rec.changes[0]
	if c.To != "a" || c.Reason != "a: leader of epoch 4, settled by b: probe answered 503: follower" {
		t.Fatalf("change %+v", c)
	}
}
