// Package inflight counts, per client address, what each client has in
// progress at once: HAProxy's conn_cur, the streams (an HTTP request each)
// or connections that track a source in a stick table and have not ended.
//
// A Table holds an entry for an address only while its count is above
// zero, and at most Size entries: an address it has no room for is not
// counted, as HAProxy does not track a key its full table cannot take
// (its sc_conn_cur then has no entry, and a condition over it does not
// hold).
package inflight

import (
	"net/netip"
	"sync"
)

// Table counts what each address has in progress, for at most Size
// addresses at once.
type Table struct {
	size int

	mu     sync.Mutex
	counts map[netip.Addr]int
}

// New is a table of at most size addresses; size must be at least 1.
func New(size int) *Table {
	if size < 1 {
		panic("inflight: size must be at least 1")
	}
	return &Table{size: size, counts: make(map[netip.Addr]int)}
}

// Size is the most addresses the table counts at once.
func (t *Table) Size() int { return t.size }

// Enter counts one more in progress for addr (an IPv4-mapped IPv6
// address as its IPv4 one) and returns the count, this one included, and
// the function that ends it (once; later calls do nothing). An address
// the full table has no entry for is not counted: the count is 0 and end
// does nothing.
func (t *Table) Enter(addr netip.Addr) (count int, end func()) {
	addr = addr.Unmap()
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.counts[addr]
	if !ok && len(t.counts) >= t.size {
		return 0, func() {}
	}
	n++
	t.counts[addr] = n
	var once sync.Once
	return n, func() { once.Do(func() { t.leave(addr) }) }
}

// leave ends one in progress for addr; at zero its entry leaves the table.
func (t *Table) leave(addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.counts[addr] - 1; n > 0 {
		t.counts[addr] = n
	} else {
		delete(t.counts, addr)
	}
}

// Count is how many addr has in progress now.
func (t *Table) Count(addr netip.Addr) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[addr.Unmap()]
}

// Len is how many addresses have something in progress now.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.counts)
}
