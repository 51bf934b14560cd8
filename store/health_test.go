package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// aheadStore is a store that answers pings (or not) and whose clock is
// ahead of this process's: the health check's unit test needs no server.
type aheadStore struct {
	Store
	ahead time.Duration
	down  atomic.Bool
	pings atomic.Int64
	// lateBy delays the clock's answer after its time was read, as a
	// loaded machine does: that round trip's midpoint is off by half.
	lateBy time.Duration
}

func (s *aheadStore) Ping(context.Context) error {
	s.pings.Add(1)
	if s.down.Load() {
		return errors.New("down")
	}
	return nil
}

func (s *aheadStore) Now(context.Context) (time.Time, error) {
	at := time.Now().Add(s.ahead)
	time.Sleep(s.lateBy) // the answer's way back, not a synchronisation
	return at, nil
}

// The first check is at once; the offset of the store's clock is measured
// and followed by Now; a store that stops answering keeps the last figures.
func TestHealthMeasuresPingAndClock(t *testing.T) {
	s := &aheadStore{Store: NewMemory(10, 0), ahead: 5 * time.Second}
	g := NewGuard(s, time.Millisecond, time.Millisecond, func(error) {})
	h := NewHealth(g, s, time.Now)
	var heard atomic.Int64
	h.OnClockOffset = func(d time.Duration) { heard.Store(int64(d)) }
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx, time.Hour) }()
	defer func() { stop(); <-done }()
	poll.Until(t, 5*time.Second, "the first check, at once", func() bool { return heard.Load() != 0 })
	if off := h.ClockOffset(); off < 4*time.Second || off > 6*time.Second || time.Duration(heard.Load()) != off {
		t.Fatalf("offset %v (heard %v), want about 5s", off, time.Duration(heard.Load()))
	}
	if !h.HasClock() || h.Ping() <= 0 {
		t.Fatalf("clock %v, ping %v", h.HasClock(), h.Ping())
	}
	if ahead := time.Until(h.Now()); ahead < 4*time.Second || ahead > 6*time.Second {
		t.Fatalf("Now is %v ahead, want about 5s", ahead)
	}
	s.down.Store(true)
	before := h.Ping()
	h.check(context.Background(), time.Second)
	if h.Ping() != before || s.pings.Load() != 2 {
		t.Fatalf("a failed ping changed the figures (%v -> %v) or was not sent (%d pings)", before, h.Ping(), s.pings.Load())
	}
}

// The offset kept is the one measured in the shortest of the last round
// trips: slow answers around a fast one do not move it.
func TestHealthKeepsTheShortestRoundTripsOffset(t *testing.T) {
	s := &aheadStore{Store: NewMemory(10, 0), ahead: time.Second}
	h := NewHealth(NewGuard(s, time.Millisecond, time.Millisecond, func(error) {}), s, time.Now)
	errorOf := func() time.Duration { return (h.ClockOffset() - time.Second).Abs() }
	s.lateBy = 100 * time.Millisecond
	h.check(context.Background(), time.Second)
	if e := errorOf(); e < 40*time.Millisecond {
		t.Fatalf("a slow answer's offset is off by only %v: the test's delay did not work", e)
	}
	s.lateBy = 0
	h.check(context.Background(), time.Second)
	fast := errorOf()
	s.lateBy = 100 * time.Millisecond
	h.check(context.Background(), time.Second)
	if e := errorOf(); e != fast || e >= 40*time.Millisecond {
		t.Fatalf("after a slow answer the offset is off by %v, want the fast one's %v", e, fast)
	}
}
