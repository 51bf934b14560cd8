// Command ratelimit measures, side by side in one run, what counting every
// request costs a Caddy that proxies to a trivial backend on loopback:
//
//	(i)   none: plain reverse_proxy, no limit
//	(ii)  memory: edge_rate_limit with its memory store (no ha global option)
//	(iii) redis: edge_rate_limit with the Redis store, on a redis-server this
//	      program starts on a free loopback port; it leases (the default)
//	(iii') redis-counted: the same with leases off, a store call per
//	      request, on a redis-server of its own
//	(iv)  postgres: edge_rate_limit with the PostgreSQL store (its defaults,
//	      the zone of (ii) and (iii)), on a throwaway PostgreSQL this
//	      program starts on a free loopback port (internal/pgtest: Debian's
//	      postgresql, fsync off, pg_stat_statements loaded when installed)
//	(v)   caddy-ratelimit: mholt/caddy-ratelimit's rate_limit in its default
//	      (local) mode, built once into bin/caddy-ratelimit; skipped if the
//	      module cannot be fetched or built
//
// wrk loads each contender in turn, interleaved within each round (i, ii,
// iii, iv, v, i, ii, ...) so that machine noise spreads over all of them.
// The limits are far above what the load reaches, so no request is refused
// and what differs is the cost of counting; every run is checked for
// non-2xx responses and socket errors. It reports per contender the median
// req/s and p99 latency over rounds and the median, over rounds, of its
// req/s as a share of (i)'s in the same round, next to the goals (memory
// >= 95%, Redis >= 80%, PostgreSQL >= 70%).
//
// For each Redis it also reads INFO commandstats around each run: commands,
// transactions (EXEC) and round trips (Redis's read events) per request.
//
// For PostgreSQL it reads, around each run:
//   - statements per request: the difference of pg_stat_statements' calls,
//     summed over every statement run in the database but the probe's own
//     (those reading pg_stat_statements), so the store's health checks
//     (SELECT 1, SELECT now()) too; without pg_stat_statements the figure
//     is left out, with a note.
//   - round trips per request: the difference of the TCP data segments
//     (those with a payload) PostgreSQL received on its connections, but
//     the probe's own, from tcp_info's data_segs_in as ss -i (iproute2)
//     reads it. The store writes each batch of pipelined statements (each
//     with its Sync) in one write and then waits for the answers, and a
//     write up to the loopback MSS (64 KB, far more than a batch of 128
//     statements) is one segment: a segment is a round trip. Checked
//     against the store alone (TestSegmentsAreRoundTrips): a call at a
//     time, one segment each; 50 concurrent callers, as many segments as
//     pool acquisitions (one per batch) plus each new connection's
//     startup and Prepare. A connection that closed during a run would be
//     missed (the pool keeps its own). Not
//     xact_commit from pg_stat_database: every statement is its own
//     transaction there, so it counts statements, and backends report it
//     up to 10 s late. Without ss the figure is left out, with a note.
//   - PostgreSQL's processor time per request: the user and system time
//     of the server's processes (the postmaster, its backends and
//     background processes, the children it reaped), from /proc. On a
//     machine whose cores PostgreSQL shares with Caddy and wrk, it is
//     what the database takes from them.
//
// For (ii), (iii) and (iv) it reads edge_rate_limit's metrics from
// /metrics on a per-instance admin port (wrkbench.RateLimitProbe): its
// store calls per request (the decisions that asked the store: one per
// lease on Redis and PostgreSQL, whose leases spend the limit far above
// the load in a store call per 1/16 of what is left; one per request on
// the memory store, which never leases), and its fallback decisions:
// requests decided without the store (store_timeout missed) would make the
// store look cheaper than it is, so they are flagged.
//
// caddy-ratelimit keeps one timestamp (24 bytes) per allowed event of a
// window in a ring, so its zone allows 1,000,000 events per 1s (24 MB)
// rather than 100,000,000 per 1m (2.4 GB); both are far above the load.
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
)

var (
	rlBin    = flag.String("caddy-ratelimit", "bin/caddy-ratelimit", "Caddy with mholt/caddy-ratelimit; built there if missing")
	redisBin = flag.String("redis-server", "redis-server", "redis-server binary")
)

func main() {
	var redisAddrs [2]string // set once redis-server runs: for redis, redis-counted
	var postgresURL string   // set once PostgreSQL runs
	b := &wrkbench.Bench{
		Name: "ratelimit",
		Title: []string{
			"Cost of counting requests in Caddy: req/s and p99 latency through Caddy to a",
			"trivial backend (200, 2-byte body) on loopback, with limits far above the load",
			"so that nothing is refused. Contenders run interleaved within each round.",
		},
		CostOf:     "counting",
		Contenders: contenders(&redisAddrs, &postgresURL),
		Prepare: func(dir string, selected []*wrkbench.Contender) ([]string, error) {
			return prepare(dir, selected, &redisAddrs, &postgresURL)
		},
	}
	b.DefineFlags()
	b.Main()
}

// The goals: req/s of a contender as a share of (i)'s in the same round.
const (
	memoryGoal   = 0.95
	redisGoal    = 0.80
	postgresGoal = 0.70
)

func contenders(redisAddrs *[2]string, postgresURL *string) []*wrkbench.Contender {
	return []*wrkbench.Contender{
		{Name: "none", Label: "(i) plain reverse_proxy", Config: ourConfig("", noLimit)},
		{Name: "memory", Label: "(ii) edge_rate_limit, memory store", Config: ourConfig("", leased),
			Handler: "edge_rate_limit", AdminEndpoint: true, Goal: memoryGoal},
		{Name: "redis", Label: "(iii) edge_rate_limit, Redis store (leases, the default)",
			Config: func(listen, admin, backend string) string {
				return ourConfig(wrkbench.HARedis(redisAddrs[0]), leased)(listen, admin, backend)
			},
			Handler: "edge_rate_limit", AdminEndpoint: true, Goal: redisGoal},
		{Name: "redis-counted", Label: "(iii') the same with leases off: a store call per request, on a Redis of its own",
			Config: func(listen, admin, backend string) string {
				return ourConfig(wrkbench.HARedis(redisAddrs[1]), counted)(listen, admin, backend)
			},
			Handler: "edge_rate_limit", AdminEndpoint: true, Goal: redisGoal},
		// The same zone as (ii) and (iii). A Caddy with the PostgreSQL store
		// has edge_rate_limit too.
		{Name: "postgres", Label: "(iv) edge_rate_limit, PostgreSQL store (leases, the default)",
			Config: func(listen, admin, backend string) string {
				return ourConfig(haPostgres(*postgresURL), leased)(listen, admin, backend)
			},
			Handler: "ha.stores.postgres", AdminEndpoint: true, Goal: postgresGoal},
		{Name: "caddy-ratelimit", Label: "(v) mholt/caddy-ratelimit", Bin: func() string { return *rlBin }, Config: caddyRatelimitConfig},
	}
}

// How a contender limits: not at all, with edge_rate_limit's defaults
// (leases from a shared store), or with leases off.
const (
	noLimit = iota
	leased
	counted
)

// ourConfig is the custom Caddy's Caddyfile; ha is the ha global option's
// block ("" for the memory store, the default).
func ourConfig(ha string, limit int) func(listen, admin, backend string) string {
	return func(listen, admin, backend string) string {
		site := fmt.Sprintf("\treverse_proxy %s\n", backend)
		leases := ""
		if limit == counted {
			leases = "\t\tleases off\n"
		}
		if limit != noLimit {
			site = "\tedge_rate_limit {\n\t\tzone all {\n\t\t\tkey {http.request.remote.host}\n\t\t\tevents 100000000\n\t\t\twindow 1m\n\t\t}\n" + leases + "\t}\n" + site
		}
		return wrkbench.Caddyfile(listen, admin, ha, site)
	}
}

func caddyRatelimitConfig(listen, _, backend string) string {
	return fmt.Sprintf(`{
	admin off
	persist_config off
	log {
		level ERROR
	}
	order rate_limit before basic_auth
}
:%s {
	bind 127.0.0.1
	rate_limit {
		zone all {
			key {remote_host}
			events 1000000
			window 1s
		}
	}
	reverse_proxy %s
}
`, wrkbench.Port(listen), backend)
}

// redisReport is what the Redis contender's probe reports: transactions
// (MULTI/EXEC) per request too.
var redisReport = wrkbench.RedisReport{
	Transactions: true,
	Explain: []string{
		"(INFO commandstats deltas over each run; round trips are Redis's read events, INFO stats",
		"total_reads_processed: concurrent requests' transactions share one; the bench's own INFO calls are left out)",
	},
}

// prepare starts redis-server for the Redis store and PostgreSQL for the
// PostgreSQL store, and builds caddy-ratelimit, skipping the contenders it
// cannot serve, and gives the edge_rate_limit contenders their probes:
// fallback decisions, for the Redis store Redis's commands too, and for
// the PostgreSQL store its statements and round trips.
func prepare(dir string, selected []*wrkbench.Contender, redisAddrs *[2]string, postgresURL *string) ([]string, error) {
	var notes []string
	for i, name := range []string{"redis", "redis-counted"} {
		var n []string
		redisAddrs[i], n = wrkbench.PrepareRedis(dir, *redisBin, name, selected, redisReport)
		notes = append(notes, n...)
	}
	var pgNotes []string
	*postgresURL, pgNotes = preparePostgres("postgres", selected)
	notes = append(notes, pgNotes...)
	for _, c := range selected {
		if c.Skipped != "" {
			continue
		}
		switch c.Name {
		case "memory":
			c.Probe = &wrkbench.RateLimitProbe{Contender: c}
		case "redis", "redis-counted", "postgres":
			// The store's probe first: its reads after a run may fail it.
			c.Probe = wrkbench.Probes{c.Probe, &wrkbench.RateLimitProbe{Contender: c}}
		case "caddy-ratelimit":
			if err := ensureCaddyRatelimit(); err != nil {
				c.Skipped = err.Error()
			}
		}
	}
	return notes, nil
}

// ensureCaddyRatelimit builds Caddy v2.11.9 with mholt/caddy-ratelimit
// into *rlBin unless it is there from an earlier run.
func ensureCaddyRatelimit() error {
	if _, err := os.Stat(*rlBin); err == nil {
		fmt.Printf("caddy-ratelimit: using %s (%s; delete it to rebuild)\n", *rlBin, moduleVersions(*rlBin))
		return nil
	}
	target, err := filepath.Abs(*rlBin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "caddy-ratelimit-build")
	if err != nil {
		return err
	}
	removeDir := func() { os.RemoveAll(dir) }
	defer wrkbench.AddCleanup(removeDir)()
	defer removeDir()
	fmt.Println("caddy-ratelimit: building", *rlBin, "(once; cached for later runs)")
	// Without a go line the whole module graph of Caddy is fetched (no
	// pruning before go 1.17): minutes, not seconds.
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION: %v", err)
	}
	goMod := fmt.Sprintf("module tmp\n\ngo %s\n\nrequire github.com/caddyserver/caddy/v2 v2.11.9\n",
		strings.TrimPrefix(strings.TrimSpace(string(goVersion)), "go"))
	mainGo := `package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/mholt/caddy-ratelimit"
)

func main() {
	caddycmd.Main()
}
`
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainGo), 0o644); err != nil {
		return err
	}
	// Written beside the target and renamed: a failed build leaves no binary.
	partial := target + ".partial"
	defer os.Remove(partial)
	for _, step := range []struct {
		args    []string
		timeout time.Duration
	}{
		{[]string{"get", "github.com/mholt/caddy-ratelimit@latest"}, 3 * time.Minute},
		{[]string{"mod", "tidy"}, 3 * time.Minute},
		{[]string{"build", "-o", partial, "."}, 10 * time.Minute},
	} {
		ctx, cancel := context.WithTimeout(wrkbench.Interrupted(), step.timeout)
		cmd := exec.CommandContext(ctx, "go", step.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err != nil {
			why := strings.ReplaceAll(wrkbench.LastLines(string(out), 2), "go: ", "")
			if why == "" || timedOut {
				why = fmt.Sprintf("%v after %v", err, step.timeout)
			}
			return fmt.Errorf("go %s: %s", step.args[0], why)
		}
	}
	if err := os.Rename(partial, target); err != nil {
		return err
	}
	fmt.Printf("caddy-ratelimit: built %s (%s)\n", *rlBin, moduleVersions(target))
	return nil
}

// moduleVersions names the caddy and caddy-ratelimit versions built into bin.
func moduleVersions(bin string) string {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return "versions unknown"
	}
	var vs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "dep" && (f[1] == "github.com/caddyserver/caddy/v2" || f[1] == "github.com/mholt/caddy-ratelimit") {
			vs = append(vs, f[1]+" "+f[2])
		}
	}
	if len(vs) == 0 {
		return "versions unknown"
	}
	return strings.Join(vs, ", ")
}
