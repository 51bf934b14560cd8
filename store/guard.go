package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrUnavailable is returned without asking the store while a Guard has
// found it down.
var ErrUnavailable = errors.New("store: unavailable")

// Guard wraps a remote store with a circuit: three failures in a row (an
// error or a missed deadline) open it, and while it is open calls fail at once
// with ErrUnavailable instead of waiting on a dead store. After a pause
// (doubling from MinPause to MaxPause while failures go on) one call is let
// through to try the store; its success closes the circuit.
type Guard struct {
	Store
	minPause, maxPause time.Duration
	// onChange is called outside the lock when the store goes down (with
	// the error) or comes back (with nil): once per outage each.
	onChange func(err error)

	mu     sync.Mutex
	gen    uint64 // counts the circuit's changes: late outcomes are ignored
	fails  int    // failures in a row while up
	down   bool
	pause  time.Duration
	retry  time.Time // when the next trial may go
	trying bool
}

// NewGuard guards s; onChange (may be nil) hears of outages and recoveries.
func NewGuard(s Store, minPause, maxPause time.Duration, onChange func(err error)) *Guard {
	return &Guard{Store: s, minPause: minPause, maxPause: maxPause, onChange: onChange}
}

// Up reports whether the store is taken to be working.
func (g *Guard) Up() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.down
}

// RetryIn returns how long until the store is tried again (0 when up).
func (g *Guard) RetryIn() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return 0
	}
	return max(time.Until(g.retry), 0)
}

// failuresToOpen is how many failures in a row open the circuit.
const failuresToOpen = 3

// call is one call to the store, as enter let it go.
type call struct {
	ping  bool   // a health check: decides like a trial, holds no trial slot
	trial bool   // the one call that tries a down store
	gen   uint64 // the circuit's state when it went
}

// enter reports whether a call may go to the store.
func (g *Guard) enter() (call, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return call{gen: g.gen}, true
	}
	if g.trying || time.Now().Before(g.retry) {
		return call{}, false
	}
	g.trying = true
	return call{trial: true, gen: g.gen}, true
}

// leave records a call's outcome. An outcome of a call that went before
// the circuit last changed says nothing new: a failure that began before a
// recovery must not reopen it.
func (g *Guard) leave(ctx context.Context, c call, err error) {
	g.mu.Lock()
	if c.trial && !c.ping {
		g.trying = false
	}
	var changed bool
	switch {
	case c.gen != g.gen:
	case err == nil, errors.Is(err, ErrFull), errors.Is(err, ErrNotCounter), errors.Is(err, ErrLifetime):
		g.fails = 0
		if g.down && c.trial {
			g.down, changed = false, true
		}
	case errors.Is(ctx.Err(), context.Canceled): // the caller left: says nothing of the store
	case !g.down:
		// A few failures in a row, so that one slow answer (a pause of
		// the collector, a caller's short deadline) does not take the
		// store away from every user.
		if g.fails++; g.fails < failuresToOpen {
			break
		}
		g.down, g.pause, changed, g.fails = true, g.minPause, true, 0
		g.retry = time.Now().Add(g.pause)
	case c.trial:
		g.pause = min(2*g.pause, g.maxPause)
		g.retry = time.Now().Add(g.pause)
	}
	if changed {
		g.gen++
	}
	g.mu.Unlock()
	if changed && g.onChange != nil {
		g.onChange(err)
	}
}

func guarded[T any](g *Guard, ctx context.Context, do func() (T, error)) (T, error) {
	c, ok := g.enter()
	if !ok {
		var zero T
		return zero, ErrUnavailable
	}
	v, err := do()
	g.leave(ctx, c, err)
	return v, err
}

func (g *Guard) TryAdd(ctx context.Context, key, value string, lifetime time.Duration) (bool, error) {
	return guarded(g, ctx, func() (bool, error) { return g.Store.TryAdd(ctx, key, value, lifetime) })
}

func (g *Guard) Get(ctx context.Context, key string) (string, bool, error) {
	var found bool
	v, err := guarded(g, ctx, func() (v string, err error) { v, found, err = g.Store.Get(ctx, key); return })
	return v, found, err
}

func (g *Guard) Take(ctx context.Context, key string) (string, bool, error) {
	var found bool
	v, err := guarded(g, ctx, func() (v string, err error) { v, found, err = g.Store.Take(ctx, key); return })
	return v, found, err
}

func (g *Guard) Remove(ctx context.Context, key string) error {
	_, err := guarded(g, ctx, func() (struct{}, error) { return struct{}{}, g.Store.Remove(ctx, key) })
	return err
}

func (g *Guard) GetAndTouch(ctx context.Context, key string, lifetime time.Duration) (string, bool, error) {
	var found bool
	v, err := guarded(g, ctx, func() (v string, err error) { v, found, err = g.Store.GetAndTouch(ctx, key, lifetime); return })
	return v, found, err
}

func (g *Guard) Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error) {
	return guarded(g, ctx, func() (int64, error) { return g.Store.Increment(ctx, key, amount, lifetime) })
}

func (g *Guard) IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	return guarded(g, ctx, func() (int64, error) {
		return g.Store.IncrementAndCount(ctx, key, amount, lifetime, others, counts)
	})
}

// Ping always asks the store, closing or opening the circuit by its answer,
// so a health check finds a recovery without waiting for traffic.
func (g *Guard) Ping(ctx context.Context) error {
	g.mu.Lock()
	c := call{ping: true, trial: g.down, gen: g.gen}
	g.mu.Unlock()
	err := g.Store.Ping(ctx)
	g.leave(ctx, c, err)
	return err
}
