package store

import (
	"context"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// Defaults of the memory store: its size, and how often expired keys are
// swept.
const (
	DefaultMaxKeys = 1_000_000
	DefaultSweep   = 10 * time.Second
)

const memoryShards = 64

// Memory is the embedded store: everything in this process, in two
// budgets of MaxKeys keys each, so that neither kind can take the other's
// room: counters (keys created by Increment) and values (keys created by
// TryAdd, such as upload bindings).
//
// When the counters are full, a new counter takes the place of the counter
// with the smallest count (the least recently counted among equals), in
// Space-Saving's way but counting from 0, as HAProxy's stick table always
// counts a new key: a flood of keys counted once evicts only keys counted
// once, a key counted more often than the smallest count is kept, and an
// evicted key, counted again, has lost at most that smallest count. Every
// counter can be evicted, one at its limit too: a full store of counters
// at their limit is no reason to let a new key through uncounted (a
// limiter remembers the keys it refused, see ratelimit). So a new counter
// is refused (ErrFull) only when evictions racing with it took every
// counter it found; values are never evicted before they expire, and a
// new value in a full store fails with ErrFull (the store is degraded,
// see Fullness) and wakes the sweeper, so room made by expired keys is
// found within moments (at most one full sweep per 100ms). Keys already
// present keep working.
type Memory struct {
	maxKeys   int64
	counters  atomic.Int64 // keys in the counters' budget
	values    atomic.Int64 // keys in the values' budget
	evictions atomic.Uint64
	refusals  atomic.Uint64
	refusedAt atomic.Int64 // when a new key was last refused, since epoch; 0 never
	seed      maphash.Seed
	epoch     time.Time // expiries are monotonic nanoseconds since epoch
	shards    [memoryShards]memoryShard
	wake      chan struct{} // a full store asks for a sweep
	stop      chan struct{}
	done      chan struct{}
	closed    sync.Once
}

type memoryShard struct {
	mu sync.Mutex
	// Entries are pointers and updated in place: assigning to a present key
	// would store the caller's key string, whose memory it may reuse.
	m map[string]*memoryEntry
	// evictable is a min-heap of the shard's counters that may be evicted,
	// by count, then by when last counted.
	evictable []*memoryEntry
	// minCount and minCounted publish the heap's top to other shards'
	// evictions, which read them without this shard's lock; math.MaxInt64
	// while the heap is empty.
	minCount, minCounted atomic.Int64
	_                    [8]byte // keeps shards on separate cache lines
}

// memoryEntry holds a value or, when isCount, a counter kept as a number
// and formatted only when read with Get.
type memoryEntry struct {
	key     string // the map's own copy, for eviction
	value   string
	count   int64
	expires int64
	counted int64 // when last incremented
	heapAt  int32 // index in its shard's heap, -1 if none; 32 bits keep the entry in 64 bytes
	isCount bool
	counter bool // in the counters' budget (created by Increment)
}

// NewMemory returns a memory store holding at most maxKeys counters and
// maxKeys values (DefaultMaxKeys when 0), sweeping expired keys every
// sweep (10s when 0) until Close.
func NewMemory(maxKeys int, sweep time.Duration) *Memory {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	if sweep <= 0 {
		sweep = DefaultSweep
	}
	s := &Memory{maxKeys: int64(maxKeys), seed: maphash.MakeSeed(), epoch: time.Now(),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*memoryEntry)
		s.shards[i].publish()
	}
	go func() {
		defer close(s.done)
		recovered.Loop(reporter("the memory store's sweeper"), sweep, s.stop, func() { s.sweepEvery(sweep) })
	}()
	return s
}

var (
	_ Bounded = (*Memory)(nil)
)

// Local marks the memory store as answering without I/O.
func (s *Memory) Local() bool { return true }

func (s *Memory) now() int64 { return int64(time.Since(s.epoch)) }

func (s *Memory) shard(key string) *memoryShard {
	return &s.shards[maphash.String(s.seed, hashTag(key))%memoryShards]
}

// Len returns the number of keys held, expired ones not yet swept included.
func (s *Memory) Len() int { return int(s.counters.Load() + s.values.Load()) }

// DegradedFor is how long a store that refused a new key for lack of room
// is reported degraded: a sweep (every 10s, at once when full) may have
// made room since.
const DegradedFor = 10 * time.Second

// Fullness is how a bounded store copes with its bound.
type Fullness struct {
	// Evictions counts the counters evicted to make room for new ones.
	Evictions uint64
	// Refusals counts the new keys refused with ErrFull.
	Refusals uint64
	// Degraded is set while the store has refused a new key within the
	// last DegradedFor.
	Degraded bool
}

// Fullness reports how the store copes with its bound.
func (s *Memory) Fullness() Fullness {
	at := s.refusedAt.Load()
	return Fullness{Evictions: s.evictions.Load(), Refusals: s.refusals.Load(),
		Degraded: at != 0 && s.now()-at < int64(DegradedFor)}
}

// live returns key's entry if it has one that has not expired.
func (sh *memoryShard) live(key string, now int64) (*memoryEntry, bool) {
	e, ok := sh.m[key]
	if !ok || e.expires <= now {
		return nil, false
	}
	return e, true
}

// reserve takes a place in the budget of a new key of sh, a counter's or
// a value's, making room or failing with ErrFull; the caller holds sh.mu
// and places the key after. Evicting a counter of another shard lets go of
// sh.mu meanwhile (no shard waits for another while holding its own
// lock), so the caller of a counter's looks the key up again. The place is
// taken first, then made: of several keys inserted at once, each one over
// the bound makes room for itself.
func (s *Memory) reserve(sh *memoryShard, counter bool, now int64) error {
	budget := &s.values
	if counter {
		budget = &s.counters
	}
	if budget.Add(1) <= s.maxKeys {
		return nil
	}
	if counter {
		for range maxEvictions {
			if s.evict(sh) {
				return nil
			}
		}
	} else if s.sweepShard(sh, now); budget.Load() <= s.maxKeys {
		return nil
	}
	budget.Add(-1)
	s.refuse(now)
	return ErrFull
}

// place stores a new key in the place reserved for it, instead of an
// expired entry added while reserve let go of sh.mu, if any; the caller
// holds sh.mu. The key is copied: the caller's memory may be reused.
func (s *Memory) place(sh *memoryShard, key string, e memoryEntry) *memoryEntry {
	s.delete(sh, key)
	p := &e
	p.key, p.heapAt = strings.Clone(key), -1
	sh.m[p.key] = p
	if p.counter {
		sh.push(p)
	}
	return p
}

// maxEvictions bounds a new counter's tries to evict one (another may take
// the one it found first).
const maxEvictions = 8

// refuse records a new key refused for lack of room and wakes the sweeper.
func (s *Memory) refuse(now int64) {
	s.refusals.Add(1)
	s.refusedAt.Store(max(now, 1))
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// evict removes the evictable counter with the smallest count in the
// store, the least recently counted among equals, to make room; the caller
// holds sh.mu. For another shard's counter it lets go of sh.mu while it
// holds that shard's lock, and evicts there only if that shard's smallest
// count has not grown meanwhile (other evictions may have taken its small
// counters, leaving a larger one on top). It reports whether a counter was
// evicted.
func (s *Memory) evict(sh *memoryShard) bool {
	best := sh
	count, counted := sh.minCount.Load(), sh.minCounted.Load()
	for i := range s.shards {
		o := &s.shards[i]
		if c, at := o.minCount.Load(), o.minCounted.Load(); c < count || c == count && at < counted {
			best, count, counted = o, c, at
		}
	}
	if best == sh {
		return s.evictTop(sh)
	}
	sh.mu.Unlock()
	best.mu.Lock()
	evicted := len(best.evictable) > 0 && best.evictable[0].count <= count && s.evictTop(best)
	best.mu.Unlock()
	sh.mu.Lock()
	return evicted
}

// evictTop evicts the top of sh's heap, if it has one; the caller holds
// sh.mu.
func (s *Memory) evictTop(sh *memoryShard) bool {
	if len(sh.evictable) == 0 {
		return false
	}
	s.delete(sh, sh.evictable[0].key)
	s.evictions.Add(1)
	return true
}

func (s *Memory) TryAdd(_ context.Context, key, value string, lifetime time.Duration) (bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return false, err
	}
	sh, now := s.shard(key), s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.live(key, now); ok {
		return false, nil
	}
	// An expired entry's place is the new one's; reserving a value's place
	// never lets go of sh.mu.
	s.delete(sh, key)
	if err := s.reserve(sh, false, now); err != nil {
		return false, err
	}
	s.place(sh, key, memoryEntry{value: value, expires: now + int64(lifetime)})
	return true, nil
}

func (s *Memory) Get(_ context.Context, key string) (string, bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	e, ok := sh.live(key, s.now())
	var v string
	if ok {
		v = e.text()
	}
	sh.mu.Unlock()
	return v, ok, nil
}

func (s *Memory) Take(_ context.Context, key string) (string, bool, error) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.live(key, s.now())
	if !ok {
		return "", false, nil
	}
	s.delete(sh, key)
	return e.text(), true, nil
}

func (s *Memory) Remove(_ context.Context, key string) error {
	sh := s.shard(key)
	sh.mu.Lock()
	s.delete(sh, key)
	sh.mu.Unlock()
	return nil
}

// GetAndTouch updates the live entry's expiry in place: the key string the
// map holds is the store's own copy, and the entry is never reallocated.
func (s *Memory) GetAndTouch(_ context.Context, key string, lifetime time.Duration) (string, bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return "", false, err
	}
	sh, now := s.shard(key), s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.live(key, now)
	if !ok {
		return "", false, nil
	}
	e.expires = now + int64(lifetime)
	return e.text(), true, nil
}

func (s *Memory) Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error) {
	return s.IncrementAndCount(ctx, key, amount, lifetime, nil, nil)
}

func (s *Memory) IncrementAndCount(_ context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	if err := checkLifetime(lifetime); err != nil {
		return 0, err
	}
	sh, now := s.shard(key), s.now()
	sh.mu.Lock()
	e, ok := sh.live(key, now)
	if !ok {
		s.delete(sh, key) // an expired entry, if any: its place is the new one's
		if err := s.reserve(sh, true, now); err != nil {
			sh.mu.Unlock()
			return 0, err
		}
		if e, ok = sh.live(key, now); ok { // added while reserve let go of sh.mu
			s.counters.Add(-1)
		} else {
			e = s.place(sh, key, memoryEntry{isCount: true, counter: true})
		}
	}
	if !e.isCount {
		n, err := parseCount(e.value)
		if err != nil {
			sh.mu.Unlock()
			return 0, ErrNotCounter
		}
		e.value, e.count, e.isCount = "", n, true
	}
	e.count += amount
	e.expires = now + int64(lifetime)
	e.counted = now
	count := e.count
	sh.fix(e)
	// The others usually share key's {hash tag}, so its shard: those are
	// read under the lock already held, the rest each under its own after.
	elsewhere := false
	for i, other := range others {
		if s.shard(other) == sh {
			counts[i] = sh.number(other, now)
		} else {
			elsewhere = true
		}
	}
	sh.publish()
	sh.mu.Unlock()
	if elsewhere {
		for i, other := range others {
			if o := s.shard(other); o != sh {
				o.mu.Lock()
				counts[i] = o.number(other, now)
				o.mu.Unlock()
			}
		}
	}
	return count, nil
}

// number is the count under key, 0 if it has none; the caller holds sh.mu.
func (sh *memoryShard) number(key string, now int64) int64 {
	if e, ok := sh.live(key, now); ok {
		return e.number()
	}
	return 0
}

func (s *Memory) Ping(context.Context) error { return nil }

// Close stops the sweeper.
func (s *Memory) Close() error {
	s.closed.Do(func() { close(s.stop); <-s.done })
	return nil
}

func (s *Memory) delete(sh *memoryShard, key string) {
	e, ok := sh.m[key]
	if !ok {
		return
	}
	delete(sh.m, key)
	s.budget(e).Add(-1)
	if e.heapAt >= 0 {
		sh.remove(e)
		sh.publish()
	}
}

// budget is the count of keys of e's kind.
func (s *Memory) budget(e *memoryEntry) *atomic.Int64 {
	if e.counter {
		return &s.counters
	}
	return &s.values
}

func (s *Memory) sweepEvery(every time.Duration) {
	const minGap = 100 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.wake:
			if time.Since(last) < minGap {
				continue
			}
		}
		last = time.Now()
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			s.sweepShard(sh, s.now())
			sh.mu.Unlock()
		}
	}
}

// sweepShard deletes the shard's expired keys; the caller holds its lock.
func (s *Memory) sweepShard(sh *memoryShard, now int64) {
	swept := false
	for k, e := range sh.m {
		if e.expires <= now {
			delete(sh.m, k)
			s.budget(e).Add(-1)
			e.heapAt, swept = -1, true
		}
	}
	if !swept {
		return
	}
	// The heap without the swept entries, rebuilt in one pass.
	kept := sh.evictable[:0]
	for _, e := range sh.evictable {
		if e.expires > now {
			e.heapAt = int32(len(kept))
			kept = append(kept, e)
		}
	}
	clear(sh.evictable[len(kept):])
	sh.evictable = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		sh.down(i)
	}
	sh.publish()
}

func (e *memoryEntry) text() string {
	if e.isCount {
		return strconv.FormatInt(e.count, 10)
	}
	return e.value
}

// number reads an entry as a count; a value that is not one counts as 0.
func (e *memoryEntry) number() int64 {
	if e.isCount {
		return e.count
	}
	n, _ := parseCount(e.value)
	return n
}

// The heap of evictable counters. The caller holds sh.mu.

func (sh *memoryShard) less(i, j int) bool {
	a, b := sh.evictable[i], sh.evictable[j]
	return a.count < b.count || a.count == b.count && a.counted < b.counted
}

func (sh *memoryShard) swap(i, j int) {
	h := sh.evictable
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = int32(i), int32(j)
}

func (sh *memoryShard) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !sh.less(i, parent) {
			return
		}
		sh.swap(i, parent)
		i = parent
	}
}

func (sh *memoryShard) down(i int) bool {
	start, n := i, len(sh.evictable)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && sh.less(right, child) {
			child = right
		}
		if !sh.less(child, i) {
			break
		}
		sh.swap(i, child)
		i = child
	}
	return i > start
}

func (sh *memoryShard) push(e *memoryEntry) {
	e.heapAt = int32(len(sh.evictable))
	sh.evictable = append(sh.evictable, e)
	sh.up(int(e.heapAt))
}

// fix restores the heap after e's count or time changed; e need not be in
// it.
func (sh *memoryShard) fix(e *memoryEntry) {
	if i := int(e.heapAt); i >= 0 && !sh.down(i) {
		sh.up(i)
	}
}

func (sh *memoryShard) remove(e *memoryEntry) {
	i, last := int(e.heapAt), len(sh.evictable)-1
	if i != last {
		sh.swap(i, last)
	}
	sh.evictable[last] = nil
	sh.evictable = sh.evictable[:last]
	e.heapAt = -1
	if i != last {
		sh.fix(sh.evictable[i])
	}
}

// publish makes the heap's top known to other shards' evictions.
func (sh *memoryShard) publish() {
	count, counted := int64(math.MaxInt64), int64(math.MaxInt64)
	if len(sh.evictable) > 0 {
		count, counted = sh.evictable[0].count, sh.evictable[0].counted
	}
	if sh.minCount.Load() != count {
		sh.minCount.Store(count)
	}
	if sh.minCounted.Load() != counted {
		sh.minCounted.Store(counted)
	}
}
