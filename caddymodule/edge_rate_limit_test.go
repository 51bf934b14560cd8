package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/ratelimit"
)

// answer is what a client saw.
type answer struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

var rlClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func send(t testing.TB, method, url string, hdr ...string) answer {
	t.Helper()
	ans, err := trySend(method, url, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// trySend is send for goroutines other than the test's.
func trySend(method, url string, hdr ...string) (answer, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	resp, err := rlClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b), time.Since(start)}, nil
}

// redisOption is the ha option with a Redis store.
func redisOption(srv *redistest.Server, prefix string) string {
	return "ha {\n\t\t" + redisStore(srv, prefix) + "\n\t\thealth_interval 100ms\n\t}"
}

// redisValue reads a key's value in srv, "" if none.
func redisValue(srv *redistest.Server) func(string) string {
	return func(key string) string { return srv.Client().Get(context.Background(), key).Val() }
}

// redisStore is a store subdirective for a Redis store.
func redisStore(srv *redistest.Server, prefix string) string {
	return fmt.Sprintf("store redis {\n\t\t\taddress %s\n\t\t\tprefix %s\n\t\t}", srv.Addr, prefix)
}

// awayFromWindowEnd waits, if needed, until a window of length w has at
// least margin left, so a burst of requests falls in one window.
func awayFromWindowEnd(t testing.TB, w, margin time.Duration) {
	poll.Until(t, w, "a window with room", func() bool {
		now := time.Now()
		return ratelimit.WindowStart(now, w).Add(w).Sub(now) > margin
	})
}

// Two Caddy instances (this process and another) sharing one Redis let
// exactly events requests of one key through per window, in total: with
// Redis as the ha app's store, and as the handler's own; 10 of 400 counted
// one request at a time, and 1000 of 2000 in leases.
func TestRateLimitExactAcrossTwoInstances(t *testing.T) {
	srv := redistest.Start(t)
	t.Run("ha store", func(t *testing.T) {
		testExactAcrossTwoInstances(t, redisValue(srv), "ha:", redisOption(srv, "ha:"), "")
	})
	t.Run("own store", func(t *testing.T) {
		testExactAcrossTwoInstances(t, redisValue(srv), "own:", "", redisStore(srv, "own:"))
	})
}

// exactSite is the site of the two-instance exactness tests: its zone's
// events, and the handler's own store, if any.
func exactSite(events int, ownStore string) string {
	return fmt.Sprintf(`edge_rate_limit {
		zone api {
			key {http.request.header.X-Client}
			events %d
			window 1h
		}
		on_store_error deny
		store_timeout 5s # exactness is tested here, not timeouts: a slow -race run must not fall back
		%s
	}
	respond "ok"`, events, ownStore)
}

// testExactAcrossTwoInstances sends 20 clients' requests of one key to two
// instances in turn, under a small limit (one store call per allowed
// request) and a large one (a store call per lease): exactly the limit
// passes, and the instance in this process asked the store as said.
func testExactAcrossTwoInstances(t *testing.T, value func(fullKey string) string, prefix, globalOpts, ownStore string) {
	for _, tt := range []struct {
		events, each int
		leases       bool
	}{{10, 20, false}, {1000, 100, true}} {
		site := exactSite(tt.events, ownStore)
		key := fmt.Sprintf("key-%d", tt.events)
		a := startCaddy(t, nil, globalOpts, site)
		b := startCaddyProcess(t, globalOpts, site)
		awayFromWindowEnd(t, time.Hour, 30*time.Second)
		callsBefore := counterValue(a, `caddy_ha_rate_limit_store_duration_seconds_count{zone="api"}`)

		const clients = 20
		var mu sync.Mutex
		statuses, allowedAtA := map[int]int{}, 0
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Go(func() {
				for i := 0; i < tt.each; i++ {
					url, atA := a.url("/"), (c+i)%2 == 0
					if !atA {
						url = b.url("/")
					}
					ans, err := trySend("GET", url, "X-Client", key)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					statuses[ans.status]++
					if atA && ans.status == 200 {
						allowedAtA++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		sent := clients * tt.each
		if statuses[200] != tt.events || statuses[429] != sent-tt.events {
			t.Fatalf("events %d: answers by status: %v; want exactly %d allowed and the rest 429", tt.events, statuses, tt.events)
		}
		calls := int(counterValue(a, `caddy_ha_rate_limit_store_duration_seconds_count{zone="api"}`) - callsBefore)
		switch {
		case !tt.leases && calls < allowedAtA:
			t.Fatalf("events %d: %d requests allowed here after %d store calls: a small limit leased", tt.events, allowedAtA, calls)
		case tt.leases && calls > sent/2/4:
			t.Fatalf("events %d: %d store calls for the %d requests here: no leasing", tt.events, calls, sent/2)
		}
		t.Logf("events %d: %d store calls for %d requests here, %d allowed here", tt.events, calls, sent/2, allowedAtA)
		if n := value(prefix + "rl:{api:" + key + "}:" + strconv.FormatInt(time.Now().Unix()/3600, 10)); n == "" {
			t.Fatalf("no counter in the store under the prefix %q", prefix)
		}
	}
}

// Instances started at different times agree on the windows: the window
// start is the clock's, not the instance's.
func TestRateLimitWindowsAlignedAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	site := `edge_rate_limit {
		zone aligned {
			key {http.request.header.X-Client}
			events 2
			window 1s
		}
		store_timeout 5s # alignment is tested here: a slow -race run must not count locally
	}
	respond "ok"`
	a := startCaddy(t, nil, redisOption(srv, "aligned:"), site)
	poll.Until(t, 2*time.Second, "a later start", func() bool { return time.Now().UnixMilli()%1000 > 300 })
	b := startCaddyProcess(t, redisOption(srv, "aligned:"), site)
	last := int64(0)
	for round := 0; round < 4; round++ {
		// Inside each window, away from its edges, one round per window.
		poll.Until(t, 2*time.Second, "the middle of the next window", func() bool {
			ms := time.Now().UnixMilli()
			return ms/1000 > last && ms%1000 >= 150 && ms%1000 < 300
		})
		window := time.Now().Unix()
		last = window
		allowed := 0
		for i := 0; i < 6; i++ {
			url := a.url("/")
			if i%2 == 1 {
				url = b.url("/")
			}
			if send(t, "GET", url, "X-Client", "k").status == 200 {
				allowed++
			}
		}
		if time.Now().Unix() != window {
			t.Fatalf("round %d spilled into the next window: the machine is too slow for this test", round)
		}
		if allowed != 2 {
			t.Fatalf("round %d: %d requests allowed across both instances in one window, want 2", round, allowed)
		}
	}
}

// sfItem is one member of a structured-field list: a string and its
// parameters.
type sfItem struct {
	name   string
	params map[string]int64
}

// parseRateLimitField parses a RateLimit or RateLimit-Policy field: a list
// of "name";key=integer… items (RFC 8941), strictly.
func parseRateLimitField(t testing.TB, v string) []sfItem {
	t.Helper()
	var items []sfItem
	for _, member := range strings.Split(v, ",") {
		member = strings.TrimSpace(member)
		parts := strings.Split(member, ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil || !strings.HasPrefix(parts[0], `"`) {
			t.Fatalf("field %q: %q is not a quoted string", v, parts[0])
		}
		it := sfItem{name: name, params: map[string]int64{}}
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(p, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if !ok || err != nil || k == "" || strings.ToLower(k) != k {
				t.Fatalf("field %q: bad parameter %q", v, p)
			}
			it.params[k] = n
		}
		items = append(items, it)
	}
	return items
}

func TestRateLimitAnswersAndFields(t *testing.T) {
	tc := startCaddy(t, nil, "", `edge_rate_limit {
		zone login {
			match {
				method POST
				path /login
			}
			key {http.request.remote.host}
			events 3
			window 1m
		}
		zone all {
			key {http.request.remote.host}
			events 1000
			window 1h
		}
	}
	respond "ok"`)
	awayFromWindowEnd(t, time.Minute, 20*time.Second)
	// Metrics are process-wide: count from here (go test -count=N).
	limitedBefore := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="limited",zone="login"}`)
	allowedBefore := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="allowed",zone="login"}`)
	for i := 0; i < 3; i++ {
		ans := send(t, "POST", tc.url("/login"))
		if ans.status != 200 {
			t.Fatalf("login %d: status %d", i, ans.status)
		}
		policy := parseRateLimitField(t, ans.header.Get("RateLimit-Policy"))
		state := parseRateLimitField(t, ans.header.Get("RateLimit"))
		if len(policy) != 2 || policy[0].name != "login" || policy[0].params["q"] != 3 || policy[0].params["w"] != 60 ||
			policy[1].name != "all" || policy[1].params["q"] != 1000 || policy[1].params["w"] != 3600 {
			t.Fatalf("RateLimit-Policy %+v", policy)
		}
		if len(state) != 2 || state[0].name != "login" || state[0].params["r"] != int64(2-i) ||
			state[0].params["t"] < 1 || state[0].params["t"] > 60 || state[1].params["r"] != int64(999-i) {
			t.Fatalf("RateLimit %+v after %d logins", state, i+1)
		}
	}
	// GETs and other paths do not count in the login zone.
	if ans := send(t, "GET", tc.url("/login")); ans.status != 200 || len(parseRateLimitField(t, ans.header.Get("RateLimit"))) != 1 {
		t.Fatalf("GET /login: %d %v", ans.status, ans.header)
	}
	ans := send(t, "POST", tc.url("/login"))
	if ans.status != 429 {
		t.Fatalf("the fourth login: status %d, want 429", ans.status)
	}
	retry, err := strconv.Atoi(ans.header.Get("Retry-After"))
	state := parseRateLimitField(t, ans.header.Get("RateLimit"))
	if err != nil || retry < 1 || retry > 60 || state[0].params["r"] != 0 || state[0].params["t"] != int64(retry) {
		t.Fatalf("429: Retry-After %q, RateLimit %+v", ans.header.Get("Retry-After"), state)
	}
	if !strings.Contains(ans.body, `zone "login"`) || !strings.Contains(ans.body, "429") {
		t.Fatalf("429 body %q does not say what happened", ans.body)
	}
	if v := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="limited",zone="login"}`) - limitedBefore; v != 1 {
		t.Fatalf("limited metric rose by %v, want 1", v)
	}
	if v := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="allowed",zone="login"}`) - allowedBefore; v != 3 {
		t.Fatalf("allowed metric rose by %v, want 3", v)
	}
}

// With headers off, only refusals carry the fields; with handle_errors,
// the refusal's body is the operator's.
func TestRateLimitHeadersOffAndErrorRoutes(t *testing.T) {
	tc := startCaddy(t, nil, "", `edge_rate_limit {
		zone z {
			key {http.request.remote.host}
			events 1
			window 1h
		}
		headers off
	}
	respond "ok"
	handle_errors {
		respond "custom {err.status_code}"
	}`)
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	if ans := send(t, "GET", tc.url("/")); ans.status != 200 || ans.header.Get("RateLimit") != "" || ans.header.Get("RateLimit-Policy") != "" {
		t.Fatalf("allowed with headers off: %d %v", ans.status, ans.header)
	}
	ans := send(t, "GET", tc.url("/"))
	if ans.status != 429 || ans.body != "custom 429" || ans.header.Get("Retry-After") == "" || ans.header.Get("RateLimit") == "" {
		t.Fatalf("refusal through handle_errors: %d %q %v", ans.status, ans.body, ans.header)
	}
}

// The fields reach the client on responses of a real backend too.
func TestRateLimitInFrontOfReverseProxy(t *testing.T) {
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "backend") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go backend.Serve(ln)
	t.Cleanup(func() { backend.Close() })
	tc := startCaddy(t, nil, "", `edge_rate_limit {
		zone z {
			key {client_ip}
			events 2
			window 1h
		}
	}
	reverse_proxy `+addr)
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	for i, want := range []int{200, 200, 429} {
		ans := send(t, "GET", tc.url("/"))
		if ans.status != want || ans.header.Get("RateLimit") == "" || (want == 200 && ans.body != "backend") {
			t.Fatalf("request %d: %d %q %v", i, ans.status, ans.body, ans.header)
		}
	}
}

// sendAfterReload is send, tried once more when the connection breaks:
// a reload hands the listener over while a new connection may still reach
// the old server. Idempotent requests only.
func sendAfterReload(t testing.TB, method, url string, hdr ...string) answer {
	t.Helper()
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := rlClient.Do(req)
		if err != nil {
			if attempt == 0 {
				continue
			}
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b), 0}
	}
}

// Counts in the memory store survive a reload: the store is shared while
// its settings stay the same. Redis is not reconnected on reload.
func TestRateLimitStoreSharedAcrossReloads(t *testing.T) {
	site := func(events int, store ...string) string {
		return fmt.Sprintf(`edge_rate_limit {
		zone z {
			key {http.request.remote.host}
			events %d
			window 1h
		}
		%s
	}
	respond "ok"`, events, strings.Join(store, ""))
	}
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	tc := startCaddy(t, nil, "", site(3))
	for i := 0; i < 2; i++ {
		if s := sendAfterReload(t, "GET", tc.url("/")).status; s != 200 {
			t.Fatalf("status %d", s)
		}
	}
	tc.load(nil, "", site(4)) // another handler config, the same store
	for i, want := range []int{200, 200, 429} {
		if s := sendAfterReload(t, "GET", tc.url("/")).status; s != want {
			t.Fatalf("after reload, request %d: %d, want %d", i, s, want)
		}
	}

	srv := redistest.Start(t)
	raw := srv.Client()
	tc.load(nil, redisOption(srv, "reload:"), site(10))
	sendAfterReload(t, "GET", tc.url("/"))
	connections := func() string {
		for _, l := range strings.Split(raw.Info(context.Background(), "stats").Val(), "\r\n") {
			if strings.HasPrefix(l, "total_connections_received:") {
				return l
			}
		}
		return ""
	}
	before := connections()
	for i := 0; i < 3; i++ {
		tc.load(nil, redisOption(srv, "reload:"), site(10+i))
		sendAfterReload(t, "GET", tc.url("/"))
	}
	// The handler naming a store of its own with the same settings.
	tc.load(nil, redisOption(srv, "reload:"), site(20, redisStore(srv, "reload:")))
	sendAfterReload(t, "GET", tc.url("/"))
	if after := connections(); after != before {
		t.Fatalf("reloads with the same store settings reconnected to Redis: %s, then %s", before, after)
	}
}

// A reload keeps a zone's leases: a key that spent part of a lease before
// a reload spends the rest after it, so exactly its limit passes in the
// window (980 of 1000 when the reload stranded the lease's 20 unspent).
func TestRateLimitLeasesOutliveAReload(t *testing.T) {
	srv := redistest.Start(t)
	site := func(status string) string {
		return `edge_rate_limit {
		zone z {
			key {http.request.remote.host}
			events 1000
			window 1h
		}
		store_timeout 5s
	}
	respond "` + status + `"`
	}
	awayFromWindowEnd(t, time.Hour, 30*time.Second)
	tc := startCaddy(t, nil, redisOption(srv, "lease-reload:"), site("before"))
	allowed := 0
	for range 100 { // a lease of 62, then one of 58, 20 of it unspent
		if send(t, "GET", tc.url("/")).status == 200 {
			allowed++
		}
	}
	tc.load(nil, redisOption(srv, "lease-reload:"), site("after"))
	for range 1000 {
		ans := sendAfterReload(t, "GET", tc.url("/"))
		if ans.status == 200 {
			allowed++
			if ans.body != "after" {
				t.Fatalf("a request answered %q after the reload", ans.body)
			}
		}
	}
	if allowed != 1000 {
		t.Fatalf("%d of 1100 requests allowed across a reload, want exactly 1000", allowed)
	}
}

// storeUnderTest is a shared store a test can fail and inspect: Redis or
// PostgreSQL, each started by the test.
type storeUnderTest struct {
	kind   string                      // "redis", "postgres"
	label  func(prefix string) string  // its store label in metrics
	option func(prefix string) string  // the ha option for it
	fail   map[string]func()           // "kill", "pause"
	heal   map[string]func()           // undoes fail
	value  func(fullKey string) string // the value under a key, "" if none
}

// redisUnderTest starts a Redis for the test.
func redisUnderTest(t *testing.T) storeUnderTest {
	srv := redistest.Start(t)
	return storeUnderTest{
		kind: "redis", label: func(prefix string) string { return "redis " + srv.Addr + " db=0 prefix=" + prefix },
		option: func(prefix string) string { return redisOption(srv, prefix) },
		fail:   map[string]func(){"kill": srv.Kill, "pause": srv.Pause},
		heal:   map[string]func(){"kill": srv.Restart, "pause": srv.Resume},
		value:  redisValue(srv),
	}
}

// What each on_store_error policy does when Redis dies or hangs, that no
// request waits much longer than store_timeout, that the outage is logged
// once, and that limiting through Redis resumes by itself.
func TestRateLimitStoreOutage(t *testing.T) {
	testStoreOutage(t, redisUnderTest)
}

// testStoreOutage is TestRateLimitStoreOutage on the stores newStore
// starts.
// outagePrefix is the store prefix of the outage tests.
const outagePrefix = "outage:"

func testStoreOutage(t *testing.T, newStore func(*testing.T) storeUnderTest) {
	// A store_timeout that a fresh connection's first command meets on a
	// 2-core machine under -race beside another CPU-bound job (at 50ms,
	// "with the store up: 503" with deny, and a second outage logged after
	// the recovery, in 2 of 3 make test runs beside a yes), and a margin
	// for the scheduler's stalls there.
	const timeout = 200 * time.Millisecond
	margin := 400 * time.Millisecond
	for _, tt := range []struct {
		policy, failure string
		want            []int // statuses of 4 requests of one key while the store is down
	}{
		{"allow", "kill", []int{200, 200, 200, 200}},
		{"allow", "pause", []int{200, 200, 200, 200}},
		{"deny", "kill", []int{503, 503, 503, 503}},
		{"local", "kill", []int{200, 200, 200, 429}},
		{"local", "pause", []int{200, 200, 200, 429}},
		{"deny", "pause", []int{503, 503, 503, 503}},
	} {
		t.Run(tt.policy+"/"+tt.failure, func(t *testing.T) {
			st := newStore(t)
			zone := st.kind + "-" + tt.policy + "-" + tt.failure // metrics are per zone and process
			tc := startCaddy(t, nil, st.option(outagePrefix), fmt.Sprintf(`edge_rate_limit {
		zone %s {
			key {http.request.header.X-Client}
			events 3
			window 1h
		}
		on_store_error %s
		store_timeout %s
	}
	respond "ok"`, zone, tt.policy, timeout))
			awayFromWindowEnd(t, time.Hour, 20*time.Second)
			if s := send(t, "GET", tc.url("/"), "X-Client", "before").status; s != 200 {
				t.Fatalf("with the store up: %d", s)
			}
			// Traffic from other keys goes on while the store fails: none
			// of it waits longer than the timeout either.
			stopTraffic, trafficDone := make(chan struct{}), make(chan error, 1)
			endTraffic := sync.OnceFunc(func() { close(stopTraffic) })
			t.Cleanup(endTraffic) // also when the test fails first
			go func() {
				var slowest time.Duration
				for i := 0; ; i++ {
					select {
					case <-stopTraffic:
						trafficDone <- nil
						return
					default:
					}
					ans, err := trySend("GET", tc.url("/"), "X-Client", "traffic-"+strconv.Itoa(i))
					if err == nil && ans.status != 200 && ans.status != 503 {
						err = fmt.Errorf("request %d answered %d", i, ans.status)
					}
					if slowest = max(slowest, ans.took); err == nil && slowest > timeout+margin {
						err = fmt.Errorf("request %d took %v", i, slowest)
					}
					if err != nil {
						<-stopTraffic
						trafficDone <- err
						return
					}
				}
			}()
			st.fail[tt.failure]()
			for i, want := range tt.want {
				ans := send(t, "GET", tc.url("/"), "X-Client", "during")
				if ans.status != want {
					t.Fatalf("request %d with the store %sed: %d, want %d", i, tt.failure, ans.status, want)
				}
				if ans.took > timeout+margin {
					t.Fatalf("request %d with the store %sed took %v", i, tt.failure, ans.took)
				}
				if want == 503 && ans.header.Get("Retry-After") == "" {
					t.Fatal("503 without Retry-After")
				}
			}
			for i := 0; i < 20; i++ { // more requests, no more log lines
				send(t, "GET", tc.url("/"), "X-Client", "during")
			}
			endTraffic()
			if err := <-trafficDone; err != nil {
				t.Fatalf("traffic across the failure: %v", err)
			}
			if n := len(tc.logLines("store unavailable")); n != 1 {
				t.Fatalf("%d log lines for one outage, want 1", n)
			}
			if v := metricValue(tc, `caddy_ha_store_up{store="`+st.label(outagePrefix)+`"}`); v != 0 {
				t.Fatalf("store_up = %v during the outage", v)
			}
			st.heal[tt.failure]()
			hour := strconv.FormatInt(time.Now().Unix()/3600, 10)
			probes := 0
			poll.Until(t, 10*time.Second, "counting in the store again", func() bool {
				probes++ // a fresh key each time: one counted locally may be remembered as over the limit
				key := "probe-" + strconv.Itoa(probes)
				send(t, "GET", tc.url("/"), "X-Client", key)
				return st.value("outage:rl:{"+zone+":"+key+"}:"+hour) == "1"
			})
			for i, want := range []int{200, 200, 200, 429} {
				if s := send(t, "GET", tc.url("/"), "X-Client", "after").status; s != want {
					t.Fatalf("after recovery, request %d: %d, want %d", i, s, want)
				}
			}
			if n := st.value("outage:rl:{" + zone + ":after}:" + hour); n != "4" {
				t.Fatalf("the counter in the store after recovery is %q, want 4", n)
			}
			if n := len(tc.logLines("store available again")); n != 1 {
				t.Fatalf("%d recovery log lines, want 1", n)
			}
			if v := metricValue(tc, `caddy_ha_rate_limit_fallback_decisions_total{zone="`+zone+`"}`); v < 4 {
				t.Fatalf("fallback decisions = %v", v)
			}
			if v := metricValue(tc, `caddy_ha_rate_limit_store_errors_total{zone="`+zone+`"}`); v < 1 {
				t.Fatalf("store errors = %v", v)
			}
			if v := metricValue(tc, `caddy_ha_store_up{store="`+st.label(outagePrefix)+`"}`); v != 1 {
				t.Fatalf("store_up = %v after recovery", v)
			}
		})
	}
}

// A key over its limit is answered here: a flood from it does not reach
// Redis.
func TestRateLimitFloodStaysOffRedis(t *testing.T) {
	srv := redistest.Start(t)
	// Two zones: a key over the limit of one is not counted in the other.
	// A store_timeout no command misses on a loaded machine: a missed one
	// is decided locally (on_store_error local), and counts are then
	// another test's matter (beside a CPU-bound job, 4 passed at the default 50ms).
	tc := startCaddy(t, nil, redisOption(srv, "flood:"), `edge_rate_limit {
		zone flood {
			key {http.request.remote.host}
			events 3
			window 1h
		}
		zone all {
			key {http.request.remote.host}
			events 1000
			window 1h
		}
		store_timeout 5s
	}
	respond "ok"`)
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	observedBefore := counterValue(tc, `caddy_ha_rate_limit_store_duration_seconds_count{zone="flood"}`)
	limitedBefore := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="limited",zone="flood"}`)
	statuses := map[int]int{}
	for i := 0; i < 200; i++ {
		statuses[send(t, "GET", tc.url("/")).status]++
	}
	if statuses[200] != 3 || statuses[429] != 197 {
		t.Fatalf("answers by status: %v", statuses)
	}
	// Zone flood (3, under 2*lease_parts) counts one request at a time;
	// zone all (1000) takes one lease of 1000/16 for the same 4 requests.
	if stats := srv.Client().Info(context.Background(), "commandstats").Val(); !strings.Contains(stats, "cmdstat_incrby:calls=5,") {
		t.Fatalf("Redis counted other than 5 increments (in zone flood 3 allowed and 1 refused, then remembered; in zone all one lease):\n%s", stats)
	}
	if v := counterValue(tc, `caddy_ha_rate_limit_store_duration_seconds_count{zone="flood"}`) - observedBefore; v != 4 {
		t.Fatalf("store latency observations rose by %v, want 4", v)
	}
	if v := counterValue(tc, `caddy_ha_rate_limit_requests_total{decision="limited",zone="flood"}`) - limitedBefore; v != 197 {
		t.Fatalf("limited in zone flood: %v, want 197", v)
	}
}

func TestRateLimitConfigErrors(t *testing.T) {
	for _, tt := range []struct{ global, site, want string }{
		{"", "edge_rate_limit {\n}", "at least one zone"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tevents 1\n\t\twindow 1m\n\t}\n}", "needs a key"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 0\n\t\twindow 1m\n\t}\n}", "events must be a whole number"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 15ms\n\t\tsliding\n\t}\n}", "multiple of 10ms"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n}", "defined twice"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\ton_store_error maybe\n}", "on_store_error must be"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t\tburst 3\n\t}\n}", "unrecognized zone option 'burst'"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tlease_parts 1\n}", "lease_parts must be at least 2"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tleases maybe\n}", "leases"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tstore memory\n\tstore memory\n}", "duplicate store option"},
		{"", "edge_rate_limit {\n\tzone a {\n\t\tkey k\n\t\tevents 1\n\t\twindow 1m\n\t}\n\tstore redis\n}", "at least one address"},
		{"ha {\n\tstore redis {\n\t}\n}", "respond ok", "at least one address"},
		{"ha {\n\tstore redis {\n\t\taddress nohost\n\t}\n}", "respond ok", "want host:port"},
		{"ha {\n\tstore redis {\n\t\taddress a:1 b:2\n\t\tdb 3\n\t}\n}", "respond ok", "only db 0"},
		{"ha {\n\tstore redis {\n\t\taddress a:1\n\t\tcluster\n\t\tmaster_name m\n\t}\n}", "respond ok", "cluster and master_name exclude each other"},
		{"ha {\n\tstore redis {\n\t\taddress a:1\n\t\ttls {\n\t\t\tca /nonexistent.pem\n\t\t}\n\t}\n}", "respond ok", "tls ca"},
		{"ha {\n\tstore etcd\n}", "respond ok", "ha.stores.etcd"},
		{"ha {\n\tstore memory {\n\t\tmax_keys -1\n\t}\n}", "respond ok", "max_keys must be"},
		{"ha {\n\tstores memory\n}", "respond ok", "unrecognized ha option 'stores'"},
	} {
		caddyfile := "{\n" + tt.global + "\n}\nhttp://127.0.0.1:1 {\n" + tt.site + "\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: error %v, want %q with its line", caddyfile, err, tt.want)
		}
	}
	// JSON config is checked at load time too.
	for _, tt := range []struct{ apps, want string }{
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit"}]}]}}}`, "at least one zone"},
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit","on_store_error":"maybe","zones":[{"name":"a","key":"k","events":1,"window":1000000000}]}]}]}}}`, "on_store_error must be"},
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit","zones":[{"name":"a b","key":"k","events":1,"window":1000000000}]}]}]}}}`, "zone name"},
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit","lease_parts":-3,"zones":[{"name":"a","key":"k","events":1,"window":1000000000}]}]}]}}}`, "lease_parts must be at least 2"},
		{`"ha":{"store":{"backend":"redis"}}`, "at least one address"},
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit","clock":"sundial","zones":[{"name":"a","key":"k","events":1,"window":1000000000}]}]}]}}}`, `clock must be store or local, got "sundial"`},
		{`"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"edge_rate_limit","clock":"store","zones":[{"name":"a","key":"k","events":1,"window":1000000000}]}]}]}}}`, "clock store: the memory store has no clock of its own"},
	} {
		err := caddy.Validate(mustConfig(t, `{"admin":{"disabled":true},"apps":{`+tt.apps+`}}`))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.apps, err, tt.want)
		}
	}
}

// BenchmarkRateLimitKey: building the key of a client-address zone
// allocates nothing.
func BenchmarkRateLimitKey(b *testing.B) {
	r, _ := http.NewRequest("GET", "http://example.com/", nil)
	r.RemoteAddr = "203.0.113.7:54321"
	k := compileKey("{http.request.remote.host}", 0)
	b.ReportAllocs()
	for b.Loop() {
		if k.resolve(r) != "203.0.113.7" {
			b.Fatal("wrong key")
		}
	}
}

// benchRateLimit provisions a handler on the memory store, as Caddy would.
func benchRateLimit(b *testing.B, zone RateLimitZone) (*EdgeRateLimit, *http.Request) {
	return benchRateLimitOn(b, nil, &EdgeRateLimit{Zones: []*RateLimitZone{&zone}})
}

// benchRateLimitOn provisions h, as Caddy would, on the ha app's store
// (storeJSON, the memory store when nil).
func benchRateLimitOn(b *testing.B, storeJSON json.RawMessage, h *EdgeRateLimit) (*EdgeRateLimit, *http.Request) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	app := &HAApp{StoreRaw: storeJSON}
	if err := app.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { app.Cleanup() })
	h.setDefaults()
	b.Cleanup(func() { h.Cleanup() })
	if err := h.provisionZones(ctx, app.ref.shared); err != nil {
		b.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "http://example.com/", nil)
	r.RemoteAddr = "203.0.113.7:54321"
	return h, r
}

// BenchmarkRateLimitMemoryDecision is a request's decision in the memory
// store: key, counter, decision. Goal: no allocation.
func BenchmarkRateLimitMemoryDecision(b *testing.B) {
	for _, sliding := range []bool{false, true} {
		b.Run(map[bool]string{false: "fixed", true: "sliding"}[sliding], func(b *testing.B) {
			h, r := benchRateLimit(b, RateLimitZone{Name: "z", Key: "{http.request.remote.host}", Events: 1 << 40,
				Window: caddy.Duration(time.Minute), Sliding: sliding})
			b.ReportAllocs()
			for b.Loop() {
				if d := h.decide(r.Context(), r, h.zones[0], h.zones[0].key.resolve(r), time.Now()); !d.Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}

// nopWriter is a ResponseWriter that keeps nothing but its header map.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkRateLimitMemoryRequest is the whole handler on the memory store,
// with the RateLimit fields written.
func BenchmarkRateLimitMemoryRequest(b *testing.B) {
	h, r := benchRateLimit(b, RateLimitZone{Name: "z", Key: "{http.request.remote.host}", Events: 1 << 40, Window: caddy.Duration(time.Minute)})
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := &nopWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRateLimitRedisRequest is the whole handler on a Redis store
// (a real redis-server on loopback) under a limit far above the load, from
// concurrent requests of one client: leased (the default: a store call per
// lease, reported as store-calls/op) against counted (leases off: a store
// call per request, batched with the concurrent ones).
func BenchmarkRateLimitRedisRequest(b *testing.B) {
	srv := redistest.Start(b)
	for _, leases := range []bool{true, false} {
		b.Run(map[bool]string{true: "leased", false: "counted"}[leases], func(b *testing.B) {
			zone := &RateLimitZone{Name: "z", Key: "{http.request.remote.host}", Events: 1 << 40, Window: caddy.Duration(time.Minute)}
			h, r := benchRateLimitOn(b, json.RawMessage(`{"backend":"redis","addresses":["`+srv.Addr+`"]}`),
				&EdgeRateLimit{Zones: []*RateLimitZone{zone}, NoLeases: !leases, StoreTimeout: caddy.Duration(5 * time.Second)})
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			callsBefore := observations(b, h.zones[0].metrics.latency)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &nopWriter{h: http.Header{}}
				for pb.Next() {
					if err := h.ServeHTTP(w, r, next); err != nil || w.h.Get("Retry-After") != "" {
						b.Fatal("refused or failed:", err)
					}
				}
			})
			b.ReportMetric(float64(observations(b, h.zones[0].metrics.latency)-callsBefore)/float64(b.N), "store-calls/op")
		})
	}
}

// observations is how many values the histogram o has observed.
func observations(t testing.TB, o prometheus.Observer) float64 {
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return float64(m.GetHistogram().GetSampleCount())
}

// The Redis store works on Redis Cluster (a sliding zone reads its slots in
// one hash slot) and through Sentinel.
func TestRateLimitOnRedisClusterAndSentinel(t *testing.T) {
	cluster := redistest.StartCluster(t)
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "ha-master")
	for name, option := range map[string]string{
		"cluster":  "ha {\n\t\tstore redis {\n\t\t\taddress " + cluster.Addr + "\n\t\t\tcluster\n\t\t}\n\t}",
		"sentinel": "ha {\n\t\tstore redis {\n\t\t\taddress " + sentinel.Addr + "\n\t\t\tmaster_name ha-master\n\t\t}\n\t}",
	} {
		t.Run(name, func(t *testing.T) {
			tc := startCaddy(t, nil, option, `edge_rate_limit {
		zone sliding {
			key {http.request.remote.host}
			events 5
			window 1h
			sliding
		}
		on_store_error deny
		store_timeout 5s
	}
	respond "ok"`)
			statuses := map[int]int{}
			for i := 0; i < 8; i++ {
				statuses[send(t, "GET", tc.url("/")).status]++
			}
			if statuses[200] != 5 || statuses[429] != 3 {
				t.Fatalf("answers by status: %v, want 5 allowed and 3 limited", statuses)
			}
		})
	}
}

// The Redis store's settings that only adapting can check (the rest are
// in testdata/caddyfile_adapt): its CA file is read, and Redis Cluster has
// only db 0.
func TestRedisStoreConfig(t *testing.T) {
	caFile, _ := testPKI(t)
	adapt := func(store string) error {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\tha {\n\t\tstore redis {\n"+store+"\n\t\t}\n\t}\n}\n"), nil)
		return err
	}
	if err := adapt("\t\t\taddress 10.0.0.1:6379\n\t\t\ttls {\n\t\t\t\tca " + caFile + "\n\t\t\t}"); err != nil {
		t.Errorf("a CA file: %v", err)
	}
	if err := adapt("\t\t\taddress 10.0.0.1:6379\n\t\t\ttls {\n\t\t\t\tca /nonexistent.pem\n\t\t\t}"); err == nil || !strings.Contains(err.Error(), "nonexistent.pem") {
		t.Errorf("a missing CA file: %v", err)
	}
	if err := adapt("\t\t\taddress 10.0.0.1:6379\n\t\t\tdb 3\n\t\t\tcluster"); err == nil || !strings.Contains(err.Error(), "only db 0") {
		t.Errorf("db with cluster: %v", err)
	}
}

// A request that counts in several zones waits for a hung store
// store_timeout at most in all, not store_timeout per zone.
func TestRateLimitOneDeadlineForAllZones(t *testing.T) {
	const timeout, margin = 200 * time.Millisecond, 250 * time.Millisecond
	srv := redistest.Start(t)
	var zones strings.Builder
	for _, name := range []string{"one", "two", "three"} {
		fmt.Fprintf(&zones, "zone deadline-%s {\n\t\t\tkey {http.request.remote.host}\n\t\t\tevents 100\n\t\t\twindow 1h\n\t\t}\n\t\t", name)
	}
	tc := startCaddy(t, nil, redisOption(srv, "deadline:"), fmt.Sprintf(`edge_rate_limit {
		%s
		on_store_error allow
		store_timeout %s
	}
	respond "ok"`, zones.String(), timeout))
	if s := send(t, "GET", tc.url("/")).status; s != 200 {
		t.Fatalf("with Redis up: %d", s)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	ans := send(t, "GET", tc.url("/"))
	if ans.status != 200 || ans.took > timeout+margin {
		t.Fatalf("three zones with Redis paused: %d after %v, want 200 within %v", ans.status, ans.took, timeout+margin)
	}
}
