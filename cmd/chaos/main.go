// Command chaos runs one Caddy with every caddy-ha module on — forwarded
// with cloudflare_ranges, edge_rate_limit on Redis and on PostgreSQL,
// lb_policy leader in front of the fake cluster, transport pinned for its
// Windows SSO, lb_policy upload_affinity in front of three upload servers,
// ha_status and the admin API's status, reload_handoff — under a mixed
// load (writes, reads, chunked uploads, fixed clients of the rate-limit
// zones, signed-in NTLM browsers, Cloudflare's clients, status scrapes),
// and injects faults in turn: a leader's planned stop, kill and hang, the
// database down, Redis paused and killed, PostgreSQL paused and killed, an
// upload server killed, Cloudflare's lists failing, config reloads. After
// each it checks invariants from the records of the nodes, the upload
// servers, the rate-limit backend and the status, and prints one table,
// fault by fault. It exits 1 if an invariant failed.
//
// Every run lasts a few seconds and every wait is bounded; all of it is on
// 127.0.0.1. make chaos runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-ha/caddy-ha"
)

// Each fault run: load before the fault, the fault, then load after the
// recovery (which must come within recoverWithin).
const (
	warmup        = time.Second
	faultFor      = 3 * time.Second
	settle        = 3 * time.Second
	recoverWithin = 20 * time.Second
)

// handoffModule is the listener wrapper that hands kept-alive connections
// over across a reload.
const handoffModule = "caddy.listeners.reload_handoff"

func main() {
	var slugs []string
	for _, f := range faults() {
		slugs = append(slugs, f.slug)
	}
	_, handoffErr := caddy.GetModule(handoffModule)
	only := flag.String("only", "", "comma-separated faults to run, of "+strings.Join(slugs, ",")+" (default all)")
	handoff := flag.Bool("handoff", handoffErr == nil, "wrap Caddy's listeners in reload_handoff (default: on when "+handoffModule+" is built in)")
	flag.Parse()

	var selected []fault
	for _, f := range faults() {
		if *only == "" || slices.Contains(strings.Split(*only, ","), f.slug) {
			selected = append(selected, f)
		}
	}
	if len(selected) == 0 {
		fmt.Fprintln(os.Stderr, "no such fault:", *only)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, selected, *handoff)
	stop()
	os.Exit(code)
}

// run runs the faults and returns the exit status.
func run(ctx context.Context, selected []fault, handoff bool) int {
	began := time.Now()
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := startRig(dir, handoff)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up:", err)
		return 2
	}
	fmt.Printf("one Caddy in-process (reload_handoff %s): fake cluster of 2 nodes (lease %v, renew %v, planned stops without drain), %d upload servers, redis-server %s, PostgreSQL on port %d\n",
		onOff(handoff), leaseTTL, leaseRenew, uploadServers, r.redis.Addr, r.pg.Port)
	fmt.Printf("load: %d writes/s, %d reads/s, %d uploads/s (%d requests each), %d requests/s in each rate-limit zone (%d per %v window), %d signed-in NTLM browsers (%d requests/s each), %d/s with CF-Connecting-IP, %d status scrapes/s, %d canaries/s of Caddy's own and proxied and %d of each store\n",
		int(time.Second/writeEvery), int(time.Second/readEvery), int(time.Second/uploadEvery), 2+(uploadLength+uploadChunk-1)/uploadChunk,
		limitPerWindow, limitEvents, limitWindow, ssoBrowsers, int(time.Second/ssoEvery), int(time.Second/cloudflareEvery),
		int(time.Second/statusEvery), int(time.Second/canaryEvery)/2, int(time.Second/storeCanaryEvery))
	fmt.Printf("each fault: %v of load, %v of fault, recovery, %v of load\n\n", warmup, faultFor, settle)

	c := newClients(r.site)
	if err := signIn(c.browsers); err != nil {
		fmt.Fprintln(os.Stderr, "setting up:", err)
		c.closeIdle()
		r.close()
		return 2
	}
	var rows []row
	for _, f := range selected {
		fmt.Fprintf(os.Stderr, "%s…\n", f.name)
		rw, err := runFault(ctx, r, c, f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			printTable(os.Stdout, rows)
			c.closeIdle()
			r.close()
			fmt.Println("\nstopped early; logs in", dir)
			return 2
		}
		rows = append(rows, rw)
	}
	c.closeIdle()
	r.close()

	printTable(os.Stdout, rows)
	fmt.Printf("\nsuite: %v\n", time.Since(began).Round(time.Second))
	if slices.ContainsFunc(rows, row.failed) {
		fmt.Println("invariants failed; Caddy's log:", dir)
		return 1
	}
	os.RemoveAll(dir)
	return 0
}

// runFault runs the mixed load through one fault and checks it.
func runFault(ctx context.Context, r *rig, c *clients, f fault) (row, error) {
	marks := markRun(r)
	l := startLoad(r, c, f.slug)
	eff, err := play(ctx, r, f)
	l.stopLoad()
	if err != nil {
		return row{}, err
	}
	return check(r, f, l, eff, marks, time.Since(marks.start)), nil
}

// play injects the fault after the warm-up, ends it after faultFor, and
// waits for the recovery and the settling load.
func play(ctx context.Context, r *rig, f fault) (effect, error) {
	if !sleep(ctx, warmup) {
		return effect{}, ctx.Err()
	}
	at := time.Now()
	eff, err := f.inject(r)
	if err != nil {
		return eff, fmt.Errorf("%s: %v", f.name, err)
	}
	eff.at = at
	sleep(ctx, time.Until(at.Add(faultFor))) // an interrupt ends the fault early
	if eff.end != nil {
		if err := eff.end(); err != nil {
			return eff, fmt.Errorf("ending %s: %v", f.name, err)
		}
	}
	if ctx.Err() != nil {
		return eff, ctx.Err()
	}
	if err := r.waitServing(recoverWithin); err != nil {
		return eff, fmt.Errorf("after %s: %v", f.name, err)
	}
	if !sleep(ctx, settle) {
		return eff, ctx.Err()
	}
	return eff, nil
}

// sleep waits d, or less if ctx ends first; it reports whether ctx is live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
