// Package poolcount publishes, by name, how many of a pool's servers are
// usable now (HAProxy's nbsrv of a backend): an upstream source that
// checks its servers publishes its count, a request matcher reads it.
//
// The registry is process-wide and safe for reloads: a configuration
// that replaces another publishes its name while the old one still runs,
// and is read from then on; each withdraws only its own entry, so that a
// new configuration that fails to start leaves the running one's.
package poolcount

import (
	"slices"
	"sync"
)

// Counter tells how many servers of a pool are usable; it must be cheap
// (a request's matcher calls it) and safe for concurrent use.
type Counter interface {
	Usable() int
}

// entry is one Publish, told apart from another of the same Counter.
type entry struct{ counter Counter }

var (
	mu        sync.Mutex
	published = map[string][]*entry{} // by name, oldest first
	newest    sync.Map                // name → Counter: published's last, read without the lock
)

// Publish makes c name's counter, in place of any earlier one until c is
// withdrawn: withdraw removes this entry only (the one published before
// it is read again if it is still published).
func Publish(name string, c Counter) (withdraw func()) {
	e := &entry{c}
	mu.Lock()
	defer mu.Unlock()
	published[name] = append(published[name], e)
	newest.Store(name, c)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		entries := slices.DeleteFunc(published[name], func(o *entry) bool { return o == e })
		if len(entries) == 0 {
			delete(published, name)
			newest.Delete(name)
			return
		}
		published[name] = entries
		newest.Store(name, entries[len(entries)-1].counter)
	}
}

// Usable is the count of name's newest counter, and whether any is
// published.
func Usable(name string) (int, bool) {
	c, ok := newest.Load(name)
	if !ok {
		return 0, false
	}
	return c.(Counter).Usable(), true
}
