package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/caddy-ha/caddy-ha/store"
)

// Leasing is how a limiter leases quota from a shared store, so that a busy
// key costs a store call per lease rather than per request: a request of a
// key that this limiter holds no lease for takes one, a part of what is left
// of the key's limit in its window (its slot, when sliding), in one store
// call, which counts the whole part at once; the limiter then spends it here
// on the key's next requests of the same window, without asking the store.
//
// The store grants a lease only out of what is left, so the parts granted
// to every instance never add up to more than the limit. A part is at most
// 1/Parts of what was left when it was taken, and none is taken when that
// is less than 2: a small limit (Events < 2*Parts), and the last of any
// limit, are counted one request at a time, as without leasing. What a
// lease leaves unspent when its window ends goes back: a fixed window's
// count ends with the window; a sliding window's slot is counted down by
// the unspent part when the key's next request here takes a lease.
//
// The zero value leases none.
type Leasing struct {
	// Parts: a lease takes at most 1/Parts of what is left of a key's
	// limit. 0 leases none; else at least 2.
	Parts int64
	// MaxKeys bounds the keys holding a lease at once; a new key beyond it
	// is counted one request at a time. At least 1 when Parts is set.
	MaxKeys int
}

// Validate reports what is wrong with l, if anything.
func (l Leasing) Validate() error {
	switch {
	case l.Parts == 0:
		return nil
	case l.Parts < 2:
		return errors.New("lease parts must be at least 2 (0 leases none)")
	case l.MaxKeys < 1:
		return errors.New("leases need room for at least one key")
	}
	return nil
}

const leaseShards = 16

// maxLeaseWaits bounds how many leases a request waits for another request
// of its key to take before it counts itself in the store.
const maxLeaseWaits = 4

// leaseTable holds a limiter's leases, one per key at most.
type leaseTable struct {
	parts  int64
	max    int // per shard
	seed   maphash.Seed
	shards [leaseShards]leaseShard
}

type leaseShard struct {
	mu sync.Mutex
	m  map[string]*lease
}

// lease is what a limiter holds of a key's quota. Its fields are guarded
// by its shard's lock.
type lease struct {
	slot    int64 // the slot (window when fixed) it was taken in
	left    int64 // what is left of it to spend here
	free    int64 // what the store had left for others after it was taken
	resetAt int64 // Unix nanoseconds: the Reset of its decisions
	taking  *taking
}

// taking is a request of the key taking a new lease, which the key's other
// requests wait for: err, set before done closes, is why it failed.
type taking struct {
	done chan struct{}
	err  error
}

func newLeaseTable(l Leasing) *leaseTable {
	t := &leaseTable{parts: l.Parts, max: l.MaxKeys/leaseShards + 1, seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*lease)
	}
	return t
}

// spend decides a request of key at now: out of the key's lease if it
// holds one of the current slot; after waiting for another request of the
// key that is taking one; else by taking a new one, or, when what is left
// is too little to lease, by counting the request alone in s.
func (t *leaseTable) spend(ctx context.Context, l *Limiter, s store.Store, key string, now time.Time) (Decision, error) {
	nowNs := now.UnixNano()
	cur := floorDiv(nowNs, int64(l.slot))
	sh := t.shard(key)
	for range maxLeaseWaits {
		sh.mu.Lock()
		e := sh.m[key]
		switch {
		case e != nil && e.slot == cur && e.left > 0:
			d := e.spendOne(nowNs)
			sh.mu.Unlock()
			return d, nil
		case e != nil && e.taking != nil:
			tk := e.taking
			sh.mu.Unlock()
			select {
			case <-tk.done:
			case <-ctx.Done():
				return Decision{}, ctx.Err()
			}
			if errors.Is(tk.err, context.Canceled) {
				continue // its client left: another request takes the lease
			}
			if tk.err != nil {
				return Decision{}, tk.err
			}
			if d, ok := l.Remembered(key, now); ok {
				return d, nil // the lease taken found the limit reached
			}
			continue
		}
		amount := t.size(l, e, cur)
		if amount < 2 {
			sh.mu.Unlock()
			return t.countAlone(ctx, l, s, sh, key, now, cur)
		}
		if e == nil {
			if !t.room(sh, l, cur) {
				sh.mu.Unlock()
				d, _, err := l.take(ctx, s, key, now, 1)
				return d, err
			}
			e = &lease{}
			sh.m[strings.Clone(key)] = e
		}
		return t.renew(ctx, l, s, sh, e, key, now, cur, amount)
	}
	d, _, err := l.take(ctx, s, key, now, 1)
	return d, err
}

// renew takes a new lease of amount for key's entry e, giving back first
// what a sliding lease of a past slot left unspent; the caller holds the
// shard's lock, which renew lets go of. The key's other requests wait for
// it; a panic on the way (a store's) fails them and leaves e as it was,
// so that the key's next request takes a lease again.
func (t *leaseTable) renew(ctx context.Context, l *Limiter, s store.Store, sh *leaseShard, e *lease, key string, now time.Time, cur, amount int64) (d Decision, err error) {
	tk := &taking{done: make(chan struct{}), err: errLeasePanicked}
	e.taking = tk
	oldSlot, unspent := e.slot, e.left
	e.left = 0
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		e.taking = nil
		sh.mu.Unlock()
		close(tk.done)
	}()

	nowNs := now.UnixNano()
	if unspent > 0 && l.slots > 0 && cur-oldSlot <= int64(l.slots) {
		l.giveBack(ctx, s, key, oldSlot, unspent, nowNs)
	}
	d, granted, err := l.take(ctx, s, key, now, amount)
	sh.mu.Lock()
	if err == nil {
		e.slot, e.left, e.resetAt = cur, max(granted-1, 0), nowNs+int64(d.Reset)
		e.free = d.Remaining - e.left
	}
	sh.mu.Unlock()
	tk.err = err
	return d, err
}

// errLeasePanicked is what the requests waiting for a lease get when
// taking it panicked.
var errLeasePanicked = errors.New("ratelimit: taking a lease panicked")

// held spends one of key's lease of the slot at now, if there is one left.
func (t *leaseTable) held(l *Limiter, key string, now time.Time) (Decision, bool) {
	nowNs := now.UnixNano()
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil && e.slot == floorDiv(nowNs, int64(l.slot)) && e.left > 0 {
		return e.spendOne(nowNs), true
	}
	return Decision{}, false
}

// spendOne spends one of e, which has some left; the caller holds its
// shard's lock.
func (e *lease) spendOne(nowNs int64) Decision {
	e.left--
	return Decision{Allowed: true, Remaining: e.free + e.left, Reset: time.Duration(e.resetAt - nowNs), Leased: true}
}

func (t *leaseTable) shard(key string) *leaseShard {
	return &t.shards[maphash.String(t.seed, key)%leaseShards]
}

// size is how much a new lease of the key takes: 1/parts of what the store
// had left of its limit when last asked in this window, or of the whole
// limit when not asked yet; the caller holds the shard's lock.
func (t *leaseTable) size(l *Limiter, e *lease, cur int64) int64 {
	free := l.zone.Events
	switch {
	case e == nil:
	case e.slot == cur:
		free = e.free
	case l.slots > 0 && cur-e.slot <= int64(l.slots):
		// A sliding window still reads the slot of the last lease: what
		// was left then, plus what goes back of it.
		free = e.free + e.left
	}
	return free / t.parts
}

// countAlone counts one request in s, as without leasing, and keeps what
// the store has left of the key's limit for the size of the next lease.
func (t *leaseTable) countAlone(ctx context.Context, l *Limiter, s store.Store, sh *leaseShard, key string, now time.Time, cur int64) (Decision, error) {
	d, _, err := l.take(ctx, s, key, now, 1)
	if err != nil {
		return d, err
	}
	sh.mu.Lock()
	if e := sh.m[key]; e != nil && e.taking == nil && e.left == 0 {
		e.slot, e.free = cur, d.Remaining
	}
	sh.mu.Unlock()
	return d, nil
}

// room makes room for a new key's lease if there is none, dropping the
// leases of past slots; it reports whether there is. A dropped sliding
// lease's unspent part is not given back: stricter, never looser. The
// caller holds the shard's lock.
func (t *leaseTable) room(sh *leaseShard, l *Limiter, cur int64) bool {
	if len(sh.m) < t.max {
		return true
	}
	for k, e := range sh.m {
		if e.taking == nil && e.slot < cur {
			delete(sh.m, k)
		}
	}
	return len(sh.m) < t.max
}

// giveBack counts the unspent part of a lease of slot out of that slot's
// counter, which a sliding window still reads. A failure leaves the count
// high: stricter, never looser.
func (l *Limiter) giveBack(ctx context.Context, s store.Store, key string, slot, unspent, nowNs int64) {
	sc := l.buffers.Get().(*scratch)
	defer l.buffers.Put(sc)
	_, _ = s.Increment(ctx, l.keys(sc, key, slot), -unspent, l.lifetime(slot, nowNs))
}
