// Command seed measures, side by side in one run, the seed's deployment
// against stock Caddy, both proxying to a trivial backend on loopback
// (which answers GET /healthz/leader as the cluster's leader):
//
//	none:         stock Caddy: reverse_proxy to the backend, its defaults
//	leader:       reverse_proxy with lb_policy leader alone
//	seed-counted: the seed's deployment (protocols h1, reload_handoff,
//	              forwarded, edge_rate_limit on Redis with a limit never
//	              reached, lb_policy leader, transport pinned) with
//	              edge_rate_limit's leases off: a Redis call per request
//	seed:         the seed's deployment as shipped (leases on, the default)
//
// wrk loads the contenders in turn, interleaved within each round (none,
// leader, seed-counted, seed, none, ...), on kept-alive connections (-t2
// -c64 by default), so that machine noise spreads over all of them; every
// run is checked for non-2xx responses and socket errors. It reports per
// contender the median req/s and p99 latency over rounds and the median,
// over rounds, of its req/s as a share of stock's in the same round,
// against the goal: seed >= 95% of stock. Each seed contender has a Redis
// of its own; around each of its runs the bench reads Redis's commands,
// transactions and round trips per request, and edge_rate_limit's store
// calls per request and fallback decisions from its metrics.
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"flag"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
)

var redisBin = flag.String("redis-server", "redis-server", "redis-server binary")

// seedGoal is the least req/s the seed's deployment is to keep as a share
// of stock Caddy's in the same round.
const seedGoal = 0.95

func main() {
	var redisAddrs [2]string // set once redis-server runs: for seed-counted, seed
	b := &wrkbench.Bench{
		Name: "seed",
		Title: []string{
			"The seed's deployment beside stock Caddy: req/s and p99 latency through Caddy to a",
			"trivial backend (200, 2-byte body) on loopback, kept-alive connections, no request",
			"refused. Contenders run interleaved within each round.",
		},
		CostOf:       "the seed's deployment",
		CaddyPackage: "./cmd/caddy",
		Contenders: []*wrkbench.Contender{
			{Name: wrkbench.Baseline, Label: "stock Caddy: reverse_proxy, its defaults", Config: func(listen, admin, backend string) string {
				return wrkbench.Caddyfile(listen, admin, "", "\treverse_proxy "+backend+"\n")
			}},
			{Name: "leader", Label: "reverse_proxy with lb_policy leader alone", Handler: "http.reverse_proxy.selection_policies.leader",
				Config: func(listen, admin, backend string) string {
					return wrkbench.Caddyfile(listen, admin, "", "\treverse_proxy "+backend+" {\n\t\tlb_policy leader\n\t}\n")
				}},
			{Name: "seed-counted", Label: "the seed's deployment, edge_rate_limit's leases off (a Redis call per request)",
				Handler: "edge_rate_limit", AdminEndpoint: true, Config: seedConfig(&redisAddrs[0], "\t\tleases off\n")},
			{Name: "seed", Label: "the seed's deployment (edge_rate_limit leasing, the default)",
				Handler: "edge_rate_limit", AdminEndpoint: true, Goal: seedGoal, Config: seedConfig(&redisAddrs[1], "")},
		},
		Prepare: func(dir string, selected []*wrkbench.Contender) ([]string, error) {
			var notes []string
			for i, name := range []string{"seed-counted", "seed"} {
				var n []string
				redisAddrs[i], n = wrkbench.PrepareRedis(dir, *redisBin, name, selected, wrkbench.RedisReport{Transactions: true})
				notes = append(notes, n...)
			}
			for _, c := range selected {
				if c.Skipped == "" && c.Probe != nil {
					// Redis's probe first: its reads after a run may fail it.
					c.Probe = wrkbench.Probes{c.Probe, &wrkbench.RateLimitProbe{Contender: c}}
				}
			}
			return notes, nil
		},
	}
	b.DefineFlags()
	// Other defaults than the common flags': wrk -t2 -c64, 5 rounds of 5s.
	for name, value := range map[string]string{"connections": "64", "rounds": "5", "duration": "5s"} {
		f := flag.Lookup(name)
		f.Value.Set(value)
		f.DefValue = value
	}
	b.Main()
}

// seedConfig is the seed's deployment's Caddyfile on the Redis at
// *redisAddr, read when the contender starts; limitOptions are more lines
// of edge_rate_limit's block.
func seedConfig(redisAddr *string, limitOptions string) func(listen, admin, backend string) string {
	return func(listen, admin, backend string) string {
		globals, site := wrkbench.SeedDeployment(*redisAddr, backend, limitOptions)
		return wrkbench.Caddyfile(listen, admin, globals, site)
	}
}
