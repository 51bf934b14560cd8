package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/store"
)

// leasingLimiters returns n limiters of z that lease in parts, as n Caddy
// instances sharing a store would hold.
func leasingLimiters(t testing.TB, z Zone, parts int64, n int) []*Limiter {
	t.Helper()
	ls := make([]*Limiter, n)
	for i := range ls {
		l, err := NewLimiter(z, 1000, Leasing{Parts: parts, MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	return ls
}

// Instances that lease from one store let exactly min(events, requests)
// through in each fixed window, small limits and large, while each keeps
// getting requests; a large limit costs far fewer store calls than
// requests, a small one (events < 2*parts) one per request until it is
// reached, as without leasing.
func TestLeasesKeepFixedWindowsExact(t *testing.T) {
	ctx := context.Background()
	for _, events := range []int64{1, 10, 31, 32, 100, 1000, 5000} {
		r := rand.New(rand.NewPCG(uint64(events), 3))
		z := Zone{Name: "z", Events: events, Window: time.Second}
		s := &countingStore{Store: newMemory(t)}
		ls := leasingLimiters(t, z, 16, 3)
		sent := int64(0)
		for w := range int64(3) {
			allowed := int64(0)
			n := 3 * events
			for i := range n {
				at := base.Add(time.Duration(w)*time.Second + time.Duration(i*int64(time.Second)/n))
				d, err := decide(ctx, ls[r.IntN(len(ls))], s, "k", at)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					allowed++
				}
			}
			sent += n
			if allowed != events {
				t.Fatalf("events %d: window %d: %d of %d requests allowed across 3 instances, want %d", events, w, allowed, n, events)
			}
		}
		calls := s.calls.Load()
		switch {
		case events < 32 && calls < 3*events:
			t.Fatalf("events %d: %d store calls for %d allowed requests: a small limit leased", events, calls, 3*events)
		case events >= 1000 && calls > sent/10:
			t.Fatalf("events %d: %d store calls for %d requests: no leasing", events, calls, sent)
		}
		t.Logf("events %d: %d store calls for %d requests", events, calls, sent)
	}
}

// The same with requests at once, from goroutines on two instances: the
// requests of a key wait for the one taking its lease, and no more than
// the limit passes however they race.
func TestConcurrentLeasesNeverExceedTheLimit(t *testing.T) {
	for _, events := range []int64{10, 1000} {
		z := Zone{Name: "z", Events: events, Window: time.Minute}
		s := &countingStore{Store: newMemory(t)}
		ls := leasingLimiters(t, z, 16, 2)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for range 4 * events / 16 {
					d, err := decide(context.Background(), ls[g%2], s, "k", base)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := allowed.Load(); got != events {
			t.Fatalf("events %d: %d of %d concurrent requests allowed, want %d", events, got, 4*events, events)
		}
	}
}

// A sliding window's leases never let more than events through in any
// window-long span, across instances.
func TestSlidingLeasesNeverExceedEventsInAnySpan(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(0); seed < 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		z := Zone{Name: "z", Events: int64(r.IntN(500) + 50), Window: time.Second, Sliding: true}
		s := &countingStore{Store: newMemory(t)}
		ls := leasingLimiters(t, z, 8, 2)
		var passed []time.Time
		for _, at := range randomTimes(r, 4000, 5*time.Second) {
			d, err := decide(ctx, ls[r.IntN(2)], s, "k", at)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				passed = append(passed, at)
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
			t.Fatalf("seed %d: only %d requests passed, limit %d", seed, len(passed), z.Events)
		}
	}
}

// What a sliding lease leaves unspent at its slot's end goes back: a key
// that made one request in each of ten slots, each taking a lease of a
// sixteenth of the limit, still has all but those ten requests.
func TestSlidingLeasesGiveBackWhatIsUnspent(t *testing.T) {
	ctx := context.Background()
	z := Zone{Name: "z", Events: 1000, Window: time.Second, Sliding: true}
	s := &countingStore{Store: newMemory(t)}
	l := leasingLimiters(t, z, 16, 1)[0]
	slot := z.Window / SlidingSlots
	for i := range SlidingSlots {
		if d, err := decide(ctx, l, s, "k", base.Add(time.Duration(i)*slot)); err != nil || !d.Allowed {
			t.Fatalf("request in slot %d: %+v, %v", i, d, err)
		}
	}
	allowed := 0
	for range 2000 {
		d, err := decide(ctx, l, s, "k", base.Add(SlidingSlots*slot))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 990 {
		t.Fatalf("%d of 2000 requests allowed after ten slots of one request each, want 990", allowed)
	}
}

// A lease the store granted is spent while the store fails, and requests
// that wait for a lease get the error of the one taking it, for their
// on_store_error to decide.
func TestLeaseOutlivesAStoreThatFails(t *testing.T) {
	ctx := context.Background()
	z := Zone{Name: "z", Events: 1600, Window: time.Minute}
	s := &failingStore{Store: newMemory(t)}
	l := leasingLimiters(t, z, 16, 1)[0]
	for i := range 100 {
		if d, err := decide(ctx, l, s, "k", base); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		s.failing.Store(true) // after the first request took its lease of 100
	}
	if _, err := decide(ctx, l, s, "k", base); !errors.Is(err, errStoreDown) {
		t.Fatalf("the 101st request, beyond the lease of 100: %v, want the store's error", err)
	}
	s.failing.Store(false)
	d, err := decide(ctx, l, s, "k", base)
	if err != nil || !d.Allowed || d.Remaining != 1600-101 {
		t.Fatalf("once the store is back: %+v, %v; want allowed with %d remaining", d, err, 1600-101)
	}
}

var errStoreDown = errors.New("the store is down")

// failingStore fails every increment while failing is set, and panics
// while panicking is.
type failingStore struct {
	store.Store
	failing, panicking atomic.Bool
}

func (f *failingStore) IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	if f.panicking.Load() {
		panic("the store panicked")
	}
	if f.failing.Load() {
		return 0, errStoreDown
	}
	return f.Store.IncrementAndCount(ctx, key, amount, lifetime, others, counts)
}

// A request whose taking of a lease panics (its store's call) leaves the
// key as it was: its next request takes a lease, rather than waiting for
// one that never comes.
func TestLeaseTakingThatPanicsLeavesTheKeyFree(t *testing.T) {
	z := Zone{Name: "z", Events: 1600, Window: time.Minute}
	s := &failingStore{Store: newMemory(t)}
	l := leasingLimiters(t, z, 16, 1)[0]
	s.panicking.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the store's panic did not reach the caller")
			}
		}()
		_, _ = decide(context.Background(), l, s, "k", base)
	}()
	s.panicking.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if d, err := decide(ctx, l, s, "k", base); err != nil || !d.Allowed {
		t.Fatalf("the request after the panic: %+v, %v", d, err)
	}
}

// Leases are held for at most MaxKeys keys: beyond, a key is counted one
// request at a time, and still exactly.
func TestLeasesAreBoundedInKeys(t *testing.T) {
	ctx := context.Background()
	z := Zone{Name: "z", Events: 100, Window: time.Minute}
	s := &countingStore{Store: newMemory(t)}
	l, err := NewLimiter(z, 1000, Leasing{Parts: 16, MaxKeys: 32})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 1000 {
		allowed := 0
		for range 120 {
			d, err := decide(ctx, l, s, itoa(int64(k)), base)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 100 {
			t.Fatalf("key %d: %d of 120 allowed, want 100", k, allowed)
		}
	}
	held := 0
	for i := range l.leases.shards {
		held += len(l.leases.shards[i].m)
	}
	if held > 32+leaseShards {
		t.Fatalf("%d keys hold leases, bound 32 (+%d of the shards' rounding)", held, leaseShards)
	}
}

func TestLeasingValidate(t *testing.T) {
	for _, l := range []Leasing{{Parts: 1, MaxKeys: 10}, {Parts: -1, MaxKeys: 10}, {Parts: 16}} {
		if _, err := NewLimiter(Zone{Name: "z", Events: 10, Window: time.Second}, 10, l); err == nil {
			t.Errorf("leasing %+v was accepted", l)
		}
	}
}

// The hot path: a request of a busy key under a limit far above the load,
// decided out of its lease, against one counted in the store (the memory
// store, taken as shared) per request.
func BenchmarkLeasedDecision(b *testing.B) {
	z := Zone{Name: "z", Events: 1 << 60, Window: time.Minute}
	for _, c := range []struct {
		name  string
		parts int64
	}{{"leased", 16}, {"counted", 0}} {
		b.Run(c.name, func(b *testing.B) {
			s := &countingStore{Store: newMemory(b)}
			l, err := NewLimiter(z, 1000, Leasing{Parts: c.parts, MaxKeys: 1000})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := decide(ctx, l, s, "203.0.113.7", base); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
			})
			b.ReportMetric(float64(s.calls.Load())/float64(b.N), "store-calls/op")
		})
	}
}
