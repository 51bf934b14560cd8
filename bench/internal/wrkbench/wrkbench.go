// Package wrkbench runs side-by-side wrk benchmarks of Caddy
// configurations: each contender is a Caddy started from its own
// Caddyfile, proxying to a trivial backend on loopback; wrk loads the
// contenders in turn, interleaved within each round so that machine noise
// spreads over all of them, and the summary gives per contender the median
// req/s and p99 latency over rounds and its req/s as a share of the
// baseline's (the contender named "none") in the same round, next to its
// goal. Every process it starts is stopped on exit, on error and on Ctrl-C.
package wrkbench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// Baseline is the name of the contender the others are compared with.
const Baseline = "none"

// Bench is one side-by-side benchmark: its contenders, what they need, and
// the common flags (DefineFlags).
type Bench struct {
	// Name names the program in its messages and its temporary directory.
	Name string
	// Title is printed above the list of contenders, one line each.
	Title []string
	// CostOf names what the contenders add to the baseline, in warnings
	// about runs whose figures measure more than that ("counting").
	CostOf string
	// Headers are sent with every request, to every contender (wrk -H), so
	// that they all parse the same request.
	Headers []string
	// Script, if set, is a wrk Lua script (wrk -s) that shapes every request
	// to every contender (method, body, headers), e.g.
	// wrk.method = "PATCH"; the path is each contender's URL's.
	Script string
	// Backend, if set, replaces the trivial backend: it starts in dir what
	// the contenders proxy to and returns what their Config gets as backend
	// (and the header prints).
	Backend func(dir string) (string, error)
	// ReadyPath is polled on each contender's Caddy until it answers 200
	// before anything is measured; "/" if empty.
	ReadyPath string
	// CaddyPackage, if set, is the Go package (run from the module's root)
	// built into CaddyBin when CaddyBin is missing, e.g. ./cmd/caddy.
	CaddyPackage string
	// Contenders, the baseline first.
	Contenders []*Contender
	// Prepare, if set, runs once the contenders are selected and those
	// lacking a handler are skipped, before any of them starts: it starts
	// what they need in dir and marks those that cannot run as skipped. It
	// returns notes for the header's wrk line.
	Prepare func(dir string, selected []*Contender) (headerNotes []string, err error)
	// Summary, if set, prints the summary in place of the req/s and p99
	// table, given the contenders selected and those that could run.
	Summary func(selected, active []*Contender)

	// The common flags.
	CaddyBin    string
	WrkBin      string
	Threads     int
	Connections int
	Duration    time.Duration
	Warmup      time.Duration
	Rounds      int
	Only        string

	scriptPath string // Script, written to a file
}

// Contender is one Caddy configuration under test.
type Contender struct {
	Name  string
	Label string
	// Bin is the Caddy binary that runs it; nil for the custom Caddy
	// (-caddy).
	Bin func() string
	// Config returns its Caddyfile: site on listen, admin endpoint admin
	// ("off" unless AdminEndpoint), proxying to backend.
	Config func(listen, admin, backend string) string
	// Handler is a module it needs in the custom Caddy: an HTTP handler's
	// name (http.handlers.<Handler>) or, with a dot, a full module ID; it is
	// skipped when the binary lacks it.
	Handler string
	// AdminEndpoint gives it an admin endpoint of its own on AdminAddr.
	AdminEndpoint bool
	// Goal is the least req/s it is to keep as a share of the baseline's
	// in the same round; 0 for none.
	Goal float64
	// Probe, if set, measures more around each of its runs.
	Probe Probe
	// Setup, if set, runs once its Caddy serves on URL, before any wrk run:
	// it may point URL elsewhere on that Caddy (wrk loads URL) and add to
	// Label; an error skips the contender.
	Setup func(c *Contender) error

	// Skipped says why it does not run, if it does not.
	Skipped   string
	proc      *Process // its Caddy
	URL       string
	AdminAddr string
	Runs      []Run // one per round that succeeded
}

// Caddyfile returns a contender's Caddyfile: the global options (admin
// endpoint admin, no persisted config, errors alone logged, then globals,
// lines of their own) and the site on listen's port, bound to 127.0.0.1,
// with the directives site.
func Caddyfile(listen, admin, globals, site string) string {
	return fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tlog {\n\t\tlevel ERROR\n\t}\n%s}\n:%s {\n\tbind 127.0.0.1\n%s}\n",
		admin, globals, Port(listen), site)
}

// Probe measures, around each wrk run of a contender, what wrk cannot see.
type Probe interface {
	// Measure runs wrk once by calling wrk and returns its figures, with
	// notes for the run's line; an error fails the run.
	Measure(wrk func() (Run, error)) (Run, []string, error)
	// Problems returns what its successful runs flagged, for the summary's
	// errors column and a warning; "" and "" when nothing.
	Problems() (column, warning string)
	// PrintReport prints what it adds below the summary table, if anything.
	PrintReport()
}

// Probes is one probe made of several: each measures around the ones listed
// before it, the first closest to the run. A run fails if any of them fails
// it, and a probe keeps a run's figures once its Measure succeeds: those
// whose Measure may fail after the run are to come first. Notes, problems
// and reports are in the order listed.
type Probes []Probe

func (ps Probes) Measure(wrk func() (Run, error)) (Run, []string, error) {
	notes := make([][]string, len(ps))
	run := wrk
	for i, p := range ps {
		inner := run
		run = func() (Run, error) {
			r, n, err := p.Measure(inner)
			notes[i] = n
			return r, err
		}
	}
	r, err := run()
	if err != nil {
		return Run{}, nil, err
	}
	return r, slices.Concat(notes...), nil
}

func (ps Probes) Problems() (column, warning string) {
	var columns, warnings []string
	for _, p := range ps {
		if c, w := p.Problems(); c != "" {
			columns, warnings = append(columns, c), append(warnings, w)
		}
	}
	return strings.Join(columns, ", "), strings.Join(warnings, "; ")
}

func (ps Probes) PrintReport() {
	for _, p := range ps {
		p.PrintReport()
	}
}

// DefineFlags defines the common flags on the command line's flag set.
func (b *Bench) DefineFlags() {
	names := make([]string, len(b.Contenders))
	for i, c := range b.Contenders {
		names[i] = c.Name
	}
	flag.StringVar(&b.CaddyBin, "caddy", "bin/caddy", "the custom Caddy binary (make build)")
	flag.StringVar(&b.WrkBin, "wrk", "wrk", "wrk binary (apt-get install wrk)")
	flag.IntVar(&b.Threads, "threads", 2, "wrk threads")
	flag.IntVar(&b.Connections, "connections", 50, "wrk connections")
	flag.DurationVar(&b.Duration, "duration", 10*time.Second, "length of each measured wrk run (whole seconds)")
	flag.DurationVar(&b.Warmup, "warmup", time.Second, "unmeasured wrk run per contender before the first round (0: none)")
	flag.IntVar(&b.Rounds, "rounds", 3, "rounds; each runs every contender once")
	flag.StringVar(&b.Only, "only", "", "comma-separated contenders to run ("+strings.Join(names, ",")+")")
}

// Main is the program's main: the trivial backend when started as one,
// else it parses the flags, runs the bench, stops everything it started
// and exits 1 on error, 130 on Ctrl-C or SIGTERM.
func (b *Bench) Main() {
	if addr := os.Getenv(backendEnv); addr != "" {
		serveBackend(addr)
		return
	}
	flag.Parse()
	if b.Rounds < 1 || b.Threads < 1 || b.Connections < b.Threads || b.Duration < time.Second {
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
			// run did not return in time: stop what it started anyway.
			Cleanup()
			os.Exit(130)
		}
	}()
	err := b.run()
	Cleanup()
	close(finished)
	switch {
	case interrupted.Err() != nil:
		fmt.Fprintf(os.Stderr, "%s bench: interrupted; everything it started is stopped\n", b.Name)
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s bench: %v\n", b.Name, err)
		os.Exit(1)
	}
}

// interrupted ends on Ctrl-C or SIGTERM: every wait and every command the
// bench runs ends with it, then run returns and Main cleans up.
var interrupted = context.Background()

// Interrupted is done once the bench is interrupted: what a Prepare or a
// Probe waits for is to end with it.
func Interrupted() context.Context { return interrupted }

func (b *Bench) run() error {
	if _, err := exec.LookPath(b.WrkBin); err != nil {
		return fmt.Errorf("wrk not found (apt-get install wrk): %v", err)
	}
	if _, err := os.Stat(b.CaddyBin); err != nil && b.CaddyPackage != "" {
		fmt.Printf("%s is missing: go build -o %s %s\n", b.CaddyBin, b.CaddyBin, b.CaddyPackage)
		ctx, cancel := context.WithTimeout(interrupted, 10*time.Minute)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", b.CaddyBin, b.CaddyPackage).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("go build -o %s %s: %v: %s", b.CaddyBin, b.CaddyPackage, err, LastLines(string(out), 3))
		}
	}
	if _, err := os.Stat(b.CaddyBin); err != nil {
		return fmt.Errorf("build the custom Caddy first (make build): %v", err)
	}
	dir, err := os.MkdirTemp("", b.Name+"-bench")
	if err != nil {
		return err
	}
	AddCleanup(func() { os.RemoveAll(dir) })

	selected, err := b.selected()
	if err != nil {
		return err
	}
	// What each contender needs, before anything is measured.
	hasHandler := map[string]string{} // handler: why it is missing, "" if not
	for _, c := range selected {
		if c.Handler == "" {
			continue
		}
		if _, checked := hasHandler[c.Handler]; !checked {
			hasHandler[c.Handler] = b.missingHandler(c.Handler)
		}
		c.Skipped = hasHandler[c.Handler]
	}
	var headerNotes []string
	if b.Prepare != nil {
		if headerNotes, err = b.Prepare(dir, selected); err != nil {
			return err
		}
	}

	if b.Script != "" {
		b.scriptPath = filepath.Join(dir, "wrk.lua")
		if err := os.WriteFile(b.scriptPath, []byte(b.Script), 0o644); err != nil {
			return err
		}
	}
	var backend string
	if b.Backend != nil {
		backend, err = b.Backend(dir)
	} else {
		backend, err = startBackend(dir)
	}
	if err != nil {
		return err
	}
	for _, c := range selected {
		if c.Skipped != "" || interrupted.Err() != nil {
			continue
		}
		b.start(c, dir, backend)
	}

	if err := interrupted.Err(); err != nil {
		return err
	}
	b.printHeader(selected, backend, headerNotes)
	var active []*Contender
	for _, c := range selected {
		if c.Skipped != "" {
			fmt.Printf("%s: skipped (%s)\n", c.Name, c.Skipped)
		} else {
			active = append(active, c)
		}
	}
	if len(active) == 0 {
		return errors.New("no contender could run")
	}

	if b.Warmup > 0 {
		// Unmeasured: the first seconds grow heaps and fill connection pools.
		for _, c := range active {
			if _, err := b.runWrk(c.URL, b.Warmup); err != nil {
				if interrupted.Err() != nil {
					return interrupted.Err()
				}
				fmt.Printf("warm-up %s: %v\n", c.Name, err)
			}
		}
	}
	fmt.Println()
	nameWidth := b.nameWidth()
	for round := 1; round <= b.Rounds; round++ {
		for _, c := range active {
			r, notes, err := b.measure(c)
			if interrupted.Err() != nil {
				return interrupted.Err()
			}
			if err != nil {
				fmt.Printf("round %d/%d  %-*s failed: %v\n", round, b.Rounds, nameWidth, c.Name, err)
				continue
			}
			r.Round = round
			c.Runs = append(c.Runs, r)
			fmt.Printf("round %d/%d  %-*s %9.0f req/s  p99 %9v  %9d requests  CPU %5.1f µs/req%s\n",
				round, b.Rounds, nameWidth, c.Name, r.ReqPerSec, r.P99, r.Requests, micros(r.CPUPerRequest()), runNotes(notes, r))
		}
	}
	fmt.Println()
	if b.Summary != nil {
		b.Summary(selected, active)
	} else {
		b.printSummary(selected, active)
	}
	return nil
}

// selected returns the contenders -only names, all of them without it.
func (b *Bench) selected() ([]*Contender, error) {
	var wanted []string
	for _, w := range strings.Split(b.Only, ",") {
		if w = strings.TrimSpace(w); w != "" {
			wanted = append(wanted, w)
		}
	}
	var selected []*Contender
	for _, c := range b.Contenders {
		if len(wanted) == 0 || slices.Contains(wanted, c.Name) {
			selected = append(selected, c)
		}
	}
	for _, w := range wanted {
		if !slices.ContainsFunc(b.Contenders, func(c *Contender) bool { return c.Name == w }) {
			names := make([]string, len(b.Contenders))
			for i, c := range b.Contenders {
				names[i] = c.Name
			}
			return nil, fmt.Errorf("-only: unknown contender %q (%s)", w, strings.Join(names, ","))
		}
	}
	return selected, nil
}

// missingHandler says why the custom Caddy cannot run handler, "" if it can.
func (b *Bench) missingHandler(handler string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.CaddyBin, "list-modules").Output()
	if err != nil {
		return fmt.Sprintf("%s list-modules: %v", b.CaddyBin, err)
	}
	id, what := "http.handlers."+handler, handler+" handler"
	if strings.Contains(handler, ".") {
		id, what = handler, "module "+handler
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			return ""
		}
	}
	return fmt.Sprintf("%s has no %s: rebuild it (make build)", b.CaddyBin, what)
}

// start starts c's Caddy and waits until it serves; c is skipped if it
// does not.
func (b *Bench) start(c *Contender, dir, backend string) {
	listen, admin := loopback.FreeAddr(), "off"
	if c.AdminEndpoint {
		admin = loopback.FreeAddr()
		c.AdminAddr = admin
	}
	cfg := filepath.Join(dir, c.Name+".Caddyfile")
	if err := os.WriteFile(cfg, []byte(c.Config(listen, admin, backend)), 0o644); err != nil {
		c.Skipped = err.Error()
		return
	}
	bin := b.CaddyBin
	if c.Bin != nil {
		bin = c.Bin()
	}
	p, err := StartProcess(c.Name, filepath.Join(dir, c.Name+".log"), bin, "run", "--config", cfg, "--adapter", "caddyfile")
	if err != nil {
		c.Skipped = err.Error()
		return
	}
	c.proc = p
	c.URL = "http://" + listen + "/"
	ready := "http://" + listen + cmp.Or(b.ReadyPath, "/")
	if err := WaitHTTP(ready, p, 15*time.Second); err != nil {
		c.Skipped = err.Error()
		p.Stop()
		return
	}
	if c.Setup != nil {
		if err := c.Setup(c); err != nil {
			c.Skipped = err.Error()
			p.Stop()
		}
	}
}

// measure runs wrk once against c, through its probe if it has one, and
// reads the processor time c's Caddy used meanwhile.
func (b *Bench) measure(c *Contender) (Run, []string, error) {
	wrk := func() (Run, error) {
		before, cpuErr := c.proc.CPUTime()
		r, err := b.runWrk(c.URL, b.Duration)
		if after, err := c.proc.CPUTime(); err == nil && cpuErr == nil {
			r.CPU = after - before
		}
		return r, err
	}
	if c.Probe == nil {
		r, err := wrk()
		return r, nil, err
	}
	return c.Probe.Measure(wrk)
}

// runNotes are a run's notes for its line: the probe's, then its errors.
func runNotes(notes []string, r Run) string {
	if r.Non2xx > 0 {
		notes = append(notes, fmt.Sprintf("!! %d non-2xx responses", r.Non2xx))
	}
	if r.SocketErrors != "" {
		notes = append(notes, "!! socket errors: "+r.SocketErrors)
	}
	if len(notes) == 0 {
		return ""
	}
	return "  " + strings.Join(notes, "  ")
}

// nameWidth is the width of the contender column: 16, or the longest name.
func (b *Bench) nameWidth() int {
	w := 16
	for _, c := range b.Contenders {
		w = max(w, len(c.Name))
	}
	return w
}

func (b *Bench) printHeader(selected []*Contender, backend string, notes []string) {
	for _, line := range b.Title {
		fmt.Println(line)
	}
	w := b.nameWidth()
	for _, c := range selected {
		fmt.Printf("  %-*s %s\n", w, c.Name, c.Label)
	}
	fmt.Printf("wrk: %d threads, %d connections, %v per run, %d rounds (warm-up %v); backend %s",
		b.Threads, b.Connections, wrkSeconds(b.Duration), b.Rounds, b.Warmup, backend)
	for _, n := range notes {
		fmt.Printf("; %s", n)
	}
	fmt.Println()
	if len(b.Headers) > 0 {
		fmt.Println("every request, to every contender, carries:")
		for _, h := range b.Headers {
			fmt.Printf("  %s\n", h)
		}
	}
	if b.Script != "" {
		fmt.Println("every request, to every contender, is shaped by the wrk script:")
		for _, line := range strings.Split(strings.TrimSpace(b.Script), "\n") {
			fmt.Printf("  %s\n", line)
		}
	}
	// Everything shares the machine: a busy one makes every figure noisy.
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average at start: %s (%d CPUs)\n", strings.Join(strings.Fields(string(load))[:3], " "), runtime.NumCPU())
	}
}

func (b *Bench) printSummary(selected, active []*Contender) {
	var base *Contender
	for _, c := range active {
		if c.Name == Baseline {
			base = c
		}
	}
	w := b.nameWidth()
	fmt.Printf("%-*s %12s %10s %9s %8s %7s %13s %9s %s\n", w, "contender", "req/s (med)", "p99 (med)", "vs "+Baseline, "goal", "",
		"CPU/req (med)", "CPU vs "+Baseline, "errors (all rounds)")
	var warnings []string
	for _, c := range selected {
		if c.Skipped != "" {
			fmt.Printf("%-*s skipped (%s)\n", w, c.Name, c.Skipped)
			continue
		}
		if len(c.Runs) == 0 {
			fmt.Printf("%-*s no successful run\n", w, c.Name)
			continue
		}
		var rps, p99s, cpus []float64
		var non2xx int64
		var socket []string
		for _, r := range c.Runs {
			rps = append(rps, r.ReqPerSec)
			p99s = append(p99s, float64(r.P99))
			cpus = append(cpus, float64(r.CPUPerRequest()))
			non2xx += r.Non2xx
			if r.SocketErrors != "" {
				socket = append(socket, r.SocketErrors)
			}
		}
		ratioCol, goalCol, verdict, cpuRatioCol := "-", "", "", "-"
		if base != nil && c != base {
			if ratio, ok := pairedRatioOf(c, base, func(r Run) float64 { return float64(r.CPUPerRequest()) }); ok {
				cpuRatioCol = fmt.Sprintf("%.1f%%", 100*ratio)
			}
			if ratio, ok := pairedRatio(c, base); ok {
				ratioCol = fmt.Sprintf("%.1f%%", 100*ratio)
				if c.Goal > 0 {
					goalCol = fmt.Sprintf(">= %.0f%%", 100*c.Goal)
					verdict = "MISS"
					if ratio >= c.Goal {
						verdict = "PASS"
					}
				}
			}
		}
		var problems []string
		if non2xx > 0 || len(socket) > 0 {
			problems = append(problems, fmt.Sprintf("!! non-2xx %d, socket errors in %d runs", non2xx, len(socket)))
			warnings = append(warnings, fmt.Sprintf("%s: %d non-2xx responses, socket errors: %v: its figures do not measure %s alone", c.Name, non2xx, socket, b.CostOf))
		}
		if c.Probe != nil {
			if column, warning := c.Probe.Problems(); column != "" {
				problems = append(problems, column)
				warnings = append(warnings, warning)
			}
		}
		errCol := "none"
		if len(problems) > 0 {
			errCol = strings.Join(problems, ", ")
		}
		fmt.Printf("%-*s %12.0f %10v %9s %8s %7s %10.1f µs %9s %s\n", w, c.Name, median(rps), time.Duration(median(p99s)).Round(time.Microsecond),
			ratioCol, goalCol, verdict, micros(time.Duration(median(cpus))), cpuRatioCol, errCol)
	}
	if base == nil {
		fmt.Printf("(no ratios: contender %s did not run)\n", Baseline)
	} else {
		fmt.Printf("vs %s: median over rounds of req/s / %s's req/s in the same round; CPU/req: the Caddy process's processor time per request,\n", Baseline, Baseline)
		fmt.Printf("which a busy machine changes less than req/s; CPU vs %s: the median over rounds of its ratio to %s's in the same round\n", Baseline, Baseline)
	}
	for _, c := range active {
		if c.Probe != nil {
			c.Probe.PrintReport()
		}
	}
	for _, w := range warnings {
		fmt.Println("WARNING:", w)
	}
}

// PairedRatio is the median over rounds of c's req/s over base's in the
// same round.
func PairedRatio(c, base *Contender) (float64, bool) { return pairedRatio(c, base) }

// pairedRatio is the median over rounds of c's req/s over base's in the
// same round: rounds are close in time, so machine drift cancels out.
func pairedRatio(c, base *Contender) (float64, bool) {
	return pairedRatioOf(c, base, func(r Run) float64 { return r.ReqPerSec })
}

// pairedRatioOf is pairedRatio of another figure of a run, of the rounds
// in which base's is not 0.
func pairedRatioOf(c, base *Contender, figure func(Run) float64) (float64, bool) {
	var ratios []float64
	for _, r := range c.Runs {
		for _, b := range base.Runs {
			if b.Round == r.Round && figure(b) > 0 && figure(r) > 0 {
				ratios = append(ratios, figure(r)/figure(b))
			}
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	return median(ratios), true
}

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Median is the median of xs, which is not empty.
func Median(xs []float64) float64 { return median(xs) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
