package affinity

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/caddy-ha/caddy-ha/store"
)

func BenchmarkPatternID(b *testing.B) {
	p := mustCompile(b, "/api/uploads/{id}")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.ID("/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB/chunks/17"); !ok {
			b.Fatal("no id")
		}
	}
}

func BenchmarkRendezvous(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Rendezvous("01HZX3K9Q7M2V8W4T6R5Y1N0PB", threeServers)
	}
}

func BenchmarkOwnerMemory(b *testing.B) {
	const n = 100_000
	s := store.NewMemory(2*n, time.Hour)
	defer s.Close()
	bindings := &Bindings{Store: s, Prefix: "ua:", TTL: time.Hour}
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		var buf [26]byte
		ids[i] = string(uploadID(&buf, i))
		if err := bindings.Bind(ctx, ids[i], serverA); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, found, err := bindings.Owner(ctx, ids[i%n]); !found || err != nil {
			b.Fatal(found, err)
		}
		i++
	}
}

// TestMemoryPerBinding measures what a binding costs in the memory store:
// a million 26-character ids bound to one server, heap after a GC before and
// after. The goal is at most 200 bytes a binding. It is skipped by -short.
// The figure is the same alone, among the package's tests and under -race
// (151.7 bytes): the map grows the same way every time, and 48 bytes a
// binding over it would be 48 MB that nothing else here allocates.
func TestMemoryPerBinding(t *testing.T) {
	if testing.Short() {
		t.Skip("binds a million uploads")
	}
	const (
		n    = 1_000_000
		goal = 200.0
	)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	s := store.NewMemory(2_000_000, time.Hour)
	defer s.Close()
	bindings := &Bindings{Store: s, Prefix: "ua:", TTL: time.Hour}
	// Bound from every CPU, to keep the run short under -race.
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var buf [26]byte // the ids are not kept: only what the store holds counts
			for i := w; i < n; i += workers {
				if err := bindings.Bind(ctx, uploadID(&buf, i), serverA); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		t.Fatalf("the store holds %d keys, want %d", s.Len(), n)
	}
	perBinding := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	runtime.KeepAlive(s)

	// Where it goes: the key copy ("ua:" + 26 bytes, a 32-byte size class)
	// and the entry (a 63-byte struct, a 64-byte size class) are fixed; the
	// rest is the map's slots (a 16-byte key header and an 8-byte pointer
	// each, plus a control byte) at its load factor. The server string is
	// shared by every binding.
	const key, entry = 32, 64
	t.Logf("%.1f bytes per binding (%d bindings): key copy %d, entry %d, map slots and load factor %.1f",
		perBinding, n, key, entry, perBinding-key-entry)
	if perBinding > goal {
		t.Fatalf("%.1f bytes per binding, over the goal of %.0f", perBinding, goal)
	}
}

// uploadID writes into buf the 26-character id of upload i, in lowercase
// base32 like the fake cluster's upload ids, and returns it as a string over
// buf: valid until buf is rewritten, which is all a Bind needs (the store
// copies keys).
func uploadID(buf *[26]byte, i int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	hi, lo := fmix64(uint64(i)+1), uint64(i)
	for j := range 13 {
		buf[j] = alphabet[hi>>(5*j)&31]
		buf[13+j] = alphabet[lo>>(5*j)&31]
	}
	return unsafe.String(&buf[0], len(buf))
}
