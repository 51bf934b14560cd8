package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// The same cases run against every store: they are the toolkit guide's semantics.
func TestMemoryConformance(t *testing.T) {
	conformance(t, func(t *testing.T) store.Store {
		s := store.NewMemory(0, 20*time.Millisecond)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	conformance(t, func(t *testing.T) store.Store {
		return newRedisStore(t, srv, "conformance:"+t.Name()+":")
	})
}

func TestPostgresConformance(t *testing.T) {
	srv := pgtest.Start(t)
	conformance(t, func(t *testing.T) store.Store {
		return newPostgresStore(t, srv, "short_lived_store", "conformance:"+t.Name()+":")
	})
}

func newRedisStore(t *testing.T, srv *redistest.Server, prefix string) store.Store {
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64}), prefix)
	t.Cleanup(func() { s.Close() })
	return s
}

const lifetime = 300 * time.Millisecond

func conformance(t *testing.T, newStore func(*testing.T) store.Store) {
	ctx := context.Background()
	t.Run("TryAddOnlyIfAbsent", func(t *testing.T) {
		s := newStore(t)
		if ok, err := s.TryAdd(ctx, "k", "first", time.Minute); !ok || err != nil {
			t.Fatalf("TryAdd of an absent key = %v, %v", ok, err)
		}
		if ok, err := s.TryAdd(ctx, "k", "second", time.Minute); ok || err != nil {
			t.Fatalf("TryAdd of a present key = %v, %v", ok, err)
		}
		wantValue(t, s, "k", "first")
	})
	t.Run("GetAbsent", func(t *testing.T) {
		s := newStore(t)
		if v, ok, err := s.Get(ctx, "absent"); ok || err != nil || v != "" {
			t.Fatalf("Get of an absent key = %q, %v, %v", v, ok, err)
		}
	})
	t.Run("TakeOnce", func(t *testing.T) {
		s := newStore(t)
		mustAdd(t, s, "k", "v", time.Minute)
		if v, ok, err := s.Take(ctx, "k"); v != "v" || !ok || err != nil {
			t.Fatalf("Take = %q, %v, %v", v, ok, err)
		}
		if _, ok, err := s.Take(ctx, "k"); ok || err != nil {
			t.Fatalf("second Take = %v, %v", ok, err)
		}
		wantAbsent(t, s, "k")
	})
	t.Run("Remove", func(t *testing.T) {
		s := newStore(t)
		mustAdd(t, s, "k", "v", time.Minute)
		if err := s.Remove(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, s, "k")
		if err := s.Remove(ctx, "k"); err != nil {
			t.Fatalf("Remove of an absent key: %v", err)
		}
	})
	t.Run("IncrementCountsFromZeroAsDecimalText", func(t *testing.T) {
		s := newStore(t)
		for i, amount := range []int64{3, 4, -2} {
			want := []int64{3, 7, 5}[i]
			if n, err := s.Increment(ctx, "c", amount, time.Minute); n != want || err != nil {
				t.Fatalf("Increment %d = %d, %v; want %d", amount, n, err, want)
			}
		}
		wantValue(t, s, "c", "5")
		mustAdd(t, s, "text", "41", time.Minute)
		if n, err := s.Increment(ctx, "text", 1, time.Minute); n != 42 || err != nil {
			t.Fatalf("Increment of the text 41 = %d, %v", n, err)
		}
		mustAdd(t, s, "word", "abc", time.Minute)
		if _, err := s.Increment(ctx, "word", 1, time.Minute); !errors.Is(err, store.ErrNotCounter) {
			t.Fatalf("Increment of a word: err = %v, want ErrNotCounter", err)
		}
	})
	t.Run("CallersMayReuseKeyMemory", func(t *testing.T) {
		s := newStore(t)
		buf := []byte("reused:1")
		for _, op := range []func(string) error{
			func(k string) error { _, err := s.Increment(ctx, k, 1, time.Minute); return err },
			func(k string) error { _, err := s.Increment(ctx, k, 1, time.Minute); return err }, // updates in place
			func(k string) error { _, err := s.TryAdd(ctx, k+"x", "v", time.Minute); return err },
		} {
			if err := op(unsafe.String(&buf[0], len(buf))); err != nil {
				t.Fatal(err)
			}
		}
		copy(buf, "XXXXXXXX")
		wantValue(t, s, "reused:1", "2")
		wantValue(t, s, "reused:1x", "v")
	})
	t.Run("IncrementAndCountReadsOthers", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Increment(ctx, "{g}:1", 5, time.Minute); err != nil {
			t.Fatal(err)
		}
		counts := []int64{-1, -1}
		n, err := s.IncrementAndCount(ctx, "{g}:2", 2, time.Minute, []string{"{g}:1", "{g}:0"}, counts)
		if n != 2 || err != nil || counts[0] != 5 || counts[1] != 0 {
			t.Fatalf("IncrementAndCount = %d, %v, counts %v; want 2, nil, [5 0]", n, err, counts)
		}
	})
	t.Run("IncrementAndCountSeesItsOwnIncrement", func(t *testing.T) {
		s := newStore(t)
		counts := []int64{-1}
		n, err := s.IncrementAndCount(ctx, "{g}:1", 3, time.Minute, []string{"{g}:1"}, counts)
		if n != 3 || err != nil || counts[0] != 3 {
			t.Fatalf("IncrementAndCount of a key among its others = %d, %v, counts %v; want 3, nil, [3]", n, err, counts)
		}
	})
	t.Run("LifetimeMustBePositive", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.TryAdd(ctx, "k", "v", 0); !errors.Is(err, store.ErrLifetime) {
			t.Fatalf("TryAdd with lifetime 0: %v", err)
		}
		if _, err := s.Increment(ctx, "k", 1, -time.Second); !errors.Is(err, store.ErrLifetime) {
			t.Fatalf("Increment with a negative lifetime: %v", err)
		}
	})
	t.Run("ExpiredValuesAreAbsent", func(t *testing.T) {
		s := newStore(t)
		start := time.Now()
		mustAdd(t, s, "k", "v", lifetime)
		poll.Until(t, 5*lifetime, "the value to expire", func() bool {
			_, ok, _ := s.Get(ctx, "k")
			return !ok
		})
		if age := time.Since(start); age < lifetime {
			t.Fatalf("the value expired after %v, before its lifetime %v", age, lifetime)
		}
		if _, ok, _ := s.Take(ctx, "k"); ok {
			t.Fatal("Take returned an expired value")
		}
		if ok, err := s.TryAdd(ctx, "k", "again", time.Minute); !ok || err != nil {
			t.Fatalf("TryAdd over an expired value = %v, %v", ok, err)
		}
		if _, err := s.Increment(ctx, "c", 9, lifetime); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 5*lifetime, "the counter to expire", func() bool {
			_, ok, _ := s.Get(ctx, "c")
			return !ok
		})
		if n, err := s.Increment(ctx, "c", 1, time.Minute); n != 1 || err != nil {
			t.Fatalf("Increment of an expired counter = %d, %v; want 1", n, err)
		}
	})
	t.Run("EveryIncrementRenewsTheLifetime", func(t *testing.T) {
		s := newStore(t)
		start := time.Now()
		for time.Since(start) < 2*lifetime { // outlives its first lifetime twice over
			if _, err := s.Increment(ctx, "c", 1, lifetime); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := s.Get(ctx, "c"); !ok {
				t.Fatalf("the counter expired %v after its first increment, though renewed", time.Since(start))
			}
			time.Sleep(lifetime / 10) // the passage of time is what is tested
		}
	})
	t.Run("GetAndTouchExtendsOnlyLiveKeys", func(t *testing.T) {
		s := newStore(t)
		if _, ok, err := s.GetAndTouch(ctx, "absent", time.Minute); ok || err != nil {
			t.Fatalf("GetAndTouch of an absent key = %v, %v; want false, nil", ok, err)
		}
		wantAbsent(t, s, "absent")
		if _, _, err := s.GetAndTouch(ctx, "absent", 0); !errors.Is(err, store.ErrLifetime) {
			t.Fatalf("GetAndTouch with lifetime 0: %v", err)
		}
		start := time.Now()
		mustAdd(t, s, "k", "v", lifetime)
		for time.Since(start) < 2*lifetime { // outlives its first lifetime twice over
			if v, ok, err := s.GetAndTouch(ctx, "k", lifetime); v != "v" || !ok || err != nil {
				t.Fatalf("GetAndTouch of a live key %v after adding it = %q, %v, %v", time.Since(start), v, ok, err)
			}
			time.Sleep(lifetime / 10) // the passage of time is what is tested
		}
		poll.Until(t, 5*lifetime, "the untouched value to expire", func() bool {
			_, ok, _ := s.Get(ctx, "k")
			return !ok
		})
		if _, ok, err := s.GetAndTouch(ctx, "k", time.Minute); ok || err != nil {
			t.Fatalf("GetAndTouch of an expired key = %v, %v; want false, nil", ok, err)
		}
		wantAbsent(t, s, "k")
	})
	t.Run("ClockIsTheServers", func(t *testing.T) {
		clock, ok := newStore(t).(store.Clock)
		if !ok {
			t.Skip("a store without a clock of its own")
		}
		// The server runs on this machine, so on this clock.
		before := time.Now()
		now, err := clock.Now(ctx)
		if err != nil || now.Before(before.Add(-time.Second)) || now.After(time.Now().Add(time.Second)) {
			t.Fatalf("Now = %v, %v; this machine says %v", now, err, before)
		}
	})
	t.Run("ConcurrentTryAddOneWins", func(t *testing.T) {
		s := newStore(t)
		var wins atomic.Int32
		race(t, 50, func(i int) error {
			ok, err := s.TryAdd(ctx, "k", fmt.Sprint(i), time.Minute)
			if ok {
				wins.Add(1)
			}
			return err
		})
		if wins.Load() != 1 {
			t.Fatalf("%d callers added the key, want 1", wins.Load())
		}
	})
	t.Run("ConcurrentTakeReturnsOnce", func(t *testing.T) {
		s := newStore(t)
		for round := 0; round < 20; round++ {
			mustAdd(t, s, "k", "v", time.Minute)
			var got atomic.Int32
			race(t, 20, func(int) error {
				_, ok, err := s.Take(ctx, "k")
				if ok {
					got.Add(1)
				}
				return err
			})
			if got.Load() != 1 {
				t.Fatalf("round %d: %d callers took the value, want 1", round, got.Load())
			}
		}
	})
	t.Run("ConcurrentIncrementsExact", func(t *testing.T) {
		s := newStore(t)
		const workers, each = 40, 50
		var mu sync.Mutex
		var seen []int64
		race(t, workers, func(int) error {
			for j := 0; j < each; j++ {
				n, err := s.Increment(ctx, "c", 1, time.Minute)
				if err != nil {
					return err
				}
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			}
			return nil
		})
		sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
		for i, n := range seen {
			if n != int64(i+1) {
				t.Fatalf("the counts returned are not 1..%d exactly once each: position %d holds %d", workers*each, i, n)
			}
		}
		wantValue(t, s, "c", fmt.Sprint(workers*each))
	})
}

// race runs f on n goroutines released at once, and fails on any error.
func race(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- f(i)
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustAdd(t *testing.T, s store.Store, key, value string, life time.Duration) {
	t.Helper()
	if ok, err := s.TryAdd(context.Background(), key, value, life); !ok || err != nil {
		t.Fatalf("TryAdd(%q) = %v, %v", key, ok, err)
	}
}

func wantValue(t *testing.T, s store.Store, key, want string) {
	t.Helper()
	if v, ok, err := s.Get(context.Background(), key); v != want || !ok || err != nil {
		t.Fatalf("Get(%q) = %q, %v, %v; want %q", key, v, ok, err, want)
	}
}

func wantAbsent(t *testing.T, s store.Store, key string) {
	t.Helper()
	if v, ok, err := s.Get(context.Background(), key); ok || err != nil {
		t.Fatalf("Get(%q) = %q, %v, %v; want absent", key, v, ok, err)
	}
}
