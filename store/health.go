package store

import (
	"context"
	"sync/atomic"
	"time"
)

// Health checks a remote store through its guard: a ping every interval,
// the first at once, so that a store down from the start is noticed (and
// its recovery too) without waiting for traffic; and, for a store with a
// clock of its own, how far that clock is ahead of this process's.
type Health struct {
	guard *Guard
	clock Clock // nil if the store has none
	wall  func() time.Time
	// OnPing and OnClockOffset, if set before Run, hear each answered
	// ping's duration and each measured offset.
	OnPing, OnClockOffset func(time.Duration)

	ping, offset atomic.Int64 // ns, as last measured (offset: see measureClock)

	// samples are the last clock measurements, for measureClock's choice;
	// only the health check's goroutine touches them.
	samples [clockSamples]clockSample
	sampled int
}

// clockSample is one measurement of the store's clock: the offset found
// and the round trip it was found in, which bounds its error (half of it).
type clockSample struct{ offset, rtt time.Duration }

// clockSamples is how many measurements the offset is chosen from: on a
// loaded machine most round trips wait for a CPU, and the shortest of a
// few has the smallest error.
const clockSamples = 8

// NewHealth checks the store behind guard; s is that store, a Clock if it
// has one. wall is this process's clock.
func NewHealth(guard *Guard, s Store, wall func() time.Time) *Health {
	clock, _ := s.(Clock)
	return &Health{guard: guard, clock: clock, wall: wall}
}

// pingTimeout bounds a health check's ping. It is not the interval: a
// short interval's deadline (100 ms) missed by a loaded machine opened the
// store's circuit for every handler, and a slow check only delays the next.
const pingTimeout = time.Second

// Run checks the store every interval until ctx ends.
func (h *Health) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.check(ctx, pingTimeout)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Health) check(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if h.guard.Ping(ctx) != nil {
		return
	}
	took := time.Since(start)
	h.ping.Store(int64(took))
	if h.OnPing != nil {
		h.OnPing(took)
	}
	if h.clock != nil {
		h.measureClock(ctx)
	}
}

// measureClock measures how far the store's clock is ahead of this
// process's: against the middle of the round trip, so within half of it;
// the offset kept is that of the shortest round trip among the last
// clockSamples, as NTP does.
func (h *Health) measureClock(ctx context.Context) {
	sent := h.wall()
	at, err := h.clock.Now(ctx)
	if err != nil {
		return
	}
	received := h.wall()
	rtt := received.Sub(sent)
	h.samples[h.sampled%clockSamples] = clockSample{offset: at.Sub(sent.Add(rtt / 2)), rtt: rtt}
	h.sampled++
	best := h.samples[0]
	for _, c := range h.samples[1:min(h.sampled, clockSamples)] {
		if c.rtt < best.rtt {
			best = c
		}
	}
	offset := best.offset
	h.offset.Store(int64(offset))
	if h.OnClockOffset != nil {
		h.OnClockOffset(offset)
	}
}

// Ping is the last answered ping's duration; 0 before the first.
func (h *Health) Ping() time.Duration { return time.Duration(h.ping.Load()) }

// ClockOffset is how far the store's clock was last measured ahead of
// this process's; 0 before a first measurement, or without a clock.
func (h *Health) ClockOffset() time.Duration { return time.Duration(h.offset.Load()) }

// HasClock reports whether the store has a clock of its own.
func (h *Health) HasClock() bool { return h.clock != nil }

// Now is the time by the store's clock: this process's plus the offset
// last measured (an interval apart), or this process's until a first
// measurement.
func (h *Health) Now() time.Time { return h.wall().Add(h.ClockOffset()) }
