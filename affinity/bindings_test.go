package affinity

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// The same cases run on both stores: bindings mean the same in each.
func TestBindingsMemory(t *testing.T) {
	testBindings(t, func(t *testing.T) store.Store {
		s := store.NewMemory(0, 20*time.Millisecond)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestBindingsRedis(t *testing.T) {
	srv := redistest.Start(t)
	testBindings(t, func(t *testing.T) store.Store {
		s := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr}), "affinity:"+t.Name()+":")
		t.Cleanup(func() { s.Close() })
		return s
	})
}

const (
	serverA = "127.0.0.1:9101"
	serverB = "127.0.0.1:9102"
	ttl     = 300 * time.Millisecond
)

func testBindings(t *testing.T, newStore func(*testing.T) store.Store) {
	ctx := context.Background()
	newBindings := func(t *testing.T, ttl time.Duration) (*Bindings, store.Store) {
		s := newStore(t)
		return &Bindings{Store: s, Prefix: "ua:", TTL: ttl}, s
	}
	t.Run("BindThenOwner", func(t *testing.T) {
		b, s := newBindings(t, time.Minute)
		wantNoOwner(t, b, "up1")
		if err := b.Bind(ctx, "up1", serverA); err != nil {
			t.Fatal(err)
		}
		wantOwner(t, b, "up1", serverA)
		// The key is exactly prefix+id, the value exactly the server.
		if v, ok, err := s.Get(ctx, "ua:up1"); v != serverA || !ok || err != nil {
			t.Fatalf("store Get(ua:up1) = %q, %v, %v", v, ok, err)
		}
	})
	t.Run("FirstBindingWins", func(t *testing.T) {
		b, _ := newBindings(t, time.Minute)
		if err := b.Bind(ctx, "up1", serverA); err != nil {
			t.Fatal(err)
		}
		err := b.Bind(ctx, "up1", serverB)
		if !errors.Is(err, ErrAlreadyBound) || !strings.Contains(err.Error(), serverA) {
			t.Fatalf("Bind to another server: %v; want ErrAlreadyBound naming %s", err, serverA)
		}
		wantOwner(t, b, "up1", serverA)
	})
	t.Run("BindAgainToTheSameServerRenews", func(t *testing.T) {
		b, _ := newBindings(t, ttl)
		start := time.Now()
		for time.Since(start) < 2*ttl {
			if err := b.Bind(ctx, "up1", serverA); err != nil {
				t.Fatal(err)
			}
			wantOwner(t, b, "up1", serverA)
			time.Sleep(ttl / 10) // the passage of time is what is tested
		}
	})
	t.Run("OwnerKeepsAnUploadInUseBound", func(t *testing.T) {
		b, s := newBindings(t, ttl)
		if err := b.Bind(ctx, "up1", serverA); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 2*ttl { // outlives its first TTL twice over
			wantOwner(t, b, "up1", serverA)
			time.Sleep(ttl / 10)
		}
		poll.Until(t, 5*ttl, "the binding nobody asks for to expire", func() bool {
			_, found, _ := s.Get(ctx, "ua:up1") // Get renews nothing
			return !found
		})
		wantNoOwner(t, b, "up1")
		if err := b.Bind(ctx, "up1", serverB); err != nil {
			t.Fatalf("Bind after expiry: %v", err)
		}
		wantOwner(t, b, "up1", serverB)
	})
	t.Run("OwnerDoesNotCreate", func(t *testing.T) {
		b, s := newBindings(t, time.Minute)
		wantNoOwner(t, b, "never")
		if _, found, _ := s.Get(ctx, "ua:never"); found {
			t.Fatal("asking for the owner created a binding")
		}
	})
	t.Run("Unbind", func(t *testing.T) {
		b, _ := newBindings(t, time.Minute)
		if err := b.Bind(ctx, "up1", serverA); err != nil {
			t.Fatal(err)
		}
		if err := b.Unbind(ctx, "up1"); err != nil {
			t.Fatal(err)
		}
		wantNoOwner(t, b, "up1")
		if err := b.Unbind(ctx, "up1"); err != nil {
			t.Fatalf("Unbind of an unbound upload: %v", err)
		}
		if err := b.Bind(ctx, "up1", serverB); err != nil {
			t.Fatalf("Bind after Unbind: %v", err)
		}
		wantOwner(t, b, "up1", serverB)
	})
	t.Run("InvalidIDsNeverReachTheStore", func(t *testing.T) {
		b, s := newBindings(t, time.Minute)
		for _, id := range hostileIDs {
			if err := b.Bind(ctx, id, serverA); !errors.Is(err, ErrInvalidID) {
				t.Errorf("Bind(%.40q): %v; want ErrInvalidID", id, err)
			}
			if _, found, err := b.Owner(ctx, id); found || !errors.Is(err, ErrInvalidID) {
				t.Errorf("Owner(%.40q) = %v, %v; want ErrInvalidID", id, found, err)
			}
			if err := b.Unbind(ctx, id); !errors.Is(err, ErrInvalidID) {
				t.Errorf("Unbind(%.40q): %v; want ErrInvalidID", id, err)
			}
			if _, ok, _ := s.Get(ctx, "ua:"+id); ok {
				t.Errorf("the hostile id %.40q was stored", id)
			}
		}
	})
	t.Run("InvalidServers", func(t *testing.T) {
		b, _ := newBindings(t, time.Minute)
		for _, server := range []string{"", strings.Repeat("h", MaxServerLen+1)} {
			if err := b.Bind(ctx, "up1", server); !errors.Is(err, ErrInvalidServer) {
				t.Errorf("Bind to %.20q: %v; want ErrInvalidServer", server, err)
			}
		}
		wantNoOwner(t, b, "up1")
	})
	t.Run("NoTTLIsAnError", func(t *testing.T) {
		b, _ := newBindings(t, 0)
		if err := b.Bind(ctx, "up1", serverA); !errors.Is(err, store.ErrLifetime) {
			t.Fatalf("Bind with TTL 0: %v; want store.ErrLifetime", err)
		}
	})
	t.Run("ConcurrentBindsOneOwner", func(t *testing.T) {
		b, _ := newBindings(t, time.Minute)
		servers := []string{serverA, serverB, "127.0.0.1:9103"}
		var wg sync.WaitGroup
		var bound, refused atomic.Int32
		start := make(chan struct{})
		for i := range 30 {
			wg.Go(func() {
				<-start
				switch err := b.Bind(ctx, "up1", servers[i%len(servers)]); {
				case err == nil:
					bound.Add(1)
				case errors.Is(err, ErrAlreadyBound):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		owner, found, err := b.Owner(ctx, "up1")
		if !found || err != nil {
			t.Fatalf("Owner = %q, %v, %v", owner, found, err)
		}
		// Every caller naming the winner succeeds, every other one is refused.
		if bound.Load() != 10 || refused.Load() != 20 {
			t.Fatalf("%d binds succeeded and %d were refused; want 10 and 20", bound.Load(), refused.Load())
		}
	})
	t.Run("KeysDoNotKeepTheCallersMemory", func(t *testing.T) {
		b, _ := newBindings(t, time.Minute)
		buf := []byte("reused")
		if err := b.Bind(ctx, string(buf), serverA); err != nil {
			t.Fatal(err)
		}
		for range 100 { // the pooled key buffers are rewritten by other calls
			if _, _, err := b.Owner(ctx, "other1"); err != nil {
				t.Fatal(err)
			}
		}
		wantOwner(t, b, "reused", serverA)
		wantNoOwner(t, b, "other1")
	})
}

// hostileIDs are ids a client or a server could try; none may become a key.
var hostileIDs = []string{
	"",
	strings.Repeat("a", MaxIDLen+1),
	strings.Repeat("a", 1<<16),
	".", "..", "../admin", "a/b", "%2e%2e", "%2F", "a%00", "a\x00b", "a\r\nb",
	"a b", "é", "ａ", "\xff", "{tag}", "a:b", "*", "a?b",
}

func wantOwner(t *testing.T, b *Bindings, id, want string) {
	t.Helper()
	if owner, found, err := b.Owner(context.Background(), id); owner != want || !found || err != nil {
		t.Fatalf("Owner(%q) = %q, %v, %v; want %q", id, owner, found, err, want)
	}
}

func wantNoOwner(t *testing.T, b *Bindings, id string) {
	t.Helper()
	if owner, found, err := b.Owner(context.Background(), id); found || err != nil {
		t.Fatalf("Owner(%q) = %q, %v, %v; want none", id, owner, found, err)
	}
}
