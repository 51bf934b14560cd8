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

// Issue 26.2: a store full of counters at their limit still counts a new
// key, as HAProxy's stick table does: it evicts the smallest count (the
// least recently counted among equals), never refuses, and a key counted
// more than the flood keeps its count. 200 keys counted 6 times each (a
// limit of 5 and its refusal) go through a store of 50.
func TestMemoryFullOfCountersAtTheirLimitCountsANewKey(t *testing.T) {
	const size, flood, perKey = 50, 200, 6
	ctx := context.Background()
	s := store.NewMemory(size, time.Hour)
	defer s.Close()
	incr := func(key string) int64 {
		t.Helper()
		n, err := s.Increment(ctx, key, 1, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return n
	}
	for range 10 {
		incr("old")
	}
	for i := range flood {
		for j := range perKey {
			if n := incr(fmt.Sprint("flood", i)); n != int64(j+1) {
				t.Fatalf("flood%d counted %d, want %d: a flood key lost its count while counted", i, n, j+1)
			}
		}
	}
	for j := range 3 {
		if n := incr("fresh"); n != int64(j+1) {
			t.Fatalf("a fresh key after the flood counted %d, want %d", n, j+1)
		}
	}
	wantValue(t, s, "old", "10") // counted more than any flood key: kept
	if f := s.Fullness(); f.Refusals != 0 || f.Degraded || f.Evictions != flood+1-(size-1) {
		t.Fatalf("%+v, want no refusal, not degraded, %d evictions", f, flood+1-(size-1))
	}
	if n := s.Len(); n != size {
		t.Fatalf("%d keys held, want %d", n, size)
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
