package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/store"
)

func TestMemoryFullRefusesNewKeysOnly(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory(10, time.Hour)
	defer s.Close()
	for i := 0; i < 9; i++ {
		mustAdd(t, s, fmt.Sprint("k", i), "v", time.Minute)
	}
	if _, err := s.Increment(ctx, "short", 1, lifetime); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAdd(ctx, "new", "v", time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatalf("TryAdd into a full store: %v, want ErrFull", err)
	}
	if _, err := s.Increment(ctx, "new", 1, time.Minute); !errors.Is(err, store.ErrFull) {
		t.Fatalf("Increment of a new key in a full store: %v, want ErrFull", err)
	}
	if n, err := s.Increment(ctx, "short", 1, lifetime); n != 2 || err != nil {
		t.Fatalf("Increment of a present key in a full store = %d, %v", n, err)
	}
	wantValue(t, s, "k0", "v")
	// An expired key makes room, though the sweeper has not run.
	poll.Until(t, 5*lifetime, "the short-lived key to make room", func() bool {
		ok, err := s.TryAdd(ctx, "new", "v", time.Minute)
		return ok && err == nil
	})
	// Removing frees a place too.
	if err := s.Remove(ctx, "k0"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, "other", "v", time.Minute)
}

func TestMemorySweepsExpiredKeys(t *testing.T) {
	s := store.NewMemory(0, 10*time.Millisecond)
	defer s.Close()
	for i := 0; i < 100; i++ {
		mustAdd(t, s, fmt.Sprint("k", i), "v", 20*time.Millisecond)
	}
	mustAdd(t, s, "kept", "v", time.Minute)
	poll.Until(t, 2*time.Second, "the sweeper to delete the expired keys", func() bool { return s.Len() == 1 })
	wantValue(t, s, "kept", "v")
}

func BenchmarkMemoryIncrement(b *testing.B) {
	s := store.NewMemory(0, time.Hour)
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Increment(ctx, "rl:{zone:10.0.0.1}:123", 1, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}
