package store

import (
	"context"
	"hash/maphash"
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

// Memory is the embedded store: everything in this process, at most
// MaxKeys keys. When it is full, adding a new key (TryAdd, or Increment of
// an absent key) first sweeps the expired keys of its shard and, if there is
// still no room, fails with ErrFull and wakes the sweeper, so room made by
// keys expired elsewhere is found within moments (at most one full sweep
// per 100ms). Keys already present keep working. Nothing is ever evicted
// before it expires.
type Memory struct {
	maxKeys int64
	keys    atomic.Int64
	seed    maphash.Seed
	epoch   time.Time // expiries are monotonic nanoseconds since epoch
	shards  [memoryShards]memoryShard
	wake    chan struct{} // a full store asks for a sweep
	stop    chan struct{}
	done    chan struct{}
	closed  sync.Once
}

type memoryShard struct {
	mu sync.Mutex
	// Entries are pointers and updated in place: assigning to a present key
	// would store the caller's key string, whose memory it may reuse.
	m map[string]*memoryEntry
	_ [40]byte // keeps shards on separate cache lines
}

// memoryEntry holds a value or, when isCount, a counter kept as a number
// and formatted only when read with Get.
type memoryEntry struct {
	value   string
	count   int64
	expires int64
	isCount bool
}

// NewMemory returns a memory store holding at most maxKeys keys
// (DefaultMaxKeys when 0), sweeping expired keys every sweep (10s when 0)
// until Close.
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
	}
	go func() {
		defer close(s.done)
		recovered.Loop(reporter("the memory store's sweeper"), sweep, s.stop, func() { s.sweepEvery(sweep) })
	}()
	return s
}

// Local marks the memory store as answering without I/O.
func (s *Memory) Local() bool { return true }

func (s *Memory) now() int64 { return int64(time.Since(s.epoch)) }

func (s *Memory) shard(key string) *memoryShard {
	return &s.shards[maphash.String(s.seed, hashTag(key))%memoryShards]
}

// Len returns the number of keys held, expired ones not yet swept included.
func (s *Memory) Len() int { return int(s.keys.Load()) }

// live returns key's entry if it has one that has not expired.
func (sh *memoryShard) live(key string, now int64) (*memoryEntry, bool) {
	e, ok := sh.m[key]
	if !ok || e.expires <= now {
		return nil, false
	}
	return e, true
}

// insert stores a new key, making room or failing with ErrFull. The key is
// copied: the caller's memory may be reused.
func (s *Memory) insert(sh *memoryShard, key string, e memoryEntry, now int64) error {
	if old, ok := sh.m[key]; ok { // an expired entry, replaced in place
		*old = e
		return nil
	}
	if s.keys.Load() >= s.maxKeys {
		s.sweepShard(sh, now)
		if s.keys.Load() >= s.maxKeys {
			select {
			case s.wake <- struct{}{}:
			default:
			}
			return ErrFull
		}
	}
	sh.m[strings.Clone(key)] = &e
	s.keys.Add(1)
	return nil
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
	if err := s.insert(sh, key, memoryEntry{value: value, expires: now + int64(lifetime)}, now); err != nil {
		return false, err
	}
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
	var count int64
	if e, ok := sh.live(key, now); ok {
		if !e.isCount {
			n, err := parseCount(e.value)
			if err != nil {
				sh.mu.Unlock()
				return 0, ErrNotCounter
			}
			*e = memoryEntry{count: n, isCount: true}
		}
		e.count += amount
		e.expires = now + int64(lifetime)
		count = e.count
	} else if err := s.insert(sh, key, memoryEntry{count: amount, isCount: true, expires: now + int64(lifetime)}, now); err != nil {
		sh.mu.Unlock()
		return 0, err
	} else {
		count = amount
	}
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
	if _, ok := sh.m[key]; ok {
		delete(sh.m, key)
		s.keys.Add(-1)
	}
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
	for k, e := range sh.m {
		if e.expires <= now {
			delete(sh.m, k)
			s.keys.Add(-1)
		}
	}
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
