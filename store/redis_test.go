package store_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// The keys live under the prefix, so services sharing one Redis stay apart,
// and each operation is the toolkit guide's command: one round trip.
func TestRedisPrefixAndCommands(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	raw := srv.Client()
	a, b := newRedisStore(t, srv, "svc-a:"), newRedisStore(t, srv, "svc-b:")
	mustAdd(t, a, "k", "a", time.Minute)
	wantAbsent(t, b, "k")
	if v := raw.Get(ctx, "svc-a:k").Val(); v != "a" {
		t.Fatalf("raw GET svc-a:k = %q", v)
	}
	if _, err := a.Increment(ctx, "n", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := raw.PTTL(ctx, "svc-a:n").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the counter's PTTL is %v, want its lifetime", ttl)
	}
	if _, _, err := a.Take(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	stats := raw.Info(ctx, "commandstats").Val()
	for _, cmd := range []string{"set", "get", "getdel", "del", "multi", "incrby", "pexpire", "exec"} {
		if !strings.Contains(stats, "cmdstat_"+cmd+":") {
			t.Errorf("Redis never ran %s:\n%s", cmd, stats)
		}
	}
	for _, cmd := range []string{"eval", "evalsha", "incr", "expire", "setnx"} {
		if strings.Contains(stats, "cmdstat_"+cmd+":") {
			t.Errorf("Redis ran %s, which the store does not use", cmd)
		}
	}
}

// A Redis that is gone or hung makes calls fail within the caller's deadline.
func TestRedisHonoursDeadlines(t *testing.T) {
	srv := redistest.Start(t)
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1}), "p:")
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Increment(ctx, "n", 1, time.Minute); err == nil {
		t.Fatal("Increment on a paused Redis succeeded")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Increment on a paused Redis took %v with a 50ms deadline", d)
	}
}

// The same semantics on Redis Cluster (multi-key reads stay in one hash
// slot) and through Sentinel.
func TestRedisClusterConformance(t *testing.T) {
	srv := redistest.StartCluster(t)
	conformance(t, func(t *testing.T) store.Store {
		s := store.NewRedis(redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr}, IsClusterMode: true}), "cluster:"+t.Name()+":")
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestRedisSentinelConformance(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "ha-master")
	conformance(t, func(t *testing.T) store.Store {
		s := store.NewRedis(redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{sentinel.Addr}, MasterName: "ha-master"}), "sentinel:"+t.Name()+":")
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A caller that gives up returns at once and may reuse its key and counts
// memory at once: a batch still on the wire must not write into them (the
// race detector watches).
func TestRedisCallerGivingUpKeepsItsMemory(t *testing.T) {
	srv := redistest.Start(t)
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1}), "")
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout := 5 * time.Millisecond
			if i%2 == 0 {
				timeout = 2 * time.Second // answered late, in the same batches
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			key := []byte("{k}:" + strconv.Itoa(i))
			counts := make([]int64, 2)
			s.IncrementAndCount(ctx, unsafe.String(&key[0], len(key)), 1, time.Minute, []string{"{k}:a", "{k}:b"}, counts)
			for j := 0; j < 1000; j++ { // reuse the memory at once
				counts[j%2] = int64(j)
				key[len(key)-1] = 'x'
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the passage of time is what is tested: the short calls give up
	srv.Resume()
	wg.Wait()
	if n := srv.Client().Exists(context.Background(), "{k}:x").Val(); n != 0 {
		t.Fatal("an increment landed on a key rewritten after its caller gave up")
	}
}
