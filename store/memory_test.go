package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/store"
)

// Values (bindings) have a budget of their own: when it is full a new value
// is refused until one expires or is removed, and counters go on.
func TestMemoryFullValuesRefusesNewValuesOnly(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory(10, time.Hour)
	defer s.Close()
	for i := 0; i < 9; i++ {
		mustAdd(t, s, fmt.Sprint("k", i), "v", time.Minute)
	}
	mustAdd(t, s, "short", "v", lifetime)
	if _, err := s.TryAdd(ctx, "new", "v", time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatalf("TryAdd into a full store: %v, want ErrFull", err)
	}
	if f := s.Fullness(); f.Refusals != 1 || !f.Degraded {
		t.Fatalf("after a refusal: %+v, want 1 refusal, degraded", f)
	}
	for i := 0; i < 10; i++ {
		if n, err := s.Increment(ctx, fmt.Sprint("counter", i), 1, time.Minute); n != 1 || err != nil {
			t.Fatalf("Increment of a new counter with the values full = %d, %v", n, err)
		}
	}
	if v, ok, err := s.GetAndTouch(ctx, "k0", time.Minute); v != "v" || !ok || err != nil {
		t.Fatalf("GetAndTouch of a present value in a full store = %q, %v, %v", v, ok, err)
	}
	// An expired key makes room, though the sweeper has not run.
	poll.Until(t, 5*lifetime, "the short-lived key to make room", func() bool {
		ok, err := s.TryAdd(ctx, "new", "v", time.Minute)
		return ok && err == nil
	})
	// Removing frees a place too.
	if err := s.Remove(ctx, "k0"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, "other", "v", time.Minute)
}

// The flood: unique keys counted once each, many times the store's
// size. They evict only their own kind: keys counted more often keep their
// exact counts, values (bindings) added before and during the flood stay,
// and a new key counts from 1.
func TestMemoryFloodEvictsOnlyTheSmallestCounts(t *testing.T) {
	const size, flood = 200, 20_000
	ctx := context.Background()
	s := store.NewMemory(size, time.Hour)
	defer s.Close()
	counted := map[string]int64{}
	count := func(key string) {
		t.Helper()
		n, err := s.Increment(ctx, key, 1, time.Minute)
		if counted[key]++; n != counted[key] || err != nil {
			t.Fatalf("Increment(%s) = %d, %v; want %d", key, n, err, counted[key])
		}
	}
	for i := 0; i < size; i++ {
		mustAdd(t, s, fmt.Sprint("ua:before", i), "s1", time.Minute)
	}
	for i := 0; i < 3; i++ {
		count("old")
	}
	for i := 0; i < flood; i++ {
		if _, err := s.Increment(ctx, fmt.Sprint("flood", i), 1, time.Minute); err != nil {
			t.Fatalf("flood key %d: %v", i, err)
		}
		// Keys counted again before the flood has gone round the store
		// once are counted exactly, the flood notwithstanding.
		if i%50 == 0 && i < flood/2 {
			for k := 0; k < 20; k++ {
				if k <= i/1000 {
					count(fmt.Sprint("steady", k))
				}
			}
		}
		if i%(flood/size) == 0 {
			if err := s.Remove(ctx, fmt.Sprint("ua:before", i/(flood/size))); err != nil {
				t.Fatal(err)
			}
			mustAdd(t, s, fmt.Sprint("ua:during", i), "s2", time.Minute)
		}
	}
	for key, n := range counted {
		wantValue(t, s, key, fmt.Sprint(n))
	}
	for i := 0; i < flood; i += flood / size {
		wantValue(t, s, fmt.Sprint("ua:during", i), "s2")
	}
	count("old")
	count("fresh")
	f := s.Fullness()
	if f.Evictions < flood-size || f.Refusals != 0 || f.Degraded {
		t.Fatalf("after the flood: %+v, want over %d evictions, no refusal, not degraded", f, flood-size)
	}
	if n := s.Len(); n > 2*size {
		t.Fatalf("%d keys held, want at most %d", n, 2*size)
	}
}

// The flood from many goroutines at once: the bound holds, counters
// counted more than once keep their exact counts, values stay.
func TestMemoryConcurrentFloodEvictsOnlyTheSmallestCounts(t *testing.T) {
	const size, workers, perWorker, heavy, rounds = 1000, 8, 4000, 20, 20
	ctx := context.Background()
	s := store.NewMemory(size, time.Hour)
	defer s.Close()
	for k := 0; k < heavy; k++ {
		for range 5 {
			if _, err := s.Increment(ctx, fmt.Sprint("heavy", k), 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if _, err := s.Increment(ctx, fmt.Sprint("flood", w, "-", i), 1, time.Minute); err != nil {
					t.Errorf("flood: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			for k := 0; k < heavy; k++ {
				if _, err := s.Increment(ctx, fmt.Sprint("heavy", k), 1, time.Minute); err != nil {
					t.Errorf("heavy: %v", err)
					return
				}
			}
		}
	})
	wg.Go(func() {
		for i := range size {
			if ok, err := s.TryAdd(ctx, fmt.Sprint("ua:", i), "s1", time.Minute); !ok || err != nil {
				t.Errorf("TryAdd during the flood: %v, %v", ok, err)
				return
			}
		}
	})
	wg.Wait()
	for k := 0; k < heavy; k++ {
		wantValue(t, s, fmt.Sprint("heavy", k), fmt.Sprint(5+rounds))
	}
	for i := 0; i < size; i += 97 {
		wantValue(t, s, fmt.Sprint("ua:", i), "s1")
	}
	if n := s.Len(); n != 2*size {
		t.Fatalf("%d keys held, want %d", n, 2*size)
	}
	if f := s.Fullness(); f.Evictions < workers*perWorker+heavy-size {
		t.Fatalf("%+v, want at least %d evictions", f, workers*perWorker+heavy-size)
	}
}

// A counter that has reached its limit is never evicted: with every counter
// there, a new key is refused (its caller's fallback decides) and the store
// is degraded, until a counter is under its limit again or expires.
func TestMemoryNeverEvictsACounterAtItsLimit(t *testing.T) {
	const size, limit = 10, 2
	ctx := context.Background()
	s := store.NewMemory(size, time.Hour)
	defer s.Close()
	within := func(key string, amount int64, life time.Duration) (int64, error) {
		return s.IncrementAndCountWithin(ctx, key, amount, life, nil, nil, limit)
	}
	for i := 0; i < size; i++ {
		life := time.Minute
		if i == size-1 {
			life = lifetime
		}
		for j := 0; j < limit; j++ {
			if _, err := within(fmt.Sprint("k", i), 1, life); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := within("new", 1, time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatalf("a new key with every counter at its limit: %v, want ErrFull", err)
	}
	if f := s.Fullness(); f.Evictions != 0 || f.Refusals != 1 || !f.Degraded {
		t.Fatalf("%+v, want no eviction, 1 refusal, degraded", f)
	}
	mustAdd(t, s, "ua:binding", "s1", time.Minute) // values have their own room
	// Increment (a sliding zone's taking back of a refused request) keeps
	// the mark; a count found under the limit lifts it.
	if _, err := s.Increment(ctx, "k0", -1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := within("new", 1, time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatalf("after Increment -1: %v, want ErrFull still", err)
	}
	if n, err := within("k1", -1, time.Minute); n != limit-1 || err != nil {
		t.Fatalf("k1 under its limit again: %d, %v", n, err)
	}
	if n, err := within("new", 1, time.Minute); n != 1 || err != nil {
		t.Fatalf("a new key once k1 is under its limit: %d, %v", n, err)
	}
	wantAbsent(t, s, "k1")
	wantValue(t, s, "k0", fmt.Sprint(limit-1))
	// An expired counter at its limit makes room once swept.
	poll.Until(t, 20*lifetime, "the expired counter to make room", func() bool {
		n, err := within("newer", 1, time.Minute)
		return n == 1 && err == nil
	})
}

// A sliding zone's counters, sharing the key's {hash tag}, are kept together
// once their sum reaches the limit.
func TestMemoryKeepsAKeysCountersAtItsLimit(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory(3, time.Hour)
	defer s.Close()
	counts := make([]int64, 2)
	slots := []string{"rl:{z:a}:1", "rl:{z:a}:2"}
	for _, k := range slots {
		if _, err := s.IncrementAndCountWithin(ctx, k, 1, time.Minute, nil, nil, 3); err != nil {
			t.Fatal(err)
		}
	}
	// Slot 3 brings the key to its limit: its older slots are kept too.
	if n, err := s.IncrementAndCountWithin(ctx, "rl:{z:a}:3", 1, time.Minute, slots, counts, 3); n != 1 || err != nil || counts[0]+counts[1] != 2 {
		t.Fatalf("the third slot: %d, %v, %v", n, err, counts)
	}
	if _, err := s.IncrementAndCountWithin(ctx, "rl:{z:b}:1", 1, time.Minute, nil, nil, 3); !errors.Is(err, store.ErrFull) {
		t.Fatalf("a new key with the one key's slots at its limit: %v, want ErrFull", err)
	}
}

func TestMemorySweepsExpiredKeys(t *testing.T) {
	s := store.NewMemory(0, 10*time.Millisecond)
	defer s.Close()
	for i := 0; i < 100; i++ {
		mustAdd(t, s, fmt.Sprint("k", i), "v", 20*time.Millisecond)
	}
	mustAdd(t, s, "kept", "v", time.Minute)
	poll.Until(t, 2*time.Second, "the sweeper to delete the expired keys", func() bool { return s.Len() == 1 })
	wantValue(t, s, "kept", "v")
}

func BenchmarkMemoryIncrement(b *testing.B) {
	s := store.NewMemory(0, time.Hour)
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Increment(ctx, "rl:{zone:10.0.0.1}:123", 1, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Increment of new keys into a full store: every call evicts.
func BenchmarkMemoryIncrementFull(b *testing.B) {
	const size = 100_000
	s := store.NewMemory(size, time.Hour)
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < size; i++ {
		if _, err := s.Increment(ctx, fmt.Sprint("fill", i), 2, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := make([]byte, 0, 32)
		for pb.Next() {
			key = strconv.AppendInt(append(key[:0], "rl:{flood:"...), next.Add(1), 10)
			if _, err := s.Increment(ctx, string(key), 1, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	if f := s.Fullness(); f.Refusals != 0 {
		b.Fatalf("%d refusals", f.Refusals)
	}
}
