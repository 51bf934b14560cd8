// Command ratelimit measures, side by side in one run, what counting every
// request costs a Caddy that proxies to a trivial backend on loopback:
//
//	(i)   none: plain reverse_proxy, no limit
//	(ii)  memory: edge_rate_limit with its memory store (no ha global option)
//	(iii) redis: edge_rate_limit with the Redis store, on a redis-server this
//	      program starts on a free loopback port
//	(iv)  caddy-ratelimit: mholt/caddy-ratelimit's rate_limit in its default
//	      (local) mode, built once into bin/caddy-ratelimit; skipped if the
//	      module cannot be fetched or built
//
// wrk loads each contender in turn, interleaved within each round (i, ii,
// iii, iv, i, ii, ...) so that machine noise spreads over all of them. The
// limits are far above what the load reaches, so no request is refused and
// what differs is the cost of counting; every run is checked for non-2xx
// responses and socket errors. It reports per contender the median req/s
// and p99 latency over rounds and the median, over rounds, of its req/s as
// a share of (i)'s in the same round, next to the goals (memory >= 95%,
// Redis >= 80%). For Redis it also reads INFO commandstats around each run:
// commands, transactions (EXEC) and round trips (read events) per request. For (ii) and (iii) it reads
// edge_rate_limit's fallback decisions from /metrics on a per-instance
// admin port: requests decided without the store (store_timeout missed)
// would make the store look cheaper than it is, so they are flagged.
//
// caddy-ratelimit keeps one timestamp (24 bytes) per allowed event of a
// window in a ring, so its zone allows 1,000,000 events per 1s (24 MB)
// rather than 100,000,000 per 1m (2.4 GB); both are far above the load.
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	caddyBin    = flag.String("caddy", "bin/caddy", "the custom Caddy binary (make build)")
	rlBin       = flag.String("caddy-ratelimit", "bin/caddy-ratelimit", "Caddy with mholt/caddy-ratelimit; built there if missing")
	wrkBin      = flag.String("wrk", "wrk", "wrk binary (apt-get install wrk)")
	redisBin    = flag.String("redis-server", "redis-server", "redis-server binary")
	threads     = flag.Int("threads", 2, "wrk threads")
	connections = flag.Int("connections", 50, "wrk connections")
	duration    = flag.Duration("duration", 10*time.Second, "length of each measured wrk run (whole seconds)")
	warmup      = flag.Duration("warmup", time.Second, "unmeasured wrk run per contender before the first round (0: none)")
	rounds      = flag.Int("rounds", 3, "rounds; each runs every contender once")
	only        = flag.String("only", "", "comma-separated contenders to run (none,memory,redis,caddy-ratelimit)")
)

// backendEnv, when set in the environment, makes this program the trivial
// backend listening on its value: a process of its own, so that its GC and
// scheduling do not share the bench's.
const backendEnv = "RATELIMIT_BENCH_BACKEND"

// The goals: req/s of a contender as a share of (i)'s in the same round.
var goals = map[string]float64{"memory": 0.95, "redis": 0.80}

// contender is one Caddy configuration under test.
type contender struct {
	name   string
	label  string
	bin    func() string
	config func(listen, admin, backend string) string
	redis  bool // read INFO commandstats around each run
	// metrics: read the handler's fallback counters from the admin
	// endpoint's /metrics around each run
	metrics bool

	skipped    string // why it does not run, if it does not
	url        string
	metricsURL string
	runs       []run // one per round that succeeded
}

// run is one measured wrk run.
type run struct {
	round        int
	reqPerSec    float64
	p99          time.Duration
	requests     int64
	non2xx       int64
	socketErrors string           // wrk's "Socket errors:" line, if any
	redisCalls   map[string]int64 // INFO commandstats calls during the run
	redisReads   int64            // INFO stats total_reads_processed during the run: round trips
	// fallbacks are the decisions on_store_error took because the store
	// missed store_timeout or was known to be down: requests not counted
	// in the store. -1 when unknown.
	fallbacks int64
}

// ourConfig is the custom Caddy's Caddyfile; ha is the ha global option's
// block ("" for the memory store, the default).
func ourConfig(ha string, limit bool) func(listen, admin, backend string) string {
	return func(listen, admin, backend string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "{\n\tadmin %s\n\tpersist_config off\n\tlog {\n\t\tlevel ERROR\n\t}\n", admin)
		b.WriteString(ha)
		fmt.Fprintf(&b, "}\n:%s {\n\tbind 127.0.0.1\n", port(listen))
		if limit {
			b.WriteString("\tedge_rate_limit {\n\t\tzone all {\n\t\t\tkey {http.request.remote.host}\n\t\t\tevents 100000000\n\t\t\twindow 1m\n\t\t}\n\t}\n")
		}
		fmt.Fprintf(&b, "\treverse_proxy %s\n}\n", backend)
		return b.String()
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
`, port(listen), backend)
}

func contenders(redisAddr *string) []*contender {
	ours := func() string { return *caddyBin }
	return []*contender{
		{name: "none", label: "(i) plain reverse_proxy", bin: ours, config: ourConfig("", false)},
		{name: "memory", label: "(ii) edge_rate_limit, memory store", bin: ours, config: ourConfig("", true), metrics: true},
		{name: "redis", label: "(iii) edge_rate_limit, Redis store", bin: ours, redis: true, metrics: true,
			config: func(listen, admin, backend string) string {
				ha := fmt.Sprintf("\tha {\n\t\tstore redis {\n\t\t\taddress %s\n\t\t\tprefix bench:\n\t\t}\n\t}\n", *redisAddr)
				return ourConfig(ha, true)(listen, admin, backend)
			}},
		{name: "caddy-ratelimit", label: "(iv) mholt/caddy-ratelimit", bin: func() string { return *rlBin }, config: caddyRatelimitConfig},
	}
}

func main() {
	if addr := os.Getenv(backendEnv); addr != "" {
		serveBackend(addr)
		return
	}
	flag.Parse()
	if *rounds < 1 || *threads < 1 || *connections < *threads || *duration < time.Second {
		fmt.Fprintln(os.Stderr, "need -rounds >= 1, -threads >= 1, -connections >= -threads, -duration >= 1s")
		os.Exit(2)
	}
	var stop context.CancelFunc
	interrupted, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	finished := make(chan struct{})
	go func() {
		<-interrupted.Done()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			// bench did not return in time: stop what it started anyway.
			cleanup()
			os.Exit(130)
		}
	}()
	err := bench()
	cleanup()
	close(finished)
	switch {
	case interrupted.Err() != nil:
		fmt.Fprintln(os.Stderr, "ratelimit bench: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "ratelimit bench:", err)
		os.Exit(1)
	}
}

// interrupted ends on Ctrl-C or SIGTERM: every wait and every command the
// bench runs ends with it, then bench returns and main cleans up.
var interrupted = context.Background()

func bench() error {
	if _, err := exec.LookPath(*wrkBin); err != nil {
		return fmt.Errorf("wrk not found (apt-get install wrk): %v", err)
	}
	if _, err := os.Stat(*caddyBin); err != nil {
		return fmt.Errorf("build the custom Caddy first (make build): %v", err)
	}
	dir, err := os.MkdirTemp("", "ratelimit-bench")
	if err != nil {
		return err
	}
	addCleanup(func() { os.RemoveAll(dir) })

	var redisAddr string
	all := contenders(&redisAddr)
	var selected []*contender
	var wanted []string
	for _, w := range strings.Split(*only, ",") {
		if w = strings.TrimSpace(w); w != "" {
			wanted = append(wanted, w)
		}
	}
	for _, c := range all {
		if len(wanted) == 0 || slices.Contains(wanted, c.name) {
			selected = append(selected, c)
		}
	}
	for _, w := range wanted {
		if !slices.ContainsFunc(all, func(c *contender) bool { return c.name == w }) {
			return fmt.Errorf("-only: unknown contender %q (none,memory,redis,caddy-ratelimit)", w)
		}
	}

	// What each contender needs, before anything is measured.
	hasHandler, why := hasEdgeRateLimit()
	for _, c := range selected {
		switch {
		case (c.name == "memory" || c.name == "redis") && !hasHandler:
			c.skipped = why
		case c.name == "redis":
			addr, err := startRedis(dir)
			if err != nil {
				c.skipped = err.Error()
				continue
			}
			redisAddr = addr
		case c.name == "caddy-ratelimit":
			if err := ensureCaddyRatelimit(); err != nil {
				c.skipped = err.Error()
			}
		}
	}

	backend, err := startBackend(dir)
	if err != nil {
		return err
	}
	for _, c := range selected {
		if c.skipped != "" || interrupted.Err() != nil {
			continue
		}
		listen, admin := freeAddr(), "off"
		if c.metrics {
			// Its own admin endpoint, only to read /metrics between runs.
			admin = freeAddr()
			c.metricsURL = "http://" + admin + "/metrics"
		}
		cfg := filepath.Join(dir, c.name+".Caddyfile")
		if err := os.WriteFile(cfg, []byte(c.config(listen, admin, backend)), 0o644); err != nil {
			return err
		}
		p, err := startProcess(c.name, filepath.Join(dir, c.name+".log"), c.bin(), "run", "--config", cfg, "--adapter", "caddyfile")
		if err != nil {
			c.skipped = err.Error()
			continue
		}
		c.url = "http://" + listen + "/"
		if err := waitHTTP(c.url, p, 15*time.Second); err != nil {
			c.skipped = err.Error()
			p.stop()
		}
	}

	if err := interrupted.Err(); err != nil {
		return err
	}
	printHeader(selected, backend, redisAddr)
	var active []*contender
	for _, c := range selected {
		if c.skipped != "" {
			fmt.Printf("%s: skipped (%s)\n", c.name, c.skipped)
		} else {
			active = append(active, c)
		}
	}
	if len(active) == 0 {
		return errors.New("no contender could run")
	}

	var rdb *redis.Client
	if redisAddr != "" {
		rdb = redis.NewClient(&redis.Options{Addr: redisAddr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		defer rdb.Close()
	}

	if *warmup > 0 {
		// Unmeasured: the first seconds grow heaps and fill connection pools.
		for _, c := range active {
			if _, err := runWrk(c.url, *warmup); err != nil {
				if interrupted.Err() != nil {
					return interrupted.Err()
				}
				fmt.Printf("warm-up %s: %v\n", c.name, err)
			}
		}
	}
	fmt.Println()
	for round := 1; round <= *rounds; round++ {
		for _, c := range active {
			r, err := measure(c, rdb)
			if interrupted.Err() != nil {
				return interrupted.Err()
			}
			if err != nil {
				fmt.Printf("round %d/%d  %-16s failed: %v\n", round, *rounds, c.name, err)
				continue
			}
			r.round = round
			c.runs = append(c.runs, r)
			fmt.Printf("round %d/%d  %-16s %9.0f req/s  p99 %9v  %9d requests%s\n",
				round, *rounds, c.name, r.reqPerSec, r.p99, r.requests, runNotes(c, r))
		}
	}
	fmt.Println()
	printSummary(selected, active)
	return nil
}

// measure runs wrk once against c, reading Redis's counters around it.
func measure(c *contender, rdb *redis.Client) (run, error) {
	var before map[string]int64
	var readsBefore int64
	if c.redis {
		var err error
		if before, err = commandStats(rdb); err != nil {
			return run{}, fmt.Errorf("INFO commandstats: %v", err)
		}
		if readsBefore, err = readsProcessed(rdb); err != nil {
			return run{}, fmt.Errorf("INFO stats: %v", err)
		}
	}
	fallbacksBefore := fallbackDecisions(c.metricsURL)
	r, err := runWrk(c.url, *duration)
	if err != nil {
		return run{}, err
	}
	r.fallbacks = -1
	if fallbacksBefore >= 0 {
		if after := fallbackDecisions(c.metricsURL); after >= 0 {
			r.fallbacks = after - fallbacksBefore
		}
	}
	if c.redis {
		after, err := commandStats(rdb)
		if err != nil {
			return run{}, fmt.Errorf("INFO commandstats: %v", err)
		}
		readsAfter, err := readsProcessed(rdb)
		if err != nil {
			return run{}, fmt.Errorf("INFO stats: %v", err)
		}
		r.redisReads = readsAfter - readsBefore - 2 // the bench's own two INFO calls
		r.redisCalls = map[string]int64{}
		for cmd, n := range after {
			if d := n - before[cmd]; d > 0 {
				r.redisCalls[cmd] = d
			}
		}
	}
	return r, nil
}

func runNotes(c *contender, r run) string {
	var notes []string
	if c.redis && r.requests > 0 {
		notes = append(notes, fmt.Sprintf("%.2f Redis commands/req, %.2f transactions/req, %.2f round trips/req",
			float64(sum(r.redisCalls))/float64(r.requests), float64(r.redisCalls["exec"])/float64(r.requests),
			float64(r.redisReads)/float64(r.requests)))
	}
	if r.fallbacks > 0 {
		notes = append(notes, fmt.Sprintf("!! %d fallback decisions (not counted in the store)", r.fallbacks))
	}
	if r.non2xx > 0 {
		notes = append(notes, fmt.Sprintf("!! %d non-2xx responses", r.non2xx))
	}
	if r.socketErrors != "" {
		notes = append(notes, "!! socket errors: "+r.socketErrors)
	}
	if len(notes) == 0 {
		return ""
	}
	return "  " + strings.Join(notes, "  ")
}

func printHeader(selected []*contender, backend, redisAddr string) {
	fmt.Println("Cost of counting requests in Caddy: req/s and p99 latency through Caddy to a")
	fmt.Println("trivial backend (200, 2-byte body) on loopback, with limits far above the load")
	fmt.Println("so that nothing is refused. Contenders run interleaved within each round.")
	for _, c := range selected {
		fmt.Printf("  %-16s %s\n", c.name, c.label)
	}
	fmt.Printf("wrk: %d threads, %d connections, %v per run, %d rounds (warm-up %v); backend %s",
		*threads, *connections, wrkSeconds(*duration), *rounds, *warmup, backend)
	if redisAddr != "" {
		fmt.Printf("; redis-server %s", redisAddr)
	}
	fmt.Println()
	// Everything shares the machine: a busy one makes every figure noisy.
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average at start: %s (%d CPUs)\n", strings.Join(strings.Fields(string(load))[:3], " "), runtime.NumCPU())
	}
}

func printSummary(selected, active []*contender) {
	var base *contender
	for _, c := range active {
		if c.name == "none" {
			base = c
		}
	}
	fmt.Printf("%-16s %12s %10s %9s %8s %7s %s\n", "contender", "req/s (med)", "p99 (med)", "vs none", "goal", "", "errors (all rounds)")
	var warnings []string
	for _, c := range selected {
		if c.skipped != "" {
			fmt.Printf("%-16s skipped (%s)\n", c.name, c.skipped)
			continue
		}
		if len(c.runs) == 0 {
			fmt.Printf("%-16s no successful run\n", c.name)
			continue
		}
		var rps []float64
		var p99s []float64
		var non2xx, fallbacks int64
		var socket []string
		for _, r := range c.runs {
			rps = append(rps, r.reqPerSec)
			p99s = append(p99s, float64(r.p99))
			non2xx += r.non2xx
			fallbacks += max(0, r.fallbacks)
			if r.socketErrors != "" {
				socket = append(socket, r.socketErrors)
			}
		}
		ratioCol, goalCol, verdict := "-", "", ""
		if base != nil && c != base {
			if ratio, ok := pairedRatio(c, base); ok {
				ratioCol = fmt.Sprintf("%.1f%%", 100*ratio)
				if goal, ok := goals[c.name]; ok {
					goalCol = fmt.Sprintf(">= %.0f%%", 100*goal)
					verdict = "MISS"
					if ratio >= goal {
						verdict = "PASS"
					}
				}
			}
		}
		errCol := "none"
		if non2xx > 0 || len(socket) > 0 {
			errCol = fmt.Sprintf("!! non-2xx %d, socket errors in %d runs", non2xx, len(socket))
			warnings = append(warnings, fmt.Sprintf("%s: %d non-2xx responses, socket errors: %v: its figures do not measure counting alone", c.name, non2xx, socket))
		}
		if fallbacks > 0 {
			if errCol == "none" {
				errCol = ""
			} else {
				errCol += ", "
			}
			errCol += fmt.Sprintf("!! fallbacks %d", fallbacks)
			warnings = append(warnings, fmt.Sprintf("%s: %d requests were decided by on_store_error (the store missed store_timeout or was down), not counted in the store", c.name, fallbacks))
		}
		fmt.Printf("%-16s %12.0f %10v %9s %8s %7s %s\n", c.name, median(rps), time.Duration(median(p99s)).Round(time.Microsecond), ratioCol, goalCol, verdict, errCol)
	}
	if base == nil {
		fmt.Println("(no ratios: contender none did not run)")
	} else {
		fmt.Println("vs none: median over rounds of req/s / none's req/s in the same round")
	}
	for _, c := range active {
		if c.redis {
			printRedisBreakdown(c)
		}
	}
	for _, w := range warnings {
		fmt.Println("WARNING:", w)
	}
}

// pairedRatio is the median over rounds of c's req/s over base's in the
// same round: rounds are close in time, so machine drift cancels out.
func pairedRatio(c, base *contender) (float64, bool) {
	var ratios []float64
	for _, r := range c.runs {
		for _, b := range base.runs {
			if b.round == r.round && b.reqPerSec > 0 {
				ratios = append(ratios, r.reqPerSec/b.reqPerSec)
			}
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	return median(ratios), true
}

func printRedisBreakdown(c *contender) {
	total := map[string]int64{}
	var requests, reads int64
	for _, r := range c.runs {
		requests += r.requests
		reads += r.redisReads
		for cmd, n := range r.redisCalls {
			total[cmd] += n
		}
	}
	if requests == 0 {
		return
	}
	fmt.Printf("\n%s, all rounds: %d requests, %.2f Redis commands/req, %.2f transactions (EXEC)/req, %.2f round trips/req\n",
		c.name, requests, float64(sum(total))/float64(requests), float64(total["exec"])/float64(requests), float64(reads)/float64(requests))
	cmds := make([]string, 0, len(total))
	for cmd := range total {
		cmds = append(cmds, cmd)
	}
	sort.Slice(cmds, func(i, j int) bool { return total[cmds[i]] > total[cmds[j]] })
	fmt.Print("  per request:")
	for _, cmd := range cmds {
		if perReq := float64(total[cmd]) / float64(requests); perReq >= 0.001 {
			fmt.Printf("  %s %.3f", cmd, perReq)
		} else {
			fmt.Printf("  %s (%d calls in all)", cmd, total[cmd])
		}
	}
	fmt.Println("\n  (INFO commandstats deltas over each run; round trips are Redis's read events, INFO stats")
	fmt.Println("  total_reads_processed: concurrent requests' transactions share one; the bench's own INFO calls are left out)")
}

// readsProcessed returns Redis's count of read events (one per request
// batch a client sends), from INFO stats.
func readsProcessed(rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Second)
	defer cancel()
	text, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_reads_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no total_reads_processed")
}

// commandStats returns the calls of each command from INFO commandstats,
// without INFO itself (the bench's own).
func commandStats(rdb *redis.Client) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Second)
	defer cancel()
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	// cmdstat_incrby:calls=123,usec=456,usec_per_call=3.71,...
	stats := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", line, err)
				}
				stats[name] = n
			}
		}
	}
	delete(stats, "info")
	return stats, nil
}

// fallbackDecisions sums edge_rate_limit's fallback decisions counter at
// metricsURL; -1 when there is no URL or no such counter.
func fallbackDecisions(metricsURL string) int64 {
	if metricsURL == "" {
		return -1
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(metricsURL)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	const name = "caddy_ha_rate_limit_fallback_decisions_total"
	var total float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
			found = true
		}
	}
	if !found {
		return -1
	}
	return int64(total)
}

// runWrk runs wrk against url for d and parses its report.
func runWrk(url string, d time.Duration) (run, error) {
	ctx, cancel := context.WithTimeout(interrupted, d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, *wrkBin, "--latency", "-t", fmt.Sprint(*threads), "-c", fmt.Sprint(*connections),
		"-d", wrkSeconds(d), url)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return run{}, fmt.Errorf("wrk: %v: %s", err, lastLines(out.String(), 3))
	}
	return parseWrk(out.String())
}

func wrkSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int(d.Round(time.Second)/time.Second)))
}

var (
	reqPerSecRe = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	requestsRe  = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	non2xxRe    = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	socketRe    = regexp.MustCompile(`(?m)^\s*Socket errors:\s*(.+)$`)
	p99Re       = regexp.MustCompile(`(?m)^\s*99(?:\.0+)?%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
)

// parseWrk reads wrk --latency's report: Requests/sec, the 99% line of
// the Latency Distribution, the requests served, and any errors.
func parseWrk(out string) (run, error) {
	var r run
	m := reqPerSecRe.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk's output: %s", lastLines(out, 3))
	}
	r.reqPerSec, _ = strconv.ParseFloat(m[1], 64)
	_, dist, ok := strings.Cut(out, "Latency Distribution")
	if !ok {
		return r, errors.New("no Latency Distribution in wrk's output (--latency)")
	}
	m = p99Re.FindStringSubmatch(dist)
	if m == nil {
		return r, errors.New("no 99% line in wrk's Latency Distribution")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return r, fmt.Errorf("99%% latency %q: %v", m[1], err)
	}
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	r.p99 = time.Duration(v * float64(unit))
	if m = requestsRe.FindStringSubmatch(out); m == nil {
		return r, errors.New("no request count in wrk's output")
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	if m = non2xxRe.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = socketRe.FindStringSubmatch(out); m != nil {
		r.socketErrors = strings.TrimSpace(m[1])
	}
	return r, nil
}

// hasEdgeRateLimit reports whether the custom Caddy has the handler yet.
func hasEdgeRateLimit() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, *caddyBin, "list-modules").Output()
	if err != nil {
		return false, fmt.Sprintf("%s list-modules: %v", *caddyBin, err)
	}
	if !strings.Contains(string(out), "edge_rate_limit") {
		return false, *caddyBin + " has no edge_rate_limit handler: rebuild it (make build)"
	}
	return true, ""
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
	defer addCleanup(removeDir)()
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
		ctx, cancel := context.WithTimeout(interrupted, step.timeout)
		cmd := exec.CommandContext(ctx, "go", step.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err != nil {
			why := strings.ReplaceAll(lastLines(string(out), 2), "go: ", "")
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

func startRedis(dir string) (string, error) {
	if _, err := exec.LookPath(*redisBin); err != nil {
		return "", fmt.Errorf("redis-server not found (apt-get install redis-server): %v", err)
	}
	addr := freeAddr()
	p, err := startProcess("redis-server", filepath.Join(dir, "redis.log"), *redisBin,
		"--bind", "127.0.0.1", "--port", port(addr), "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return "", err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(interrupted, 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		switch {
		case err == nil:
			return addr, nil
		case interrupted.Err() != nil:
			return "", interrupted.Err()
		case p.exited():
			return "", fmt.Errorf("redis-server exited: %s", p.logTail())
		case time.Now().After(deadline):
			p.stop()
			return "", fmt.Errorf("redis-server on %s did not answer within 10s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startBackend runs this program again as the trivial backend.
func startBackend(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	addr := freeAddr()
	// The backend exits when its stdin closes: when this process ends, even
	// without running its cleanups.
	stdin, keep, err := os.Pipe()
	if err != nil {
		return "", err
	}
	addCleanup(func() { keep.Close() })
	p, err := startProcessWith("backend", filepath.Join(dir, "backend.log"), func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), backendEnv+"="+addr)
		cmd.Stdin = stdin
	}, self)
	stdin.Close()
	if err != nil {
		return "", err
	}
	if err := waitHTTP("http://"+addr+"/", p, 10*time.Second); err != nil {
		return "", fmt.Errorf("backend: %v", err)
	}
	return addr, nil
}

func serveBackend(addr string) {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	body := []byte("ok")
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}

// waitHTTP polls url until it answers 200, p exits, or timeout passes.
func waitHTTP(url string, p *process, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) && interrupted.Err() == nil {
		if p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.logTail())
		}
		resp, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %v (%v): %s", p.name, timeout, last, p.logTail())
}

// process is a child process, stopped by cleanup if not before.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	once    sync.Once
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	return startProcessWith(name, logPath, nil, bin, args...)
}

// startProcessWith starts bin with args, its output logged to logPath,
// after setup has adjusted the command.
func startProcessWith(name, logPath string, setup func(*exec.Cmd), bin string, args ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		log.Close()
		close(p.done)
	}()
	addCleanup(p.stop)
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end and kills it if it has not within 5s.
func (p *process) stop() {
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
}

func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(data), 3)
}

var (
	cleanupMu sync.Mutex
	cleanups  []*func()
)

// addCleanup registers f to run at exit, last added first; remove
// unregisters it.
func addCleanup(f func()) (remove func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	p := &f
	cleanups = append(cleanups, p)
	return func() {
		cleanupMu.Lock()
		defer cleanupMu.Unlock()
		cleanups = slices.DeleteFunc(cleanups, func(q *func()) bool { return q == p })
	}
}

// cleanup runs the registered cleanups, last added first; each runs once
// even if main and the interrupt fallback both call it.
func cleanup() {
	for {
		cleanupMu.Lock()
		if len(cleanups) == 0 {
			cleanupMu.Unlock()
			return
		}
		f := cleanups[len(cleanups)-1]
		cleanups = cleanups[:len(cleanups)-1]
		cleanupMu.Unlock()
		(*f)()
	}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, v := range m {
		t += v
	}
	return t
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
