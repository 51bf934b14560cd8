// Command latency measures what each proxy adds to a request's latency at
// fixed request rates, side by side in one run, rounds interleaved: the
// fake cluster's leader directly (the baseline), stock Caddy's
// reverse_proxy, caddy-ha with the seed's deployment (protocols h1,
// reload_handoff, forwarded, edge_rate_limit on Redis with a limit never
// reached, lb_policy leader, transport pinned) and HAProxy 2.6 with the
// seed's lines. The load is vegeta's, open loop (a slow answer does not
// slow the sender), writes (POST /api/orders) over kept-alive connections.
//
// For each rate it prints each contender's added latency over the
// baseline at p50, p99 and p99.9 (medians over the rounds of the
// difference in the same round), its errors, and its p99's ratio to
// HAProxy's and to stock's. Then one run at the middle rate with a planned stop of the
// leader halfway through: each proxy's p99.9 and worst latency, and its
// errors. It writes a PNG plot of the percentiles per contender and rate.
//
//	go run ./bench/latency [-caddy bin/caddy] [-rates 500,2000,5000] [-duration 5s] [-rounds 3] [-plot bench/latency/latency.png]
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

var (
	caddyBin   = flag.String("caddy", "bin/caddy", "the custom Caddy (make build); also stock Caddy, by its stock modules")
	haproxyBin = flag.String("haproxy", "haproxy", "HAProxy 2.6")
	redisBin   = flag.String("redis", "redis-server", "redis-server, for edge_rate_limit's store")
	ratesFlag  = flag.String("rates", "500,2000,5000", "request rates per second")
	duration   = flag.Duration("duration", 5*time.Second, "each run's length")
	rounds     = flag.Int("rounds", 3, "interleaved rounds per rate")
	plotPath   = flag.String("plot", "bench/latency/latency.png", "where to write the plot")
)

// contender is one path to the cluster's leader.
type contender struct {
	name string
	url  string
}

func main() {
	flag.Parse()
	rates, err := parseRates(*ratesFlag)
	if err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "latency-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	cluster, err := fakecluster.New(fakecluster.Config{LeaseTTL: 6 * time.Second, RenewInterval: 2 * time.Second,
		BasePort: loopback.FreePort(), StopDrain: 250 * time.Millisecond}, 2)
	if err != nil {
		fail(err)
	}
	if err := cluster.Start(); err != nil {
		fail(err)
	}
	defer cluster.Close()
	if _, err := cluster.WaitLeader(10 * time.Second); err != nil {
		fail(err)
	}
	if err := cluster.Reset("node-a"); err != nil {
		fail(err)
	}
	redisAddr, err := wrkbench.StartRedis(dir, *redisBin)
	if err != nil {
		fail(err)
	}
	nodes := []string{cluster.Node("node-a").Addr(), cluster.Node("node-b").Addr()}
	contenders, err := startContenders(dir, nodes, redisAddr)
	if err != nil {
		fail(err)
	}
	defer wrkbench.Cleanup() // the processes and Redis

	fmt.Printf("added latency over the leader itself (median over %d interleaved rounds of %s each), open-loop POSTs\n", *rounds, *duration)
	var table []row
	for _, rate := range rates {
		byName := map[string][]*vegeta.Metrics{}
		for range *rounds {
			for _, c := range contenders {
				byName[c.name] = append(byName[c.name], attack(c, rate, *duration, nil))
			}
		}
		table = append(table, report(rate, contenders, byName)...)
	}
	failover(cluster, contenders[1:], rates[len(rates)/2])
	if err := writePlot(*plotPath, rates, table); err != nil {
		fail(err)
	}
	fmt.Println("plot:", *plotPath)
}

// startContenders starts stock Caddy, caddy-ha and HAProxy in front of
// nodes, after the baseline (the leader itself).
func startContenders(dir string, nodes []string, redisAddr string) ([]*contender, error) {
	upstreams := strings.Join(nodes, " ")
	seedGlobals, seedSite := wrkbench.SeedDeployment(redisAddr, upstreams, "")
	proxies := []struct{ name, file, globals, site string }{
		{"stock", "Caddyfile", "",
			"\treverse_proxy " + upstreams + " {\n\t\tlb_policy first\n\t\thealth_uri /healthz/leader\n\t\thealth_interval 1s\n\t\thealth_fails 2\n\t\thealth_passes 1\n\t}\n"},
		{"caddy-ha", "Caddyfile", seedGlobals, seedSite},
		{"haproxy", "haproxy.cfg", "", ""},
	}
	if _, err := exec.LookPath(*haproxyBin); err != nil {
		return nil, fmt.Errorf("HAProxy (%s) is needed: %v (apt-get install haproxy)", *haproxyBin, err)
	}
	out := []*contender{{name: "direct", url: "http://" + nodes[0] + "/api/orders"}}
	for _, p := range proxies {
		listen := loopback.FreeAddr()
		cfg, bin, args := wrkbench.Caddyfile(listen, loopback.FreeAddr(), p.globals, p.site), *caddyBin, []string{"run", "--adapter", "caddyfile", "--config"}
		if p.name == "haproxy" {
			cfg, bin, args = wrkbench.SeedHAProxy(listen, nodes, "1s"), *haproxyBin, []string{"-db", "-f"}
		}
		path := filepath.Join(dir, p.name+"."+p.file)
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			return nil, err
		}
		if _, err := wrkbench.StartProcess(p.name, filepath.Join(dir, p.name+".log"), bin, append(args, path)...); err != nil {
			return nil, err
		}
		out = append(out, &contender{name: p.name, url: "http://" + listen + "/api/orders"})
	}
	for _, c := range out {
		if err := httpcheck.WaitOK(strings.Replace(c.url, "/api/orders", "/api/warmup", 1), 20*time.Second, 2*time.Second, nil); err != nil {
			return nil, fmt.Errorf("%s: %v", c.name, err)
		}
	}
	return out, nil
}

// attack sends rate POSTs a second to c for d, open loop, and returns the
// metrics; during, if set, runs once halfway.
func attack(c *contender, rate int, d time.Duration, during func()) *vegeta.Metrics {
	targeter := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: c.url, Body: []byte(`{"item":"bench"}`),
		Header: http.Header{"Content-Type": {"application/json"}}})
	attacker := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Timeout(10*time.Second), vegeta.MaxWorkers(2048), vegeta.Connections(512))
	if during != nil {
		timer := time.AfterFunc(d/2, during)
		defer timer.Stop()
	}
	m := new(vegeta.Metrics)
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, d, c.name) {
		m.Add(res)
	}
	m.Close()
	return m
}

// row is one contender's figures at one rate, for the table and the plot.
type row struct {
	rate           int
	name           string
	p50, p99, p999 time.Duration    // added over the baseline, medians over rounds
	total          [3]time.Duration // the p50, p99 and p99.9 themselves, medians over rounds
	errors         uint64
	requests       uint64
}

var quantiles = []float64{0.5, 0.99, 0.999}

// report prints and returns each contender's added latency at rate.
func report(rate int, contenders []*contender, byName map[string][]*vegeta.Metrics) []row {
	base := byName["direct"]
	var rows []row
	for _, c := range contenders {
		r := row{rate: rate, name: c.name}
		added := make([][]time.Duration, len(quantiles))
		totals := make([][]time.Duration, len(quantiles))
		for round, m := range byName[c.name] {
			r.requests += m.Requests
			r.errors += m.Requests - uint64(float64(m.Requests)*m.Success+0.5)
			for i, q := range quantiles {
				added[i] = append(added[i], m.Latencies.Quantile(q)-base[round].Latencies.Quantile(q))
				totals[i] = append(totals[i], m.Latencies.Quantile(q))
			}
		}
		r.p50, r.p99, r.p999 = median(added[0]), median(added[1]), median(added[2])
		for i := range quantiles {
			r.total[i] = median(totals[i])
		}
		rows = append(rows, r)
	}
	find := func(name string) row {
		i := slices.IndexFunc(rows, func(r row) bool { return r.name == name })
		return rows[i]
	}
	ha, stock := find("haproxy"), find("stock")
	// The ratios are of the p99s themselves: an added latency near zero
	// (HAProxy's) makes a ratio of added latencies noise.
	fmt.Printf("\nrate %d/s\n%-9s %10s %10s %10s %11s %10s %15s %13s\n", rate, "proxy", "+p50", "+p99", "+p99.9", "errors", "p99", "p99/haproxy's", "p99/stock's")
	for _, r := range rows {
		base := ""
		if r.name == "direct" {
			base = " (baseline: absolute " + absolute(byName["direct"]) + ")"
		}
		fmt.Printf("%-9s %10s %10s %10s %11s %10s %15s %13s%s\n", r.name, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond),
			r.p999.Round(time.Microsecond), fmt.Sprintf("%d/%d", r.errors, r.requests), r.total[1].Round(time.Microsecond),
			ratio(r.total[1], ha.total[1]), ratio(r.total[1], stock.total[1]), base)
	}
	return rows
}

// absolute is the baseline's own p50/p99/p99.9 in its first round.
func absolute(ms []*vegeta.Metrics) string {
	m := ms[0]
	return fmt.Sprintf("%s/%s/%s", m.Latencies.Quantile(0.5).Round(time.Microsecond), m.Latencies.Quantile(0.99).Round(time.Microsecond),
		m.Latencies.Quantile(0.999).Round(time.Microsecond))
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// failover runs each proxy at rate with a planned stop of the leader
// halfway, the cluster restored to node-a leading before each, and prints
// each proxy's p99.9, worst latency and errors.
func failover(cluster *fakecluster.Cluster, proxies []*contender, rate int) {
	fmt.Printf("\nfailover at %d/s: a planned stop of the leader halfway through a %s run\n%-9s %10s %10s %9s\n", rate, *duration, "proxy", "p99.9", "worst", "errors")
	for _, c := range proxies {
		if err := restore(cluster, proxies); err != nil {
			fail(err)
		}
		m := attack(c, rate, *duration, func() { cluster.Node("node-a").Stop() })
		errs := m.Requests - uint64(float64(m.Requests)*m.Success+0.5)
		fmt.Printf("%-9s %10s %10s %9s\n", c.name, m.Latencies.Quantile(0.999).Round(time.Microsecond), m.Latencies.Max.Round(time.Microsecond),
			fmt.Sprintf("%d/%d", errs, m.Requests))
	}
}

// restore restarts a stopped node-a, makes it the leader again and waits
// until every proxy writes through.
func restore(cluster *fakecluster.Cluster, proxies []*contender) error {
	a := cluster.Node("node-a")
	if a.State().State != "running" {
		if err := a.Start(); err != nil {
			return err
		}
	}
	if err := cluster.Reset("node-a"); err != nil {
		return err
	}
	for _, c := range proxies {
		if err := httpcheck.WaitOK(strings.Replace(c.url, "/api/orders", "/api/warmup", 1), 30*time.Second, 2*time.Second, nil); err != nil {
			return fmt.Errorf("%s after the restore: %v", c.name, err)
		}
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func parseRates(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("rate %q: want a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "latency:", err)
	wrkbench.Cleanup()
	os.Exit(1)
}
