package ratelimit

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

const overLimitShards = 16

// overLimit remembers keys over the limit until they may pass again, so a
// flood from one key is answered here and never reaches the store. It holds
// at most max keys: when full, expired keys are swept and, if there is still
// no room, the key is not remembered (the store keeps deciding for it).
type overLimit struct {
	seed   maphash.Seed
	max    int // per shard
	shards [overLimitShards]struct {
		mu sync.RWMutex
		m  map[string]int64 // key → Unix nanoseconds it may pass again
	}
}

func (o *overLimit) init(max int) {
	o.seed = maphash.MakeSeed()
	o.max = max/overLimitShards + 1
	for i := range o.shards {
		o.shards[i].m = make(map[string]int64)
	}
}

func (o *overLimit) until(key string, now time.Time) (time.Time, bool) {
	sh := &o.shards[maphash.String(o.seed, key)%overLimitShards]
	sh.mu.RLock()
	until, ok := sh.m[key]
	sh.mu.RUnlock()
	if !ok || until <= now.UnixNano() {
		return time.Time{}, false
	}
	return time.Unix(0, until), true
}

func (o *overLimit) add(key string, until, now time.Time) {
	sh := &o.shards[maphash.String(o.seed, key)%overLimitShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= o.max {
		for k, u := range sh.m {
			if u <= now.UnixNano() {
				delete(sh.m, k)
			}
		}
		if len(sh.m) >= o.max {
			return
		}
	}
	sh.m[strings.Clone(key)] = until.UnixNano()
}
