// Package ratelimit counts requests per key in fixed windows aligned to the
// clock, or in sliding windows, in a short-lived store shared by every
// instance: the window's start is part of the key, so instances and the
// cluster's app that share the store agree on each window without talking.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/caddy-ha/caddy-ha/store"
)

// SlidingSlots is how many slots a sliding window is counted in. A request
// is allowed when the requests of its window, counted slot by slot with the
// oldest (partly outside) slot in whole, stay within the limit: never more
// than Events in any window-long span, at the cost of requests in the
// oldest slot counting up to a slot longer.
const SlidingSlots = 10

// MaxKeyBytes is the longest client key used as is; longer keys are
// replaced by their SHA-256, so a huge header cannot make a huge store key.
const MaxKeyBytes = 256

// Zone is one limit: Events requests per Window for each key.
type Zone struct {
	Name    string
	Events  int64
	Window  time.Duration
	Sliding bool
}

// Validate reports what is wrong with the zone, if anything.
func (z Zone) Validate() error {
	switch {
	case z.Name == "":
		return errors.New("a zone needs a name")
	case !validName(z.Name):
		return fmt.Errorf("zone name %q: use letters, digits, '_' and '-' only", z.Name)
	case z.Events <= 0:
		return fmt.Errorf("zone %s: events must be positive", z.Name)
	case z.Window < time.Millisecond:
		return fmt.Errorf("zone %s: window must be at least 1ms", z.Name)
	case z.Sliding && z.Window%(SlidingSlots*time.Millisecond) != 0:
		return fmt.Errorf("zone %s: a sliding window must be a multiple of %dms", z.Name, SlidingSlots)
	}
	return nil
}

func validName(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Decision is a zone's answer for one request.
type Decision struct {
	Allowed bool
	// Remaining is how many more requests the key may make now.
	Remaining int64
	// Reset is how long until the key has its whole quota back (fixed) or
	// until its oldest counted requests stop counting (sliding).
	Reset time.Duration
	// RetryAfter, when not allowed, is how long until a request can pass.
	RetryAfter time.Duration
	// Cached is set when the decision came from the local memory of keys
	// over the limit, without asking the store.
	Cached bool
	// Leased is set when the request was allowed out of a lease this
	// limiter holds (see Leasing), without asking the store.
	Leased bool
}

// Limiter decides for one zone.
type Limiter struct {
	zone    Zone
	slot    time.Duration // the window, or a tenth of it when sliding
	slots   int           // slots a decision reads besides the current one
	over    overLimit
	leases  *leaseTable // nil: every request is counted in the store
	buffers sync.Pool
}

// NewLimiter returns a limiter for z, remembering at most maxOver keys over
// the limit (see overLimit), leasing as leasing says.
func NewLimiter(z Zone, maxOver int, leasing Leasing) (*Limiter, error) {
	if err := z.Validate(); err != nil {
		return nil, err
	}
	if err := leasing.Validate(); err != nil {
		return nil, fmt.Errorf("zone %s: %v", z.Name, err)
	}
	l := &Limiter{zone: z, slot: z.Window}
	if z.Sliding {
		l.slot, l.slots = z.Window/SlidingSlots, SlidingSlots
	}
	l.over.init(maxOver)
	if leasing.Parts > 0 {
		l.leases = newLeaseTable(leasing)
	}
	l.buffers.New = func() any { return newScratch(l.slots) }
	return l, nil
}

// Zone returns the limiter's zone.
func (l *Limiter) Zone() Zone { return l.zone }

// clockSkew is added to every counter's lifetime, so an instance whose clock
// is a little behind still finds the counter of the window it is in.
const clockSkew = 2 * time.Second

// scratch holds the keys of one decision, reused across requests.
type scratch struct {
	buf    []byte
	others []string
	counts []int64
}

func newScratch(slots int) *scratch {
	return &scratch{buf: make([]byte, 0, 64*(slots+1)), others: make([]string, slots), counts: make([]int64, slots)}
}

// Count counts one request of key at now in s and returns the decision;
// a refusal is remembered (see Remembered). An error means the store did
// not answer: nothing was decided. A caller asks Remembered first, for
// every zone a request counts in, so that a key remembered over the limit
// anywhere never reaches the store. A limiter that leases (see Leasing)
// spends a lease it holds for the key, or takes one, unless s is local
// (store.IsLocal), where every count is as cheap as a lease.
func (l *Limiter) Count(ctx context.Context, s store.Store, key string, now time.Time) (Decision, error) {
	key = BoundedKey(key)
	if l.leases != nil && !store.IsLocal(s) {
		return l.leases.spend(ctx, l, s, key, now)
	}
	d, _, err := l.take(ctx, s, key, now, 1)
	return d, err
}

// Leased spends one of a lease held here for key at now, if there is one
// with some left: the request's decision, allowed without the store (so a
// caller needs no deadline for it). Count does the same first.
func (l *Limiter) Leased(key string, now time.Time) (Decision, bool) {
	if l.leases == nil {
		return Decision{}, false
	}
	return l.leases.held(l, BoundedKey(key), now)
}

// take counts amount requests of key at now in s in one call and returns
// how many of them the limit grants (a part of amount when the limit is
// reached on the way, none over it) and the decision for the request
// that asked, which spends one of them. The store's count keeps what was
// not granted in a fixed window (the window is full, whatever it holds);
// a sliding window's count gives it back at once.
func (l *Limiter) take(ctx context.Context, s store.Store, key string, now time.Time, amount int64) (_ Decision, granted int64, _ error) {
	sc := l.buffers.Get().(*scratch)
	defer l.buffers.Put(sc)
	nowNs := now.UnixNano()
	cur := floorDiv(nowNs, int64(l.slot))

	current := l.keys(sc, key, cur)
	lifetime := l.lifetime(cur, nowNs)
	n, err := s.IncrementAndCount(ctx, current, amount, lifetime, sc.others, sc.counts)
	if err != nil {
		return Decision{}, 0, err
	}
	before := n - amount // the count of the requests before these
	for _, c := range sc.counts {
		before += c
	}
	granted = min(max(l.zone.Events-before, 0), amount)
	if granted < amount && l.slots > 0 {
		// A sliding count must hold only allowed requests, or a client
		// that keeps knocking would never get back in. A failed undo
		// leaves the count high: stricter, never looser.
		_, _ = s.Increment(ctx, current, granted-amount, lifetime)
		n -= amount - granted
	}
	if granted > 0 {
		d := Decision{Allowed: true, Remaining: l.zone.Events - before - 1}
		d.Reset = l.freeAfter(sc.counts, n, 0, cur, nowNs)
		return d, granted, nil
	}
	wait := l.freeAfter(sc.counts, n, before+1-l.zone.Events, cur, nowNs)
	l.over.add(key, now.Add(wait), now)
	return Decision{Reset: wait, RetryAfter: wait}, 0, nil
}

// lifetime is how long the counter of slot cur is to live from nowNs:
// until its slot has left every window that reads it.
func (l *Limiter) lifetime(cur, nowNs int64) time.Duration {
	slotEnd := (cur + 1) * int64(l.slot)
	return time.Duration(slotEnd-nowNs) + time.Duration(l.slots)*l.slot + clockSkew
}

// Remembered returns the refusal of a key known here to be over the limit,
// decided without the store, and whether the key is one.
func (l *Limiter) Remembered(key string, now time.Time) (Decision, bool) {
	until, ok := l.over.until(BoundedKey(key), now)
	if !ok {
		return Decision{}, false
	}
	wait := until.Sub(now)
	return Decision{Reset: wait, RetryAfter: wait, Cached: true}, true
}

// freeAfter returns how long until need requests of the key stop counting
// (at least the oldest counted one when need is 0): slot cur-k stops
// counting when the slot cur-k+slots+1 begins.
func (l *Limiter) freeAfter(older []int64, current, need int64, cur, nowNs int64) time.Duration {
	slotNs := int64(l.slot)
	freed := int64(0)
	for i := 0; i <= l.slots; i++ {
		c := current
		if i < l.slots {
			c = older[i]
		}
		freed += c
		if c > 0 && freed >= need {
			idx := cur - int64(l.slots-i)
			return time.Duration((idx+int64(l.slots)+1)*slotNs - nowNs)
		}
	}
	return time.Duration((cur+1)*slotNs - nowNs)
}

// keys writes the keys of the slots a decision reads into sc, the previous
// ones into sc.others (oldest first), and returns the current one. They are
// rl:{zone:key}:slot; the braces keep a key's slots together on Redis
// Cluster (one hash slot) and in one memory shard. The strings view sc.buf:
// valid until sc is reused.
func (l *Limiter) keys(sc *scratch, key string, cur int64) string {
	b := append(sc.buf[:0], "rl:{"...)
	b = append(b, l.zone.Name...)
	b = append(b, ':')
	b = append(b, key...) // bounded by the caller
	b = append(b, "}:"...)
	stem := len(b)
	var bounds [SlidingSlots + 2]int
	for i := 0; i <= l.slots; i++ {
		bounds[i] = len(b)
		b = append(b, b[:stem]...)
		b = strconv.AppendInt(b, cur-int64(l.slots-i), 10)
	}
	bounds[l.slots+1] = len(b)
	sc.buf = b
	for i := 0; i < l.slots; i++ {
		sc.others[i] = unsafe.String(&b[bounds[i]], bounds[i+1]-bounds[i])
	}
	return unsafe.String(&b[bounds[l.slots]], bounds[l.slots+1]-bounds[l.slots])
}

// BoundedKey is key as the limiter counts and remembers it: a key longer
// than MaxKeyBytes by its SHA-256, so neither the store's keys nor the
// memory of keys over the limit grow with it. It is its own fixed point,
// so a caller that bounds a key once saves the hashing of every later call.
func BoundedKey(key string) string {
	if len(key) <= MaxKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "#" + hex.EncodeToString(sum[:])
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// WindowStart returns the start of the fixed window that holds t: t
// truncated to the window, counted from the Unix epoch, the same on every
// instance.
func WindowStart(t time.Time, window time.Duration) time.Time {
	return time.Unix(0, floorDiv(t.UnixNano(), int64(window))*int64(window))
}
