package caddymodule

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/ratelimit"
)

// clockSkew is how far ahead the in-process instance's clock runs in the
// clock tests: more than a window, so that its windows and the other
// instance's would never line up.
const clockSkew = 2*time.Second + 300*time.Millisecond

// skewWallClock runs this process's wall clock, the one windows follow
// unless they follow the store's, ahead by clockSkew until the test ends.
func skewWallClock(t *testing.T) {
	wallClock = func() time.Time { return time.Now().Add(clockSkew) }
	t.Cleanup(func() { wallClock = time.Now })
}

// storeClockError bounds how far an instance's estimate of the store's
// clock may be off: half the shortest of its last round trips to the store
// (store.Health), a few ms on a loaded 2-core machine. A request that near
// a window's end may be counted in either window.
const storeClockError = 25 * time.Millisecond

// windowCounts sends requests through both instances in turn, at a steady
// rate for about n windows, and counts the allowed ones per window of the
// real clock (the store's, on loopback). A request whose round trip
// straddles a window's edge (widened by storeClockError) is counted in
// ambiguous of both windows.
func windowCounts(t *testing.T, urls []string, window time.Duration, n int) (allowed, ambiguous map[int64]int) {
	t.Helper()
	allowed, ambiguous = map[int64]int{}, map[int64]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	windowOf := func(at time.Time) int64 { return ratelimit.WindowStart(at, window).UnixNano() / int64(window) }
	end := time.Now().Add(time.Duration(n) * window)
	for i := 0; time.Now().Before(end); i++ {
		url := urls[i%len(urls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			ans, err := trySend("GET", url)
			received := time.Now()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if from, to := windowOf(sent.Add(-storeClockError)), windowOf(received.Add(storeClockError)); from != to {
				ambiguous[from]++
				ambiguous[to]++
			} else if ans.status == 200 {
				allowed[from]++
			}
		}()
		time.Sleep(window / 40) // the load's pace, not a synchronisation
	}
	wg.Wait()
	return allowed, ambiguous
}

// Two instances sharing Redis, or PostgreSQL, one whose clock runs seconds
// ahead: with
// windows on the store's clock (the default) they number windows alike and
// allow exactly the limit in every window; on their own clocks each counts
// in windows of its own, and up to twice the limit passes.
func TestRateLimitWindowsFollowTheStoresClock(t *testing.T) {
	for _, newStore := range []func(*testing.T) storeUnderTest{redisUnderTest, postgresUnderTest} {
		st := newStore(t)
		t.Run(st.kind, func(t *testing.T) { testWindowsFollowTheStoresClock(t, st) })
	}
}

func testWindowsFollowTheStoresClock(t *testing.T, st storeUnderTest) {
	const events, window = 5, time.Second
	for _, tt := range []struct {
		clock string
		exact bool
	}{{"", true}, {"local", false}} {
		t.Run("clock "+map[string]string{"": "store (the default)", "local": "local"}[tt.clock], func(t *testing.T) {
			skewWallClock(t)
			prefix := fmt.Sprintf("clock%s:", tt.clock)
			site := fmt.Sprintf(`edge_rate_limit {
		zone skew {
			key everyone
			events %d
			window %s
		}
		store_timeout 5s # clocks are tested here: a slow -race run must not count locally
		%s
	}
	respond ok`, events, window, map[string]string{"": "", "local": "clock local"}[tt.clock])
			a := startCaddy(t, nil, st.option(prefix), site)
			b := startCaddyProcess(t, st.option(prefix), site)
			if tt.exact {
				// Measured within storeClockError of the skew (the store's
				// clock is this machine's): a first measurement on a loaded
				// machine can be off by half a long round trip, and windows
				// shifted by it let a window take both instances' limit.
				poll.Until(t, 15*time.Second, "the store's clock measured", func() bool {
					offset := metricValue(a, `caddy_ha_store_clock_offset_seconds{store="`+st.label(prefix)+`"}`)
					return math.Abs(offset+clockSkew.Seconds()) < storeClockError.Seconds()
				})
			}
			allowed, ambiguous := windowCounts(t, []string{a.url("/"), b.url("/")}, window, 6)
			// Windows that let more than the limit through, beyond doubt:
			// one whose certain passes alone exceed it with its uncertain
			// ones, or all of them together (each window's certain passes
			// are at most the limit where windows are shared; a loaded
			// machine's slow round trips make many uncertain).
			var over, total int
			for w, n := range allowed {
				total += n
				if n > events+ambiguous[w] {
					over++
				}
				if tt.exact && (n > events || n+ambiguous[w] < events) && !isEdgeWindow(w, allowed) {
					t.Errorf("window %d: %d allowed (%d ambiguous), want exactly %d", w, n, ambiguous[w], events)
				}
			}
			t.Logf("allowed per window %v, ambiguous %v", allowed, ambiguous)
			if !tt.exact && over == 0 && total <= events*len(allowed) {
				t.Error("with skewed local clocks no window let more than the limit through: the test proves nothing")
			}
		})
	}
}

// isEdgeWindow reports whether w is the first or last window of a run,
// which the load covers only in part.
func isEdgeWindow(w int64, windows map[int64]int) bool {
	first, last := w, w
	for other := range windows {
		first, last = min(first, other), max(last, other)
	}
	return w == first || w == last
}
