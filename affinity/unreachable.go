package affinity

import (
	"context"
	"sync"
	"sync/atomic"
)

// Unreachable is the set of servers that a creation could not connect to.
// A creation whose connection could not be made sent nothing, so it can go
// to its key's next server at once; the server stays out of creation
// hashing until it accepts connections again, which Recheck finds out.
// Every proxy sees the same failed connections, so retried creations still
// agree across proxies. Its size is bounded by the servers marked, which
// come from the proxy's configured pool.
type Unreachable struct {
	mu  sync.Mutex
	set atomic.Pointer[map[string]struct{}] // copied on write: read on every creation, written rarely
}

// Has reports whether server is out of creation hashing. It does not lock
// or allocate.
func (u *Unreachable) Has(server string) bool {
	set := u.set.Load()
	if set == nil {
		return false
	}
	_, ok := (*set)[server]
	return ok
}

// Len returns how many servers are out.
func (u *Unreachable) Len() int {
	if set := u.set.Load(); set != nil {
		return len(*set)
	}
	return 0
}

// Mark takes server out of creation hashing, and reports whether it was in.
func (u *Unreachable) Mark(server string) bool {
	return u.update(func(set map[string]struct{}) bool {
		if _, ok := set[server]; ok {
			return false
		}
		set[server] = struct{}{}
		return true
	})
}

// Recheck connects to every server that is out, one after the other, and
// puts back those that accept. It returns the servers put back.
func (u *Unreachable) Recheck(ctx context.Context, connect func(ctx context.Context, server string) error) (back []string) {
	set := u.set.Load()
	if set == nil {
		return nil
	}
	for server := range *set {
		if ctx.Err() == nil && connect(ctx, server) == nil {
			back = append(back, server)
		}
	}
	if len(back) > 0 {
		u.update(func(set map[string]struct{}) bool {
			for _, s := range back {
				delete(set, s)
			}
			return true
		})
	}
	return back
}

// update applies change to a copy of the set and stores the copy if change
// reports a change.
func (u *Unreachable) update(change func(map[string]struct{}) bool) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	next := map[string]struct{}{}
	if set := u.set.Load(); set != nil {
		for s := range *set {
			next[s] = struct{}{}
		}
	}
	if !change(next) {
		return false
	}
	u.set.Store(&next)
	return true
}
