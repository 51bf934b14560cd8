package inflight

import (
	"net/netip"
	"sync"
	"testing"
)

var (
	alice = netip.MustParseAddr("192.0.2.1")
	bob   = netip.MustParseAddr("2001:db8::2")
)

func TestEnterCountsThisOneAndEndGivesItBack(t *testing.T) {
	tb := New(10)
	n1, end1 := tb.Enter(alice)
	n2, end2 := tb.Enter(alice)
	nb, endb := tb.Enter(bob)
	if n1 != 1 || n2 != 2 || nb != 1 {
		t.Fatalf("counts %d, %d, bob %d; want 1, 2, 1", n1, n2, nb)
	}
	end1()
	end1() // a second end does nothing
	if got := tb.Count(alice); got != 1 {
		t.Fatalf("alice has %d after one end (called twice), want 1", got)
	}
	end2()
	endb()
	if tb.Count(alice) != 0 || tb.Len() != 0 {
		t.Fatalf("after every end: alice %d, %d entries; want 0, 0", tb.Count(alice), tb.Len())
	}
}

func TestAMappedAddressIsItsIPv4One(t *testing.T) {
	tb := New(10)
	_, end := tb.Enter(netip.MustParseAddr("::ffff:192.0.2.1"))
	defer end()
	if n, end := tb.Enter(alice); n != 2 {
		t.Fatalf("192.0.2.1 after ::ffff:192.0.2.1: %d, want 2", n)
	} else {
		end()
	}
}

func TestAFullTableCountsNoNewAddress(t *testing.T) {
	tb := New(1)
	_, endAlice := tb.Enter(alice)
	n, endBob := tb.Enter(bob)
	if n != 0 || tb.Count(bob) != 0 || tb.Len() != 1 {
		t.Fatalf("bob in a full table: count %d, Count %d, %d entries; want 0, 0, 1", n, tb.Count(bob), tb.Len())
	}
	endBob() // does nothing: bob was not counted
	if n, end := tb.Enter(alice); n != 2 {
		t.Fatalf("alice, already in the full table: %d, want 2", n)
	} else {
		end()
	}
	endAlice()
	if n, end := tb.Enter(bob); n != 1 {
		t.Fatalf("bob once alice left: %d, want 1", n)
	} else {
		end()
	}
}

func TestConcurrentEntersAndEndsBalance(t *testing.T) {
	tb := New(4)
	addrs := []netip.Addr{alice, bob, netip.MustParseAddr("192.0.2.3")}
	const each = 200
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := addrs[i%len(addrs)]
			for range each {
				n, end := tb.Enter(a)
				if n < 1 || n > 8 {
					t.Errorf("%v: count %d, want 1 to 8", a, n)
				}
				end()
			}
		}()
	}
	wg.Wait()
	if tb.Len() != 0 {
		t.Fatalf("%d entries left, want 0", tb.Len())
	}
}

func TestNewRefusesASizeBelowOne(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(0) did not panic")
		}
	}()
	New(0)
}
