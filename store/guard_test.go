package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// A guarded Redis that dies answers at once while it is down, reports the
// outage and the recovery once each, and comes back by itself.
func TestGuardOpensOnceAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var events []error
	g := store.NewGuard(store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1,
		ContextTimeoutEnabled: true, DialTimeout: 50 * time.Millisecond}), "g:"),
		20*time.Millisecond, 100*time.Millisecond, func(err error) {
			mu.Lock()
			events = append(events, err)
			mu.Unlock()
		})
	defer g.Close()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := g.Increment(ctx, "n", 1, time.Minute)
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	for i := 0; i < 3; i++ { // three failures in a row open the circuit
		if !g.Up() {
			t.Fatalf("the circuit opened after %d failures", i)
		}
		if err := call(); err == nil || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("call %d to a paused Redis: %v, want its timeout", i, err)
		}
	}
	if g.Up() {
		t.Fatal("the guard still takes the store to be up after three failures")
	}
	start := time.Now()
	for i := 0; i < 100; i++ {
		if err := call(); !errors.Is(err, store.ErrUnavailable) && err == nil {
			t.Fatalf("a call while down succeeded")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("100 calls on a down store took %v: they should not wait", d)
	}
	srv.Resume()
	poll.Until(t, 3*time.Second, "the guard to find the store back", func() bool { return call() == nil && g.Up() })
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0] == nil || events[1] != nil {
		t.Fatalf("outage reports: %v, want one error then one recovery", events)
	}
}

// Answers of a working store (full, not a counter) and callers that give
// up do not count as outages.
func TestGuardIgnoresAnswersAndCallersLeaving(t *testing.T) {
	m := store.NewMemory(1, time.Hour)
	g := store.NewGuard(m, time.Second, time.Second, nil)
	defer g.Close()
	ctx := context.Background()
	mustAdd(t, g, "a", "x", time.Minute)
	if _, err := g.TryAdd(ctx, "b", "x", time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatal(err)
	}
	if _, err := g.Increment(ctx, "a", 1, time.Minute); !errors.Is(err, store.ErrNotCounter) {
		t.Fatal(err)
	}
	if !g.Up() {
		t.Fatal("answers opened the circuit")
	}
}
