// Command pinned measures, side by side in one run, what transport pinned
// (HAProxy's http-reuse never: each client connection gets an upstream
// connection of its own, for Windows SSO) costs a Caddy that proxies to a
// trivial backend on loopback, against stock Caddy's transport http, which
// pools upstream connections and shares them among clients:
//
//	none:   reverse_proxy with transport http (pooled; the baseline)
//	pinned: reverse_proxy with transport pinned (max_pinned and
//	        max_pinned_per_client 4096, far above the load, so no request
//	        is refused)
//
// Every request carries NTLM credentials (a NEGOTIATE message, which the
// trivial backend ignores), so that each of wrk's connections is pinned:
// transport pinned shares upstream connections among client connections
// that never sent any, as transport http does.
//
// Both sites serve HTTP/1.1 only (servers { protocols h1 }), as transport
// pinned wants, so that the transport is the only difference. It measures
// three scenarios, one after the other, each a side-by-side bench of its
// own:
//
//	(1)  kept-alive clients: wrk's connections (-connections, 32) stay
//	     open, so each pin dials its upstream connection once and reuses
//	     it, and none's pool keeps as many idle upstream connections as
//	     there are clients (stock Caddy's keepalive_idle_conns_per_host is
//	     32): what differs is the work per request of finding the pin and
//	     its transport. Goal: pinned keeps >= 90% of none's req/s.
//	(1b) the same with more kept-alive clients than that
//	     (-beyond-pool-connections, 64): none's pool closes the upstream
//	     connections beyond 32 as they go idle and dials again when the
//	     load needs them, where each pin keeps its own. Same goal.
//	(2)  a new client connection per request: every request carries
//	     Connection: close, so Caddy closes wrk's connection after each
//	     answer and wrk opens another (-newconn-connections, 32, at a
//	     time). pinned dials an upstream connection for every client
//	     connection and closes it with the client's, where none reuses its
//	     pool: the ratio is the cost of a new pin. Reported, without a
//	     goal.
//
// Within each scenario wrk loads the contenders in turn, interleaved within
// each round (none, pinned, none, ...) so that machine noise spreads over
// both; every run is checked for non-2xx responses and socket errors. Each
// scenario reports per contender the median req/s and p99 latency over
// rounds and the median, over rounds, of pinned's req/s as a share of
// none's in the same round. The defaults (4s runs, 3 rounds) keep the whole
// run under a minute and a half.
//
// The memory a pinned connection holds is measured by BenchmarkPinnedMemory
// (go test -run '^$' -bench . -benchmem ./bench/pinned), on a pinning.Pool
// directly.
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"flag"
	"fmt"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
)

var (
	beyondPoolConnections = flag.Int("beyond-pool-connections", 64,
		"wrk connections of scenario (1b), kept alive, more than stock Caddy's 32 idle upstream connections; 0: skip it")
	newConnConnections = flag.Int("newconn-connections", 32,
		"wrk connections of scenario (2), each request on a new one; 0: skip it")
)

// keptAliveGoal is the least req/s pinned is to keep, with kept-alive
// clients, as a share of none's in the same round.
const keptAliveGoal = 0.90

// pinnedID is the module the pinned contender needs in the custom Caddy.
const pinnedID = "http.reverse_proxy.transport.pinned"

func main() {
	keptAlive := &wrkbench.Bench{
		Name: "pinned",
		Title: []string{
			"Cost of transport pinned in Caddy, (1) kept-alive clients: req/s and p99 latency",
			"through Caddy (protocols h1) to a trivial backend (200, 2-byte body) on loopback,",
			"wrk's connections kept alive. Contenders run interleaved within each round.",
		},
		CostOf:     "the pinned transport",
		Headers:    []string{credentialsHeader},
		Contenders: contenders(keptAliveGoal),
	}
	beyondPool := &wrkbench.Bench{
		Name: "pinned-beyond-pool",
		Title: []string{
			"Cost of transport pinned in Caddy, (1b) more kept-alive clients than stock Caddy keeps",
			"idle upstream connections (32): req/s and p99 latency through Caddy (protocols h1) to",
			"the same trivial backend. Contenders run interleaved within each round.",
		},
		CostOf:     "the pinned transport",
		Headers:    []string{credentialsHeader},
		Contenders: contenders(keptAliveGoal),
	}
	newConn := &wrkbench.Bench{
		Name: "pinned-newconn",
		Title: []string{
			"Cost of transport pinned in Caddy, (2) a new client connection per request: req/s",
			"and p99 latency through Caddy (protocols h1) to the same trivial backend, every",
			"request with Connection: close, so that wrk opens a new connection for each.",
			"Contenders run interleaved within each round.",
		},
		CostOf:     "the pinned transport",
		Headers:    []string{credentialsHeader, "Connection: close"},
		Contenders: contenders(0),
	}
	keptAlive.DefineFlags()
	// Three scenarios of two contenders each: shorter runs than the other
	// benches' keep the whole run short.
	setDefault("duration", "4s")
	setDefault("connections", "32")
	flag.Lookup("connections").Usage = "wrk connections of scenario (1), kept alive"

	// Main returns once its bench is done and everything it started is
	// stopped (on an error or an interrupt it exits instead), so each later
	// scenario starts afresh, with the same flags but its own connections.
	keptAlive.Main()
	for _, s := range []struct {
		bench       *wrkbench.Bench
		connections int
	}{{beyondPool, *beyondPoolConnections}, {newConn, *newConnConnections}} {
		if s.connections == 0 {
			continue
		}
		fmt.Println()
		b := s.bench
		b.CaddyBin, b.WrkBin = keptAlive.CaddyBin, keptAlive.WrkBin
		b.Threads, b.Connections = keptAlive.Threads, s.connections
		b.Duration, b.Warmup = keptAlive.Duration, keptAlive.Warmup
		b.Rounds, b.Only = keptAlive.Rounds, keptAlive.Only
		b.Main()
	}
}

// contenders returns a scenario's contenders: pinned with goal (0: none)
// against none.
func contenders(goal float64) []*wrkbench.Contender {
	return []*wrkbench.Contender{
		{Name: "none", Label: "stock reverse_proxy, transport http (pooled upstream connections)", Config: config(pooled)},
		{Name: "pinned", Label: "transport pinned (an upstream connection per client connection)",
			Config: config(pinned), Handler: pinnedID, Goal: goal},
	}
}

// The contenders' transports, as reverse_proxy's transport subdirective.
// wrk's connections all come from one address.
const (
	pooled = "transport http"
	pinned = "transport pinned {\n\t\t\tmax_pinned 4096\n\t\t\tmax_pinned_per_client 4096\n\t\t}"
)

// credentialsHeader pins a connection: an NTLM NEGOTIATE message.
const credentialsHeader = "Authorization: NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw=="

// config returns a contender's Caddyfile: reverse_proxy with transport on
// a server that speaks HTTP/1.1 only.
func config(transport string) func(listen, admin, backend string) string {
	return func(listen, admin, backend string) string {
		site := fmt.Sprintf("\treverse_proxy %s {\n\t\t%s\n\t}\n", backend, transport)
		return wrkbench.Caddyfile(listen, admin, "\tservers {\n\t\tprotocols h1\n\t}\n", site)
	}
}

// setDefault changes the default of a flag DefineFlags defined, in -help
// too.
func setDefault(name, value string) {
	f := flag.Lookup(name)
	if err := f.Value.Set(value); err != nil {
		panic(err)
	}
	f.DefValue = value
}
