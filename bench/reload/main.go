// Command reload measures, side by side in one run, how many client
// requests a config reload costs a Caddy under kept-alive load, with and
// without caddy-ha's listener wrapper reload_handoff:
//
//	stock:   reverse_proxy to a trivial backend on loopback
//	handoff: the same, plus servers { listener_wrappers { reload_handoff } }
//
// When a reload stops the old server, stock Caddy's Go server closes its
// idle kept-alive connections at once, while their clients may be sending
// the next request on them: the client sees a read error. With
// reload_handoff the old server hands each such connection, and any
// request it read but dropped, to the new config's server instead.
//
// In each round (-rounds, 3) wrk loads each contender in turn (stock,
// handoff, stock, ...) with POSTs (a small JSON body) on kept-alive
// connections (-connections, 32) for -duration (8s), and during that run
// the bench forces -reloads (5) reloads of the contender's unchanged config
// through its admin endpoint, spread evenly through the run: a POST /load
// with Cache-Control: must-revalidate, which is what caddy reload --force
// sends. Client errors are wrk's socket errors (connect, read, write,
// timeout) plus its non-2xx or 3xx responses. It prints, per contender, per
// round and the median, the requests, client errors and reloads done, and
// handoff's errors and req/s against stock's. It exits 1 if handoff had any
// client error, or fewer reloads than asked, after printing the table.
//
// With -pipeline n (n > 1), each wrk connection sends n requests back to
// back and then reads their answers (HTTP/1.1 pipelining, as apt does).
// The old server must then close, not hand on, a connection whose next
// requests sit in its read buffer: wrk counts each such close as a read
// error, for stock Caddy as for handoff, and a connection that stalls
// instead as timeouts (wrk's 2 s). The goal becomes 0 timeouts with
// handoff.
//
// With -tls, wrk loads an HTTPS site instead (tls internal, protocols h1,
// as the cluster's frontend): reload_handoff hands TLS connections on
// too, their session with them.
//
// Both are the custom Caddy (-caddy, bin/caddy, built from ./cmd/caddy if
// missing). Everything runs on 127.0.0.1, and every process it starts is
// stopped on exit, on error and on Ctrl-C.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

var (
	reloads  = flag.Int("reloads", 5, "forced config reloads during each wrk run, spread evenly through it")
	pipeline = flag.Int("pipeline", 1, "requests each connection sends back to back before reading their answers")
	overTLS  = flag.Bool("tls", false, "load an HTTPS site (tls internal, protocols h1) instead of plain HTTP")
)

// handoffID is the module the handoff contender needs in the custom Caddy.
const handoffID = "caddy.listeners.reload_handoff"

// script makes every request a POST with a small JSON body.
const script = `wrk.method = "POST"
wrk.body = '{"op":"write","key":"bench","value":42}'
wrk.headers["Content-Type"] = "application/json"
`

// pipelined makes each of wrk's requests n of the script's, back to back.
func pipelined(n int) string {
	return fmt.Sprintf(`init = function(args)
	local r = {}
	for i = 1, %d do r[i] = wrk.format() end
	pipelined = table.concat(r)
end
request = function() return pipelined end
`, n)
}

func main() {
	b := &wrkbench.Bench{
		Name: "reload",
		Title: []string{
			"Client errors of forced config reloads under kept-alive load: wrk POSTs through Caddy",
			"to a trivial backend (200, 2-byte body) on loopback, on kept-alive connections, while",
			"the bench forces reloads of the unchanged config (POST /load, Cache-Control:",
			"must-revalidate, as caddy reload --force). Contenders run interleaved within each round.",
		},
		Script:       script,
		CaddyPackage: "./cmd/caddy",
	}
	b.DefineFlags()
	setDefault("duration", "8s")
	setDefault("connections", "32")
	flag.Parse()
	if *reloads < 1 || *pipeline < 1 {
		fmt.Fprintln(os.Stderr, "need -reloads >= 1 and -pipeline >= 1")
		os.Exit(2)
	}
	var site *tlsSite
	if *overTLS {
		var err error
		if site, err = newTLSSite(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer site.remove()
		b.Title = append(b.Title, "Over HTTPS: tls internal, protocols h1 (as the cluster's frontend).")
	}
	stock := newContender(b, site, "stock", "stock Caddy: reverse_proxy, no listener wrapper", "")
	handoff := newContender(b, site, "handoff", "the same plus servers { listener_wrappers { reload_handoff } }",
		"\t\tlistener_wrappers {\n\t\t\treload_handoff\n\t\t}\n")
	handoff.Handler = handoffID
	b.Contenders = []*wrkbench.Contender{stock, handoff}

	var verdict []string // why handoff missed the goal
	b.Summary = func(selected, _ []*wrkbench.Contender) {
		verdict = summary(selected, stock, handoff)
	}
	if *pipeline > 1 {
		b.Script += pipelined(*pipeline)
		b.Title = append(b.Title, fmt.Sprintf("Each connection pipelines %d requests, then reads their answers.", *pipeline))
	}
	b.Main() // exits by itself on an error or an interrupt
	if len(verdict) > 0 {
		fmt.Fprintf(os.Stderr, "reload bench: handoff missed the goal (%s across reloads): %s\n", goal(), strings.Join(verdict, "; "))
		site.remove()
		os.Exit(1)
	}
}

// newContender returns a contender whose Caddyfile has servers (lines of
// their own) in its global servers block, with its reloader as its probe.
// With site, wrk loads site's HTTPS address on the same Caddy.
func newContender(b *wrkbench.Bench, site *tlsSite, name, label, servers string) *wrkbench.Contender {
	c := &wrkbench.Contender{Name: name, Label: label, AdminEndpoint: true}
	r := &reloader{bench: b, contender: c}
	c.Probe = r
	var https string // the HTTPS site's host:port
	c.Config = func(listen, admin, backend string) string {
		proxy := fmt.Sprintf("\treverse_proxy %s\n", backend)
		if site == nil {
			var globals string
			if servers != "" {
				globals = "\tservers {\n" + servers + "\t}\n"
			}
			r.config = wrkbench.Caddyfile(listen, admin, globals, proxy)
			return r.config
		}
		https = loopback.FreeAddr()
		r.config = wrkbench.Caddyfile(listen, admin, site.globals(servers), proxy) +
			fmt.Sprintf("https://%s {\n\ttls internal\n%s}\n", https, proxy)
		return r.config
	}
	if site != nil {
		c.Setup = func(c *wrkbench.Contender) error {
			if err := site.waitServes(https); err != nil {
				return err
			}
			c.URL = "https://" + https + "/"
			return nil
		}
	}
	return c
}

// tlsSite is what -tls contenders share: a storage for Caddy's internal CA.
type tlsSite struct{ storage string }

func newTLSSite() (*tlsSite, error) {
	dir, err := os.MkdirTemp("", "bench-reload-tls-")
	if err != nil {
		return nil, err
	}
	return &tlsSite{storage: dir}, nil
}

// remove removes the storage (nil: nothing).
func (s *tlsSite) remove() {
	if s != nil {
		_ = os.RemoveAll(s.storage)
	}
}

// globals returns the global options of an HTTPS contender whose servers
// block has servers: the internal CA in the bench's storage, never
// installed into the system's trust store, no HTTP->HTTPS redirects, and
// HTTP/1.1 only.
func (s *tlsSite) globals(servers string) string {
	return fmt.Sprintf("\tstorage file_system %s\n\tskip_install_trust\n\tauto_https disable_redirects\n"+
		"\tservers {\n\t\tprotocols h1\n%s\t}\n", s.storage, servers)
}

// waitServes waits until addr completes a TLS handshake with a certificate
// of the internal CA (Caddy issues it in the background).
func (s *tlsSite) waitServes(addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := s.handshake(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || wrkbench.Interrupted().Err() != nil {
			return fmt.Errorf("https://%s: no TLS handshake within 15s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *tlsSite) handshake(addr string) error {
	root, err := os.ReadFile(filepath.Join(s.storage, "pki", "authorities", "local", "root.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return err
	}
	return conn.Close()
}

// reloader forces reloads of a contender's config during each of its wrk
// runs.
type reloader struct {
	bench     *wrkbench.Bench
	contender *wrkbench.Contender
	config    string // its Caddyfile

	// One per successful run, as the contender's Runs:
	done     []int    // reloads done
	failures []string // why reloads failed, "" if none did
}

// Measure runs wrk while it forces -reloads reloads, the i-th at
// i/(reloads+1) of the run; it waits for the one under way when wrk ends
// and forces no more after that.
func (r *reloader) Measure(wrk func() (wrkbench.Run, error)) (wrkbench.Run, []string, error) {
	ended := make(chan struct{})
	var wg sync.WaitGroup
	var done int
	var slowest time.Duration
	var failures []string
	start := time.Now()
	wg.Go(func() {
		for i := 1; i <= *reloads; i++ {
			at := start.Add(r.bench.Duration * time.Duration(i) / time.Duration(*reloads+1))
			select {
			case <-time.After(time.Until(at)):
			case <-ended:
				return
			}
			t := time.Now()
			if err := r.reload(); err != nil {
				failures = append(failures, err.Error())
				continue
			}
			done++
			slowest = max(slowest, time.Since(t))
		}
	})
	run, err := wrk()
	close(ended)
	wg.Wait()
	if err != nil {
		return run, nil, err
	}
	r.done = append(r.done, done)
	r.failures = append(r.failures, strings.Join(slices.Compact(failures), "; "))
	note := fmt.Sprintf("%d/%d reloads (slowest %v), %d client errors", done, *reloads, slowest.Round(time.Millisecond), run.ClientErrors())
	if len(failures) > 0 {
		note += "  !! reloads failed: " + failures[0]
	}
	return run, []string{note}, nil
}

// reload forces a reload of the unchanged config, as caddy reload --force
// does: POST /load with Cache-Control: must-revalidate (the Caddyfile is
// adapted by the admin endpoint, from its Content-Type).
func (r *reloader) reload() error {
	ctx, cancel := context.WithTimeout(wrkbench.Interrupted(), 15*time.Second)
	defer cancel()
	origin := "http://" + r.contender.AdminAddr
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, origin+"/load", strings.NewReader(r.config))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST /load: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /load: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (r *reloader) Problems() (column, warning string) { return "", "" }
func (r *reloader) PrintReport()                       {}

// summary prints the table and returns why handoff missed the goal, if it
// was selected and did.
func summary(selected []*wrkbench.Contender, stock, handoff *wrkbench.Contender) (verdict []string) {
	const row = "%-9s %-6s %9s %8s %13s %16s %8s %8s\n"
	fmt.Printf(row, "contender", "round", "requests", "req/s", "client errors", "socket c/r/w/t", "non-2xx", "reloads")
	totals := map[*wrkbench.Contender]int64{}
	for _, c := range selected {
		r := c.Probe.(*reloader)
		if c.Skipped != "" {
			fmt.Printf("%-9s skipped (%s)\n", c.Name, c.Skipped)
			continue
		}
		if len(c.Runs) == 0 {
			fmt.Printf("%-9s no successful run\n", c.Name)
			continue
		}
		var reqs, rps, errs, done []float64
		for i, run := range c.Runs {
			s := run.Socket
			fmt.Printf(row, c.Name, fmt.Sprint(run.Round), fmt.Sprint(run.Requests), fmt.Sprintf("%.0f", run.ReqPerSec),
				fmt.Sprint(run.ClientErrors()), fmt.Sprintf("%d/%d/%d/%d", s.Connect, s.Read, s.Write, s.Timeout),
				fmt.Sprint(run.Non2xx), fmt.Sprintf("%d/%d", r.done[i], *reloads))
			reqs = append(reqs, float64(run.Requests))
			rps = append(rps, run.ReqPerSec)
			errs = append(errs, float64(run.ClientErrors()))
			done = append(done, float64(r.done[i]))
			totals[c] += run.ClientErrors()
		}
		fmt.Printf(row, c.Name, "median", num(wrkbench.Median(reqs)), fmt.Sprintf("%.0f", wrkbench.Median(rps)),
			num(wrkbench.Median(errs)), "", "", num(wrkbench.Median(done))+"/"+fmt.Sprint(*reloads))
	}
	fmt.Println()

	if len(stock.Runs) > 0 && len(handoff.Runs) > 0 {
		errRatio := "n/a (stock had none)"
		if totals[stock] > 0 {
			errRatio = fmt.Sprintf("%.1f%%", 100*float64(totals[handoff])/float64(totals[stock]))
		}
		fmt.Printf("handoff vs stock: client errors %d vs %d over all rounds (%s)", totals[handoff], totals[stock], errRatio)
		if ratio, ok := wrkbench.PairedRatio(handoff, stock); ok {
			fmt.Printf(", req/s %.1f%% (median over rounds of the ratio in the same round)", 100*ratio)
		}
		fmt.Println()
	}
	for _, c := range selected {
		r := c.Probe.(*reloader)
		for i, f := range r.failures {
			if f != "" {
				fmt.Printf("WARNING: %s round %d: %d/%d reloads done: %s\n", c.Name, c.Runs[i].Round, r.done[i], *reloads, f)
			}
		}
	}

	if !slices.Contains(selected, handoff) {
		return nil
	}
	switch {
	case handoff.Skipped != "":
		verdict = append(verdict, "skipped: "+handoff.Skipped)
	case len(handoff.Runs) == 0:
		verdict = append(verdict, "no successful run")
	}
	if *pipeline == 1 && totals[handoff] > 0 {
		verdict = append(verdict, fmt.Sprintf("%d client errors", totals[handoff]))
	}
	if timeouts := sumTimeouts(handoff); *pipeline > 1 && timeouts > 0 {
		verdict = append(verdict, fmt.Sprintf("%d timeouts", timeouts))
	}
	if r := handoff.Probe.(*reloader); slices.ContainsFunc(r.done, func(n int) bool { return n < *reloads }) {
		verdict = append(verdict, "fewer reloads than asked in some round")
	}
	pass := "PASS"
	if len(verdict) > 0 {
		pass = "MISS"
	}
	fmt.Printf("goal: %s with handoff across %d forced reloads per run: %s\n", goal(), *reloads, pass)
	return verdict
}

// goal names what handoff must achieve: with pipelining, connections
// close as in stock Caddy, and none may stall.
func goal() string {
	if *pipeline > 1 {
		return "0 timeouts"
	}
	return "0 client errors"
}

func sumTimeouts(c *wrkbench.Contender) (n int64) {
	for _, run := range c.Runs {
		n += run.Socket.Timeout
	}
	return n
}

// num gives a median of counts: whole, or to one decimal between two.
func num(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprint(int64(x))
	}
	return fmt.Sprintf("%.1f", x)
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
