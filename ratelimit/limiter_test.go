package ratelimit

import (
	"context"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/store"
)

func newMemory(t testing.TB) *store.Memory {
	s := store.NewMemory(0, time.Hour)
	t.Cleanup(func() { s.Close() })
	return s
}

func mustLimiter(t testing.TB, z Zone) *Limiter {
	t.Helper()
	l, err := NewLimiter(z, 1000, Leasing{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// base is a clock time aligned to every window used here.
var base = time.Unix(1_800_000_000, 0)

// randomTimes returns n request times over span, in bursts, sorted.
func randomTimes(r *rand.Rand, n int, span time.Duration) []time.Time {
	ts := make([]time.Time, 0, n)
	for len(ts) < n {
		at := time.Duration(r.Int64N(int64(span)))
		for b := r.IntN(20) + 1; b > 0 && len(ts) < n; b-- { // a burst around at
			ts = append(ts, base.Add(at+time.Duration(r.Int64N(int64(50*time.Millisecond)))))
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// Fixed windows let exactly min(events, requests) through in each window
// aligned to the clock.
func TestFixedWindowExactPerAlignedWindow(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		z := Zone{Name: "z", Events: int64(r.IntN(10) + 1), Window: time.Second}
		l, s := mustLimiter(t, z), newMemory(t)
		sent, allowed := map[int64]int64{}, map[int64]int64{}
		for _, at := range randomTimes(r, 400, 20*time.Second) {
			d, err := decide(ctx, l, s, "k", at)
			if err != nil {
				t.Fatal(err)
			}
			w := WindowStart(at, z.Window).Unix()
			sent[w]++
			if d.Allowed {
				allowed[w]++
			} else if got := at.Add(d.RetryAfter); !got.Equal(WindowStart(at, z.Window).Add(z.Window)) {
				t.Fatalf("Retry-After points at %v, not the window's end", got)
			}
		}
		for w, n := range sent {
			if want := min(n, z.Events); allowed[w] != want {
				t.Fatalf("seed %d: window %d: %d of %d requests allowed, want %d", seed, w, allowed[w], n, want)
			}
		}
	}
}

// A sliding window never lets more than events through in any window-long
// span, and a request sent when Retry-After says passes.
func TestSlidingNeverExceedsEventsInAnySpan(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(0); seed < 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		z := Zone{Name: "z", Events: int64(r.IntN(10) + 1), Window: time.Second, Sliding: true}
		l, s := mustLimiter(t, z), newMemory(t)
		var passed []time.Time
		var retries []time.Time
		for _, at := range randomTimes(r, 600, 20*time.Second) {
			for len(retries) > 0 && !retries[0].After(at) { // clients that waited as told
				d, err := decide(ctx, l, s, "k", retries[0])
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					passed = append(passed, retries[0])
				}
				retries = retries[1:]
			}
			d, err := decide(ctx, l, s, "k", at)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				passed = append(passed, at)
			} else if d.RetryAfter <= 0 || d.RetryAfter > z.Window+z.Window/SlidingSlots {
				t.Fatalf("Retry-After %v out of (0, window+slot]", d.RetryAfter)
			} else if len(retries) < 5 {
				retries = append(retries, at.Add(d.RetryAfter))
				sort.Slice(retries, func(i, j int) bool { return retries[i].Before(retries[j]) })
			}
		}
		sort.Slice(passed, func(i, j int) bool { return passed[i].Before(passed[j]) })
		for i := range passed {
			j := sort.Search(len(passed), func(j int) bool { return !passed[j].Before(passed[i].Add(z.Window)) })
			if n := int64(j - i); n > z.Events {
				t.Fatalf("seed %d: %d requests passed in the window-long span from %v, limit %d", seed, n, passed[i].Sub(base), z.Events)
			}
		}
		if len(passed) < int(z.Events) {
			t.Fatalf("seed %d: only %d requests passed", seed, len(passed))
		}
	}
}

// Retry-After is honest: a request sent then passes, in both modes.
func TestRetryAfterIsWhenARequestPasses(t *testing.T) {
	ctx := context.Background()
	for _, sliding := range []bool{false, true} {
		z := Zone{Name: "z", Events: 3, Window: time.Second, Sliding: sliding}
		l, s := mustLimiter(t, z), newMemory(t)
		at := base.Add(250 * time.Millisecond)
		for i := 0; i < 3; i++ {
			if d, _ := decide(ctx, l, s, "k", at); !d.Allowed || d.Remaining != int64(2-i) {
				t.Fatalf("sliding=%v: request %d: %+v", sliding, i, d)
			}
		}
		d, err := decide(ctx, l, s, "k", at)
		if err != nil || d.Allowed || d.Remaining != 0 {
			t.Fatalf("sliding=%v: the fourth request: %+v, %v", sliding, d, err)
		}
		if d, _ := decide(ctx, l, s, "k", at.Add(d.RetryAfter-time.Millisecond)); d.Allowed {
			t.Fatalf("sliding=%v: a request before Retry-After passed", sliding)
		}
		if d, _ := decide(ctx, l, s, "k", at.Add(d.RetryAfter)); !d.Allowed {
			t.Fatalf("sliding=%v: a request at Retry-After was refused: %+v", sliding, d)
		}
	}
}

// countingStore counts the calls that reach the store. It is not local
// (store.IsLocal), as a shared store is not: a limiter leases from it.
type countingStore struct {
	store.Store
	calls atomic.Int64
}

func (c *countingStore) IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	c.calls.Add(1)
	return c.Store.IncrementAndCount(ctx, key, amount, lifetime, others, counts)
}

func (c *countingStore) Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error) {
	c.calls.Add(1)
	return c.Store.Increment(ctx, key, amount, lifetime)
}

func TestKeysOverTheLimitDoNotReachTheStore(t *testing.T) {
	s := &countingStore{Store: newMemory(t)}
	l := mustLimiter(t, Zone{Name: "z", Events: 2, Window: time.Minute})
	for i := 0; i < 1000; i++ {
		if _, err := decide(context.Background(), l, s, "flood", base.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.calls.Load(); n != 3 {
		t.Fatalf("the store got %d calls for 1000 requests of a key over its limit of 2, want 3", n)
	}
	d, _ := decide(context.Background(), l, s, "flood", base.Add(time.Minute))
	if n := s.calls.Load(); !d.Allowed || n != 4 {
		t.Fatalf("the next window: %+v after %d store calls", d, n)
	}
}

func TestKeysAreAlignedAndBounded(t *testing.T) {
	ctx := context.Background()
	s := newMemory(t)
	l := mustLimiter(t, Zone{Name: "login", Events: 5, Window: time.Minute})
	at := base.Add(90 * time.Second)
	if _, err := decide(ctx, l, s, "10.0.0.1", at); err != nil {
		t.Fatal(err)
	}
	idx := WindowStart(at, time.Minute).Unix() / 60
	key := "rl:{login:10.0.0.1}:" + itoa(idx)
	if v, ok, _ := s.Get(ctx, key); !ok || v != "1" {
		t.Fatalf("the counter %s = %q, %v", key, v, ok)
	}
	huge := strings.Repeat("x", 10000)
	if _, err := decide(ctx, l, s, huge, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, "rl:{login:"+huge+"}:"+itoa(idx)); ok {
		t.Fatal("a 10000-byte key was used as is")
	}
	if s.Len() != 2 {
		t.Fatalf("%d keys in the store, want 2", s.Len())
	}
}

func TestWindowStartIsTheSameForEveryInstance(t *testing.T) {
	for _, w := range []time.Duration{time.Second, time.Minute, 90 * time.Second, time.Hour} {
		a, b := base.Add(123*time.Millisecond), base.Add(w-time.Nanosecond)
		if !WindowStart(a, w).Equal(WindowStart(b, w)) || WindowStart(a, w).UnixNano()%int64(w) != 0 {
			t.Fatalf("window %v: starts %v and %v", w, WindowStart(a, w), WindowStart(b, w))
		}
	}
}

func TestZoneValidate(t *testing.T) {
	for _, z := range []Zone{
		{Events: 1, Window: time.Second},
		{Name: "a b", Events: 1, Window: time.Second},
		{Name: "a", Events: 0, Window: time.Second},
		{Name: "a", Events: 1},
		{Name: "a", Events: 1, Window: 15 * time.Millisecond, Sliding: true},
	} {
		if _, err := NewLimiter(z, 10, Leasing{}); err == nil {
			t.Errorf("zone %+v was accepted", z)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A huge key over the limit is remembered by its hash, as the store counts
// it: remember_limited bounds the memory's bytes, not only its keys.
func TestHugeKeysAreRememberedByTheirHash(t *testing.T) {
	l := mustLimiter(t, Zone{Name: "z", Events: 1, Window: time.Minute})
	s := newMemory(t)
	huge := strings.Repeat("k", 10000)
	for i := 0; i < 2; i++ {
		if _, err := decide(context.Background(), l, s, huge, base); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := l.Remembered(huge, base); !ok {
		t.Fatal("the huge key over its limit is not remembered")
	}
	for i := range l.over.shards {
		for k := range l.over.shards[i].m {
			if len(k) > MaxKeyBytes+1 {
				t.Fatalf("a %d-byte key is held as is", len(k))
			}
		}
	}
}

// decide is one zone's decision as edge_rate_limit takes it: a key
// remembered over the limit is refused without the store, any other is
// counted.
func decide(ctx context.Context, l *Limiter, s store.Store, key string, now time.Time) (Decision, error) {
	if d, ok := l.Remembered(key, now); ok {
		return d, nil
	}
	return l.Count(ctx, s, key, now)
}

// Issue 26.2 with a zone's own limiter, fixed and sliding: 200 keys sent 6
// times each (every counter at its limit of 5) through a memory store of
// 50, then a fresh key 20 times. The fresh key gets exactly its limit, the
// flood keys exactly theirs (1,000 of 1,200), and the store never fails:
// the caller's on_store_error is never asked.
func TestFullMemoryStoreCountsEveryNewKey(t *testing.T) {
	ctx := context.Background()
	for _, sliding := range []bool{false, true} {
		s := store.NewMemory(50, time.Hour)
		t.Cleanup(func() { s.Close() })
		l := mustLimiter(t, Zone{Name: "z", Events: 5, Window: time.Minute, Sliding: sliding})
		passed := func(key string, n int) int {
			t.Helper()
			got := 0
			for range n {
				d, err := decide(ctx, l, s, key, base)
				if err != nil {
					t.Fatalf("sliding %v, %s: %v (a full store must count, not fail)", sliding, key, err)
				}
				if d.Allowed {
					got++
				}
			}
			return got
		}
		flood := 0
		for i := range 200 {
			flood += passed("flood"+itoa(int64(i)), 6)
		}
		if flood != 1000 {
			t.Errorf("sliding %v: the flood passed %d of 1200, want 1000", sliding, flood)
		}
		if got := passed("fresh", 20); got != 5 {
			t.Errorf("sliding %v: a fresh key after the flood passed %d of 20, want 5", sliding, got)
		}
	}
}
