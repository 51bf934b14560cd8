package healthcheck

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// EpochFloorChanged: the tests that use a recorder do not look at the floor.
func (r *recorder) EpochFloorChanged(EpochFloorChange) {}

// floorRecorder is a recorder that also keeps the changes of the floor.
type floorRecorder struct {
	recorder
	floorMu sync.Mutex
	floors  []EpochFloorChange
}

func (r *floorRecorder) EpochFloorChanged(c EpochFloorChange) {
	r.floorMu.Lock()
	r.floors = append(r.floors, c)
	r.floorMu.Unlock()
}

// changes returns the floor changes so far that match.
func (r *floorRecorder) matching(match func(EpochFloorChange) bool) []EpochFloorChange {
	r.floorMu.Lock()
	defer r.floorMu.Unlock()
	var out []EpochFloorChange
	for _, c := range r.floors {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// startFloorMonitor starts a monitor of addrs on clock, with a
// floorRecorder, taking floor first if it is not nil.
func startFloorMonitor(t *testing.T, clock *fakeClock, p *scriptedProber, floor *EpochFloor, addrs ...string) (*Monitor, *floorRecorder) {
	t.Helper()
	p.clock = clock.Now
	rec := &floorRecorder{}
	m, err := NewMonitor("pool", addrs, testConfig(), p, rec)
	if err != nil {
		t.Fatal(err)
	}
	m.clock = clock.Now
	if floor != nil {
		m.RaiseEpochFloor(*floor)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m, rec
}

// forgedAt is a leader answer of epoch with a lease of its own, renewed at
// renewed by the node's clock, as a forged claim (or a cluster) sends it.
func forgedAt(epoch int64, lease time.Duration, renewed time.Time) Result {
	r := leaderAt(epoch)
	r.LeaseLeft, r.LastRenewAt, r.ServerTime = lease, renewed, renewed
	return r
}

// stillStale checks that a is stale and nobody leads after two more of
// a's probes, one of which read the answer set last.
func stillStale(t *testing.T, m *Monitor, p *scriptedProber, when string) {
	t.Helper()
	p.waitProbes(t, "a", 2)
	if got := leaderAddr(m); got != "" {
		t.Fatalf("%s: %q leads, want nobody", when, got)
	}
	if s := m.View().Nodes[0].Status; s != StatusStale {
		t.Fatalf("%s: a is %s, want stale", when, s)
	}
}

// A node that answers leader with the highest epoch there is and a 1s
// lease, then 503: the real leader (a, epoch 7) is stale only until the
// forged lease runs out, by the monitor's clock, then leads again, which is
// logged as the epoch going backwards. The jump is reported too.
func TestForgedEpochHoldsTheFloorOnlyForItsLease(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.set("a", leaderAt(7)) // no lease times: valid while it answers
	p.set("f", follower)
	m, rec := startFloorMonitor(t, clock, p, nil, "a", "f")
	poll.Until(t, 5*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })

	forgedEnd := clock.Now().Add(time.Second)
	p.set("f", forgedAt(math.MaxInt64, time.Second, clock.Now()))
	p.waitProbes(t, "f", 2)
	p.set("f", follower)
	p.waitProbes(t, "f", 2)
	if f := m.EpochFloor(); f.Epoch != math.MaxInt64 || f.Node != "f" || f.Until == nil || !f.Until.Equal(forgedEnd) {
		t.Fatalf("floor %+v, want epoch %d held by f until %v", f, int64(math.MaxInt64), forgedEnd)
	}
	if len(rec.matching(EpochFloorChange.FarJump)) != 1 {
		t.Fatalf("the jump from 7 to %d was not reported once as far: %+v", int64(math.MaxInt64), rec.floors)
	}
	stillStale(t, m, p, "the forged lease just seen")
	clock.advance(time.Second - time.Millisecond)
	stillStale(t, m, p, "1ms before the forged lease ends")

	clock.advance(time.Millisecond)
	poll.Until(t, 5*time.Second, "a leads after the forged lease", func() bool { return leaderAddr(m) == "a" })
	if f := m.EpochFloor(); f.Epoch != 7 || f.Node != "a" {
		t.Fatalf("floor %+v, want 7 held by a", f)
	}
	back := rec.matching(EpochFloorChange.Backwards)
	if len(back) != 1 || back[0].From != math.MaxInt64 || back[0].To != 7 || back[0].Node != "a" {
		t.Fatalf("backwards changes %+v, want one from %d to 7 by a", back, int64(math.MaxInt64))
	}
}

// A claimant that keeps renewing keeps the floor however long: the old
// leader of a lower epoch, whose lease is valid too, gets nothing.
func TestRenewedHigherClaimKeepsTheOldLeaderOut(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.set("a", leaderAt(5))
	p.set("b", forgedAt(6, time.Second, clock.Now()))
	m, _ := startFloorMonitor(t, clock, p, nil, "a", "b")
	poll.Until(t, 5*time.Second, "b leads", func() bool { return leaderAddr(m) == "b" })
	for i := range 4 {
		clock.advance(900 * time.Millisecond)
		p.set("b", forgedAt(6, time.Second, clock.Now())) // a renewal
		p.waitProbes(t, "b", 2)
		p.waitProbes(t, "a", 2)
		if got := leaderAddr(m); got != "b" {
			t.Fatalf("%.1fs on: %q leads, want b (epoch 6, renewing)", float64(i+1)*0.9, got)
		}
	}
	// b stops: it crashed, its lease is valid until it runs out.
	p.set("b", refused)
	p.waitProbes(t, "b", 2)
	stillStale(t, m, p, "b down, its lease valid")
	clock.advance(time.Second)
	poll.Until(t, 5*time.Second, "a leads once b's lease ran out", func() bool { return leaderAddr(m) == "a" })
}

// The cluster's lease row is re-seeded: the leader answers epoch 1 with
// fresh renewals. Its epoch-9 lease may still be valid, so epoch 1 leads
// only once that lease ran out: within one lease.
func TestEpochResetFollowedWithinOneLease(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.set("a", forgedAt(9, time.Second, clock.Now()))
	p.set("b", follower)
	m, rec := startFloorMonitor(t, clock, p, nil, "a", "b")
	poll.Until(t, 5*time.Second, "a leads", func() bool { return leaderAddr(m) == "a" })
	reset := clock.Now()

	clock.advance(100 * time.Millisecond)
	p.set("a", forgedAt(1, time.Second, clock.Now()))
	stillStale(t, m, p, "epoch 1 while the epoch-9 lease is valid")
	clock.advance(800 * time.Millisecond)
	p.set("a", forgedAt(1, time.Second, clock.Now())) // renewing epoch 1
	stillStale(t, m, p, "epoch 1, 900ms into the epoch-9 lease")

	clock.advance(100 * time.Millisecond)
	poll.Until(t, 5*time.Second, "epoch 1 leads", func() bool { return leaderAddr(m) == "a" })
	if f := m.EpochFloor(); f.Epoch != 1 {
		t.Fatalf("floor %+v, want 1", f)
	}
	if clock.Now().Sub(reset) > time.Second {
		t.Fatalf("epoch 1 followed %v after the reset, more than one lease", clock.Now().Sub(reset))
	}
	if back := rec.matching(EpochFloorChange.Backwards); len(back) != 1 || back[0].From != 9 || back[0].To != 1 {
		t.Fatalf("backwards changes %+v, want 9 to 1", back)
	}
}

// A reload with new probe settings replaces the monitor: the new one takes
// the old one's floor with its end, so the forged claim holds there as long
// as it would have held in the old one, and no longer.
func TestEpochFloorCarriedToANewMonitorWithItsEnd(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.set("a", leaderAt(7))
	p.set("f", forgedAt(math.MaxInt64, time.Second, clock.Now()))
	old, _ := startFloorMonitor(t, clock, p, nil, "a", "f")
	poll.Until(t, 5*time.Second, "f leads", func() bool { return leaderAddr(old) == "f" })
	p.set("f", follower)
	p.waitProbes(t, "f", 2)
	old.Stop()

	floor := old.EpochFloor()
	m, _ := startFloorMonitor(t, clock, p, &floor, "a", "f")
	stillStale(t, m, p, "the new monitor, within the forged lease")
	clock.advance(time.Second)
	poll.Until(t, 5*time.Second, "a leads after the forged lease", func() bool { return leaderAddr(m) == "a" })
}

// A forged lease of centuries holds the floor for maxClaimHold at most.
func TestLeaseOfCenturiesHoldsTheFloorBoundedly(t *testing.T) {
	clock := newFakeClock()
	p := newScripted()
	p.set("a", leaderAt(7))
	p.set("f", forgedAt(8, 200*365*24*time.Hour, clock.Now()))
	m, _ := startFloorMonitor(t, clock, p, nil, "a", "f")
	poll.Until(t, 5*time.Second, "f leads", func() bool { return leaderAddr(m) == "f" })
	p.set("f", follower)
	p.waitProbes(t, "f", 2)
	clock.advance(maxClaimHold - time.Millisecond)
	p.set("a", leaderAt(7)) // a's claim, without lease times, is as fresh as its answer
	stillStale(t, m, p, "just inside maxClaimHold")
	clock.advance(time.Millisecond)
	poll.Until(t, 5*time.Second, "a leads after maxClaimHold", func() bool { return leaderAddr(m) == "a" })
}

// FuzzEpochFloor runs the epoch guard through sequences of answers and
// clock steps (4 bytes each) on three nodes and checks, after each: no
// valid claim is above the floor, the floor went down only once the claim
// that held it had run out, a leader has the floor's epoch; and at the end
// that the floor is never stuck: maxClaimHold later, a fresh claim of
// epoch 1 sets it.
func FuzzEpochFloor(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 1, 8, 2, 1, 9, 20, 0, 0, 0, 0, 1, 1})
	f.Add([]byte{0, 3, 1, 1, 1, 8, 3, 1, 4, 0, 0, 0, 9, 30, 0, 0, 0, 0, 2, 1})
	f.Add([]byte{2, 5, 0, 0, 1, 8, 1, 0, 0, 1, 2, 1, 9, 255, 0, 0, 2, 0, 2, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		epochs := []int64{1, 2, 3, 7, 8, 9, 1000, 1 << 40, math.MaxInt64}
		leases := []time.Duration{0, 100 * time.Millisecond, time.Second, 200 * 365 * 24 * time.Hour}
		clock := newFakeClock()
		rec := &floorRecorder{}
		m, err := NewMonitor("pool", []string{"a", "b", "c"}, testConfig(), newScripted(), rec)
		if err != nil {
			t.Fatal(err)
		}
		m.clock = clock.Now
		renewed := make([]time.Time, 3)
		for len(ops) >= 4 {
			op := ops[:4]
			ops = ops[4:]
			n := m.nodes[int(op[0])%3]
			var r Result
			switch (op[0] / 3) % 4 {
			case 0:
				i := int(op[0]) % 3
				if op[3]%2 == 0 || renewed[i].IsZero() {
					renewed[i] = clock.Now()
				}
				r = forgedAt(epochs[int(op[1])%len(epochs)], leases[int(op[2])%len(leases)], renewed[i])
				r.ServerTime = clock.Now()
			case 1:
				r = follower
			case 2:
				r = refused
			case 3:
				clock.advance(time.Duration(op[1]) * 50 * time.Millisecond)
				continue
			}
			r.Started = clock.Now()
			m.mu.Lock()
			before := m.floor
			m.mu.Unlock()
			m.record(n, r)
			checkFloor(t, m, before)
		}
		clock.advance(maxClaimHold + time.Millisecond)
		r := forgedAt(1, time.Second, clock.Now())
		r.Started = clock.Now()
		m.record(m.nodes[0], r)
		if f := m.EpochFloor(); f.Epoch != 1 || m.nodes[0].status != StatusLeader {
			t.Fatalf("maxClaimHold after the last answer, a fresh claim of epoch 1: floor %+v, a is %s", f, m.nodes[0].status)
		}
	})
}

// checkFloor checks m's floor after one answer, the floor before it being
// before.
func checkFloor(t *testing.T, m *Monitor, before claim) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.unixNano()
	for _, n := range m.nodes {
		if n.claim.validAt(now) && n.claim.epoch > m.floor.epoch {
			t.Fatalf("%s's valid claim of epoch %d is above the floor %d", n.Addr, n.claim.epoch, m.floor.epoch)
		}
	}
	if m.floor.epoch < before.epoch && before.validAt(now) {
		t.Fatalf("the floor went down from %d to %d while its claim was valid", before.epoch, m.floor.epoch)
	}
	if l := m.leader.Load(); l != nil && l.epoch != m.floor.epoch {
		t.Fatalf("%s leads at epoch %d, the floor is %d", l.Addr, l.epoch, m.floor.epoch)
	}
}
