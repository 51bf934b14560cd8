// Command failover measures, side by side in one run, how proxies in front
// of the fake cluster handle a leader crash and a planned stop (with the
// node's drain and without), and how many writes each sends to the follower
// right after start and after a reload:
//
//	(i)   stock Caddy configured like the cluster's HAProxy (5s health checks)
//	(ii)  stock Caddy tuned (1s health checks, lb_try_duration, retry on 503)
//	(iii) HAProxy with the cluster's configuration over plain HTTP
//	(iv)  caddy-ha's lb_policy leader
//
// It drives a steady stream of POSTs (each its own client with a timeout)
// through each proxy and reports the routing delay (the new leader's lease
// acquisition to the first write it serves), the write outage seen by
// clients, the client-visible errors by kind, and the ghosts: writes that
// a node executed although their client had already given up (a client
// that retries then creates a duplicate). Everything runs on loopback and
// stops by itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

var (
	caddyBin   = flag.String("caddy", "bin/caddy", "the custom Caddy binary (also used as stock Caddy: its stock modules)")
	haproxyBin = flag.String("haproxy", "haproxy", "HAProxy binary; skipped if not found")
	runs       = flag.Int("runs", 3, "runs per proxy and mode")
	rate       = flag.Int("rate", 200, "writes per second")
	ttl        = flag.Duration("lease-ttl", 6*time.Second, "lease TTL of the fake cluster")
	renew      = flag.Duration("renew", 2*time.Second, "renew interval of the fake cluster")
	timeout    = flag.Duration("client-timeout", 2*time.Second, "timeout of each write")
	drain      = flag.Duration("stop-drain", 250*time.Millisecond, "how long a stopping node serves as a follower after releasing its lease (a planned stop is also measured without)")
	only       = flag.String("only", "", "comma-separated proxies to run (stock,tuned,haproxy,ours)")
	modes      = flag.String("modes", "start,kill,stop", "comma-separated measurements: start (start and reload), kill, stop")
)

// proxy is one contender: how to write its config and start it.
type proxy struct {
	name   string
	config func(listen, admin string, nodes []string) string
	start  func(dir, cfg string) (*exec.Cmd, error)
	// reload reloads the config; it returns the process that serves from
	// then on if that is a new one.
	reload func(dir, cfg, admin string, running *exec.Cmd) (*exec.Cmd, error)
}

func caddyConfig(site string) func(listen, admin string, nodes []string) string {
	return func(listen, admin string, nodes []string) string {
		return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tlog {\n\t\tlevel ERROR\n\t}\n}\nhttp://%s {\n\treverse_proxy %s {\n%s\n\t}\n}\n",
			admin, listen, strings.Join(nodes, " "), site)
	}
}

func startCaddy(dir, cfg string) (*exec.Cmd, error) {
	return startWithConfig(dir, "Caddyfile", cfg, "caddy.log", *caddyBin, "run", "--config", "{config}", "--adapter", "caddyfile")
}

func reloadCaddy(dir, cfg, admin string, _ *exec.Cmd) (*exec.Cmd, error) {
	// A changed config, as an operator's reload would be.
	path, err := writeConfig(dir, "Caddyfile", cfg+"\n# reloaded\n")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(*caddyBin, "reload", "--config", path, "--adapter", "caddyfile", "--address", admin, "--force").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("caddy reload: %v: %s", err, out)
	}
	return nil, nil
}

func writeConfig(dir, name, cfg string) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// startWithConfig writes cfg to dir/name and starts bin with args, where
// "{config}" stands for that file, logging its stderr to dir/logName.
func startWithConfig(dir, name, cfg, logName, bin string, args ...string) (*exec.Cmd, error) {
	path, err := writeConfig(dir, name, cfg)
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if a == "{config}" {
			args[i] = path
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = mustCreate(filepath.Join(dir, logName))
	return cmd, cmd.Start()
}

func proxies() []proxy {
	return []proxy{
		{name: "stock", config: caddyConfig("\t\tlb_policy first\n\t\thealth_uri /healthz/leader\n\t\thealth_interval 5s\n\t\thealth_fails 2\n\t\thealth_passes 1"),
			start: startCaddy, reload: reloadCaddy},
		{name: "tuned", config: caddyConfig("\t\tlb_policy first\n\t\thealth_uri /healthz/leader\n\t\thealth_interval 1s\n\t\thealth_fails 2\n\t\thealth_passes 1\n\t\tlb_try_duration 15s\n\t\tlb_retry_match {\n\t\t\texpression `{rp.status_code} in [503]`\n\t\t}"),
			start: startCaddy, reload: reloadCaddy},
		{name: "haproxy", config: haproxyConfig, start: startHAProxy, reload: reloadHAProxy},
		{name: "ours", config: caddyConfig("\t\tlb_policy leader {\n\t\t\thold 15s\n\t\t}"),
			start: startCaddy, reload: reloadCaddy},
	}
}

// haproxyConfig is the cluster's configuration, over plain HTTP on loopback.
func haproxyConfig(listen, _ string, nodes []string) string {
	return wrkbench.SeedHAProxy(listen, nodes, "5s")
}

func startHAProxy(dir, cfg string) (*exec.Cmd, error) {
	return startWithConfig(dir, "haproxy.cfg", cfg, "haproxy.log", *haproxyBin, "-db", "-f", "{config}")
}

// reloadHAProxy does HAProxy's soft reload: a new process takes over the
// listener and the old one (-sf) finishes what it has.
func reloadHAProxy(dir, cfg, _ string, running *exec.Cmd) (*exec.Cmd, error) {
	cmd, err := startWithConfig(dir, "haproxy.cfg", cfg+"\n# reloaded\n", "haproxy-reloaded.log",
		*haproxyBin, "-db", "-f", "{config}", "-sf", fmt.Sprint(running.Process.Pid))
	if err != nil {
		return nil, err
	}
	go running.Wait()
	return cmd, nil
}

func mustCreate(path string) *os.File {
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	return f
}

func startLoad(url string) *fakecluster.Writes {
	return fakecluster.StartWrites(url, time.Second/time.Duration(*rate), *timeout, &http.Transport{MaxIdleConnsPerHost: 512})
}

// errorKind names a failed write ("" for a 200), as the fault suite does.
func errorKind(r fakecluster.WriteResult) string {
	if r.Err == nil && r.Status == http.StatusOK {
		return ""
	}
	return httpcheck.ErrorKind(r.Status, r.Err)
}

// measurement is one run of one proxy in one mode.
type measurement struct {
	routingDelay time.Duration
	outage       time.Duration
	errors       map[string]int
	errorsLate   int // errors of writes sent 50ms or more after the kill/stop
	ghosts       int // writes executed although their client had given up
	followerHits int // writes that reached the follower at start (start mode)
	err          error
}

// runFailover starts a cluster whose planned stops drain for drain and a
// proxy, kills or stops the leader under load, and measures.
func runFailover(p proxy, mode string, drain time.Duration) (m measurement) {
	dir, _ := os.MkdirTemp("", "failover-"+p.name)
	defer os.RemoveAll(dir)
	c, err := fakecluster.New(fakecluster.Config{LeaseTTL: *ttl, RenewInterval: *renew, StopDrain: drain}, 2)
	if err != nil {
		return measurement{err: err}
	}
	defer c.Close()
	if err := c.Start(); err != nil {
		return measurement{err: err}
	}
	if _, err := c.WaitLeader(5 * time.Second); err != nil {
		return measurement{err: err}
	}
	follower := c.Node("node-b")
	if mode == "start" || mode == "reload" {
		// The first-listed node is the follower, as after any failover:
		// a proxy that routes before it knows sends writes there.
		c.Node("node-a").Stop()
		if _, err := c.WaitLeader(*ttl + *renew); err != nil {
			return measurement{err: err}
		}
		if err := c.Node("node-a").Start(); err != nil {
			return measurement{err: err}
		}
		follower = c.Node("node-a")
	}
	nodes := []string{c.Nodes()[0].Addr(), c.Nodes()[1].Addr()}
	listen, admin := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := p.config(listen, admin, nodes)
	url := "http://" + listen + "/api/orders"

	var l *fakecluster.Writes
	if mode == "start" || mode == "reload" {
		l = startLoad(url) // writes already arrive while the proxy starts
	}
	cmd, err := p.start(dir, cfg)
	if err != nil {
		return measurement{err: err}
	}
	defer func() {
		// cmd is the process serving at the end (a reload may replace it).
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	if err := httpcheck.WaitOK(strings.Replace(url, "/api/orders", "/api/ping", 1), 15*time.Second, time.Second, nil); err != nil {
		if l != nil {
			l.Stop()
		}
		return measurement{err: err}
	}
	switch mode {
	case "start":
		time.Sleep(2 * time.Second)
		l.Stop()
		return measurement{followerHits: follower.Received()}
	case "reload":
		time.Sleep(time.Second)
		before := follower.Received()
		next, err := p.reload(dir, cfg, admin, cmd)
		if err != nil {
			l.Stop()
			return measurement{err: err}
		}
		if next != nil {
			cmd = next
		}
		time.Sleep(2 * time.Second)
		l.Stop()
		return measurement{followerHits: follower.Received() - before}
	}

	l = startLoad(url)
	// The event falls at a random point of the renew cycle, as in life
	// (the nodes' ticks started with the cluster).
	time.Sleep(2*time.Second + rand.N(*renew))
	at := time.Now()
	if mode == "kill" {
		c.Node("node-a").Kill(fakecluster.KillRefuse)
	} else {
		c.Node("node-a").Stop()
	}
	// Run until the new leader has served writes for 2 s, at most 30 s.
	newLeader := c.Node("node-b")
	deadline := at.Add(30 * time.Second)
	var firstOnNew time.Time
	for time.Now().Before(deadline) {
		if ex := newLeader.Executed(); len(ex) > 0 {
			firstOnNew = ex[0].At
			if time.Since(firstOnNew) > 2*time.Second {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	results := l.Stop()
	if firstOnNew.IsZero() {
		return measurement{err: errors.New("the new leader served no write within 30s")}
	}
	acq, _ := c.AcquisitionOf(2)
	m = measurement{routingDelay: firstOnNew.Sub(acq.At), errors: map[string]int{}}
	executed := c.ExecutedIDs()
	var firstOK time.Time
	for _, r := range results {
		if k := errorKind(r); k != "" {
			m.errors[k]++
			if executed[r.ID] > 0 {
				m.ghosts++
			}
			if r.Sent.After(at.Add(50 * time.Millisecond)) {
				m.errorsLate++
			}
		} else if r.Sent.After(at) && (firstOK.IsZero() || r.Done.Before(firstOK)) {
			firstOK = r.Done
		}
	}
	m.outage = firstOK.Sub(at)
	return m
}

func main() {
	flag.Parse()
	if _, err := os.Stat(*caddyBin); err != nil {
		fmt.Fprintln(os.Stderr, "build the custom Caddy first (make build):", err)
		os.Exit(1)
	}
	var selected []proxy
	for _, p := range proxies() {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), p.name) {
			continue
		}
		if p.name == "haproxy" {
			if _, err := exec.LookPath(*haproxyBin); err != nil {
				fmt.Println("haproxy not found: skipped")
				continue
			}
		}
		selected = append(selected, p)
	}
	fmt.Printf("fake cluster: lease TTL %v, renew %v, stop drain %v; %d writes/s, client timeout %v, %d runs each\n\n", *ttl, *renew, *drain, *rate, *timeout, *runs)

	want := strings.Split(*modes, ",")
	if slices.Contains(want, "start") {
		measureStartAndReload(selected)
	}
	for _, mode := range []string{"kill", "stop"} {
		if slices.Contains(want, mode) {
			measureFailover(selected, mode)
		}
	}
}

func measureStartAndReload(selected []proxy) {
	fmt.Println("writes that reached the follower (sum over runs)")
	fmt.Printf("%-8s %12s %12s\n", "proxy", "after start", "after reload")
	for _, p := range selected {
		var start, reload int
		reloadCol := "n/a"
		for range *runs {
			start += runFailover(p, "start", *drain).followerHits
			if p.reload != nil {
				m := runFailover(p, "reload", *drain)
				if m.err != nil {
					fmt.Println(p.name, "reload:", m.err)
				}
				reload += m.followerHits
			}
		}
		if p.reload != nil {
			reloadCol = fmt.Sprint(reload)
		}
		fmt.Printf("%-8s %12d %12s\n", p.name, start, reloadCol)
	}
}

func measureFailover(selected []proxy, mode string) {
	fmt.Printf("\nleader %s (%s)\n", mode, map[string]string{"kill": "crash: port refuses, lease runs out", "stop": "planned: lease released, then stop"}[mode])
	fmt.Printf("%-8s %6s %24s %24s %7s %s\n", "proxy", "drain", "routing delay med/max", "write outage med/max", "ghosts", "client errors (all runs; late: sent >=50ms after the event)")
	// A planned stop also without a drain: the node shuts its server down
	// the instant it has released the lease, so requests it has read but
	// not answered, and connections it is about to close, meet the proxy.
	drains := []time.Duration{*drain}
	if mode == "stop" {
		drains = slices.Compact(append(drains, 0))
	}
	for _, drain := range drains {
		medians := map[string]time.Duration{}
		for _, p := range selected {
			if d := measureRow(p, mode, drain); d > 0 {
				medians[p.name] = d
			}
		}
		// Ratios within this run: absolute times on a shared machine are noise.
		if ours, ok := medians["ours"]; ok {
			fmt.Print("median routing delay / ours:")
			for _, p := range selected {
				if d, ok := medians[p.name]; ok && p.name != "ours" {
					fmt.Printf("  %s %.1fx", p.name, float64(d)/float64(ours))
				}
			}
			fmt.Println()
		}
	}
}

// measureRow runs p in mode *runs times, prints the row of the results, and
// returns the median routing delay (0 if every run failed).
func measureRow(p proxy, mode string, drain time.Duration) time.Duration {
	drainCol := "-" // a crash does not drain
	if mode == "stop" {
		drainCol = fmt.Sprint(drain)
	}
	var delays, outages []time.Duration
	errs := map[string]int{}
	late, ghosts := 0, 0
	for range *runs {
		m := runFailover(p, mode, drain)
		if m.err != nil {
			fmt.Printf("%-8s %6s run failed: %v\n", p.name, drainCol, m.err)
			continue
		}
		delays = append(delays, m.routingDelay)
		outages = append(outages, m.outage)
		for k, v := range m.errors {
			errs[k] += v
		}
		late += m.errorsLate
		ghosts += m.ghosts
	}
	fmt.Printf("%-8s %6s %24s %24s %7d %s\n", p.name, drainCol, medMax(delays), medMax(outages), ghosts, formatErrors(errs, late))
	if len(delays) == 0 {
		return 0
	}
	return median(delays)
}

func median(ds []time.Duration) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

func medMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%v / %v", median(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}

func formatErrors(errs map[string]int, late int) string {
	if len(errs) == 0 {
		return "none"
	}
	var keys []string
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, errs[k]))
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" (late %d)", late)
}
