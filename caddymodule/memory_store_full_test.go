package caddymodule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// The attack of issue 19 (2): unique keys in a header-keyed zone, ten times
// a small memory store's max_keys. Afterwards a key counted before the
// flood and a new key are limited at exactly their limit, and so is a
// {client_ip} zone; uploads created before and during the flood complete
// on their own server. Then counters that reached their limit fill the
// store: nothing can be stored, on_store_error decides (deny: 503), and the
// store reads degraded in the metrics and the status view, while uploads
// are still created (bindings have their own room).
func TestFullMemoryStoreKeepsLimits(t *testing.T) {
	const maxKeys, flood, limit = 500, 5000, 5
	// Windows of an hour on a frozen clock: the test never straddles two.
	frozen := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	wallClock = func() time.Time { return frozen }
	t.Cleanup(func() { wallClock = time.Now })
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, fmt.Sprintf("ha {\n\t\tstore memory {\n\t\t\tmax_keys %d\n\t\t}\n\t}", maxKeys), `@uploads path /api/uploads*
	handle @uploads {
		`+affinitySite(servers, "")+`
	}
	handle /one {
		edge_rate_limit {
			zone one {
				key {http.request.header.X-K}
				events 1
				window 1h
			}
			on_store_error deny
		}
		respond "one"
	}
	handle {
		edge_rate_limit {
			zone hdr {
				match {
					path /hdr
				}
				key {http.request.header.X-K}
				events 5
				window 1h
			}
			zone ip {
				match {
					path /ip
				}
				key {client_ip}
				ipv6_prefix 64
				events 5
				window 1h
			}
		}
		respond "ok"
	}`)
	statuses := func(n int, path string, hdr ...string) string {
		t.Helper()
		var got []string
		for range n {
			got = append(got, fmt.Sprint(send(t, "GET", tc.url(path), hdr...).status))
		}
		return strings.Join(got, " ")
	}
	want := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	uploads := newUploadClient("http://" + tc.addr)
	type upload struct{ key, location string }
	var created []upload
	create := func(key string) {
		t.Helper()
		location, err := uploads.create(key, 10)
		if err != nil {
			t.Fatalf("creating upload %s: %v", key, err)
		}
		created = append(created, upload{key, location})
	}

	create("before")
	want("a key counted before the flood", statuses(3, "/hdr", "X-K", "old"), "200 200 200")

	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < flood; i += 8 {
				ans, err := trySend("GET", tc.url("/hdr"), "X-K", fmt.Sprint("flood-", i))
				if err != nil || ans.status != 200 {
					failed.Add(1)
				}
				sent.Add(1)
			}
		})
	}
	// Uploads created while the flood fills the store and goes round it.
	for i, at := range []int64{2 * maxKeys, flood / 2, flood - maxKeys} {
		poll.Until(t, time.Minute, fmt.Sprint(at, " flood requests"), func() bool { return sent.Load() >= at || failed.Load() > 0 })
		create(fmt.Sprint("during-", i))
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d flood requests not answered 200", n)
	}

	want("the key counted before, after the flood", statuses(5, "/hdr", "X-K", "old"), "200 200 429 429 429")
	want("a new key after the flood", statuses(8, "/hdr", "X-K", "fresh"), "200 200 200 200 200 429 429 429")
	want("the {client_ip} zone after the flood", statuses(8, "/ip"), "200 200 200 200 200 429 429 429")
	store := `{store="memory"}`
	if v := counterValue(tc, "caddy_ha_store_evictions_total"+store); v < flood-maxKeys {
		t.Errorf("evictions: %v, want at least %d", v, flood-maxKeys)
	}
	if v := metricValue(tc, "caddy_ha_store_degraded"+store); v != 0 {
		t.Errorf("caddy_ha_store_degraded after evictions only: %v, want 0", v)
	}
	data := []byte("0123456789")
	for i, u := range created {
		if err := uploads.send(u.location, data, 3, 0, len(data), rand.New(rand.NewPCG(uint64(i), 19))); err != nil {
			t.Fatalf("upload %s: %v", u.key, err)
		}
		if err := uploads.complete(u.location); err != nil {
			t.Fatalf("upload %s: %v", u.key, err)
		}
	}
	for _, u := range created {
		var holders []string
		for _, s := range servers {
			for _, rec := range s.Uploads() {
				if rec.IdempotencyKey == u.key && rec.Completed && string(rec.Data) == string(data) {
					holders = append(holders, s.ID())
				}
			}
		}
		if len(holders) != 1 {
			t.Errorf("upload %s complete on %v, want one server", u.key, holders)
		}
	}

	// Keys that reach their limit at once (events 1) fill the store (with
	// old, fresh and the client's address, over their limits): a new key
	// is still counted, evicting one of them (issue 26.2: it was let
	// through uncounted by on_store_error, here deny's 503), and the store
	// is not degraded.
	for i := range maxKeys - 3 {
		if ans := send(t, "GET", tc.url("/one"), "X-K", fmt.Sprint("one-", i)); ans.status != 200 {
			t.Fatalf("zone one, key %d: %d", i, ans.status)
		}
	}
	want("a new key with every counter at its limit", statuses(2, "/one", "X-K", "one-more"), "200 429")
	if v := metricValue(tc, "caddy_ha_store_degraded"+store); v != 0 {
		t.Errorf("caddy_ha_store_degraded with the store full of counters: %v, want 0", v)
	}
	if v := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="denied",zone="one"}`); v != 0 {
		t.Errorf("zone one's denied decisions: %v, want 0", v)
	}
	create("full")
}

// Issue 26.2 as measured: 200 keys of a client-chosen header sent 6 times
// each (every counter at its limit of 5, the store full at 50), then a
// fresh key 20 times, with the default on_store_error and with each value.
// Each flood passes exactly 1,000 of 1,200 and the fresh key exactly its 5
// (before, it got 20 of 20 and the flood 1,151), and a key counted before
// the flood more than any flood key keeps its count.
func TestFullMemoryStoreCountsNewKeysOnEveryOnStoreError(t *testing.T) {
	frozen := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	wallClock = func() time.Time { return frozen }
	t.Cleanup(func() { wallClock = time.Now })
	for _, setting := range []string{"", "local", "allow", "deny"} { // "": the default
		option := ""
		if setting != "" {
			option = "on_store_error " + setting
		}
		// Zone z is the flood's; zone heavy lets a key be counted more
		// than any flood key (a key over its limit is remembered, not
		// counted on), for the key counted before the flood.
		tc := startCaddy(t, nil, "ha {\n\t\tstore memory {\n\t\t\tmax_keys 50\n\t\t}\n\t}", `edge_rate_limit {
		zone z {
			match {
				path /z
			}
			key {http.request.header.X-K}
			events 5
			window 1h
		}
		zone heavy {
			match {
				path /heavy
			}
			key {http.request.header.X-K}
			events 12
			window 1h
		}
		`+option+`
	}
	respond "ok"`)
		passed := func(path, key string, n int) int {
			got := 0
			for range n {
				if ans := send(t, "GET", tc.url(path), "X-K", key); ans.status == 200 {
					got++
				}
			}
			return got
		}
		old := "old" + setting
		before := passed("/heavy", old, 10)
		flood := 0
		for k := range 200 {
			flood += passed("/z", fmt.Sprint("flood-", setting, k), 6)
		}
		fresh := passed("/z", "fresh"+setting, 20)
		after := passed("/heavy", old, 5)
		t.Logf("on_store_error %q: the flood passed %d of 1200, a fresh key %d of 20, the key counted 10 times before %d more of 5", setting, flood, fresh, after)
		if flood != 1000 || fresh != 5 || before != 10 || after != 2 {
			t.Errorf("on_store_error %q: the flood passed %d of 1200 (want 1000), a fresh key %d of 20 (want 5), the key counted %d times before the flood %d more of 5 (want 10, then 2: its count kept)",
				setting, flood, fresh, before, after)
		}
		if v := metricValue(tc, `caddy_ha_store_degraded{store="memory"}`); v != 0 {
			t.Errorf("on_store_error %q: caddy_ha_store_degraded %v, want 0 (a store full of counters evicts)", setting, v)
		}
	}
}
